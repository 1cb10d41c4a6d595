// Command flakeid generates, decodes and explains Snowflake-style IDs.
//
//	flakeid next -n 5                  # five IDs, one per line
//	flakeid decode 1234567890123456789 # what is inside an ID
//	flakeid layout --preset sonyflake  # what a layout can address, and until when
//	flakeid --version                  # the version, commit and Go version of this build
//
// Every command takes the layout flags (--preset, --time-bits,
// --datacenter-bits, --worker-bits, --sequence-bits, --epoch, --time-unit);
// each flag can also be set through an environment variable FLAKEID_<FLAG>
// (FLAKEID_PRESET, FLAKEID_WORKER_BITS, FLAKEID_COUNT, …), or by a key of a
// JSON file given with --config (the flag name with _ for -). A flag on the
// command line wins over its environment variable, and both over the file.
//
// Configuration is strict: a key of the --config file that is no flag of any
// command, and an environment variable beginning with FLAKEID_ that no flag
// reads, are usage errors naming the key or variable most likely meant; a
// config value of the wrong JSON kind ({"worker_bits": "3"}) is one too. A
// key or variable of a flag of another command (a file may serve several
// commands) is no error; `serve` names each such key and variable at start,
// on standard error, before it does anything — {"worker": 3} or
// FLAKEID_WORKER does nothing there, the worker id is leased — while the
// one-shot commands, run from shells whose environment serves every
// command, stay quiet.
// Names beginning with FLAKEID_TEST_ are reserved for the test suite and the
// scripts and are not checked (the hidden test flags use a few of them).
//
// Exit status: 0 on success, 1 when the command failed (an impossible layout,
// a worker id the layout cannot hold, an ID that does not parse), 2 when the
// command line itself could not be parsed (unknown flag or command, missing
// argument, a value of the wrong type or not among the choices) or the
// configuration is wrong the same way (an unknown FLAKEID_ variable, an
// unknown key in the --config file).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"github.com/willabides/kongplete"

	"github.com/flakeid/flakeid/internal/humanize"
	"github.com/flakeid/flakeid/snowflake"
)

// Exit statuses of run.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// cli is the command line: one field per subcommand.
type cli struct {
	Version versionFlag `help:"Print the version, the commit and the Go version it was built with, and exit."`
	Config  configFlag  `placeholder:"FILE" env:"FLAKEID_CONFIG" help:"${config_help}"`

	Serve   serveCmd   `cmd:"" help:"Run the ID service: HTTP/JSON (and Leaf's paths), Connect, gRPC, metrics."`
	Next    nextCmd    `cmd:"" help:"Generate IDs and print them, one per line."`
	Decode  decodeCmd  `cmd:"" help:"Show the time, datacenter, worker and sequence inside IDs."`
	Layout  layoutCmd  `cmd:"" help:"Show a layout's bit fields, capacity and lifetime."`
	Bounds  boundsCmd  `cmd:"" help:"Print the smallest and largest IDs whose time lies in a window (for range scans, partitions, cursors)."`
	Workers workersCmd `cmd:"" help:"Inspect worker-id leases."`
	Tags    tagsCmd    `cmd:"" help:"Manage segment-mode tags."`
	Migrate migrateCmd `cmd:"" help:"Plan the move from another ID system (uid-generator, Sonyflake, a sequence…) without a collision."`
	Recover recoverCmd `cmd:"" help:"Start a data directory's damaged or lost state files afresh past safe floors (moves them aside, never deletes); serve, next and tags refuse such files until then."`
	Verify  verifyCmd  `cmd:"" help:"Prove it: run a cluster under clock jumps, crashes and partitions and check every ID it hands out."`
	Mask    maskCmd    `cmd:"" help:"Mask IDs into keyed, non-guessable external IDs (order numbers that do not reveal volume)."`
	Unmask  unmaskCmd  `cmd:"" help:"Turn masked IDs back into internal IDs."`

	Help       helpCmd       `cmd:"" help:"Show the help of a command: flakeid help workers ls is flakeid workers ls --help."`
	Completion completionCmd `cmd:"" help:"Print the shell code that completes flakeid's commands and flags: source <(flakeid completion bash); zsh and fish too."`
}

// streams are the output streams the commands write to; run binds them so
// that tests can capture them.
type streams struct {
	stdout, stderr io.Writer
}

// exitPanic carries kong's exit code (after --help) out of the parser; run
// recovers it, so nothing calls os.Exit but main.
type exitPanic struct{ code int }

// run parses args (without the program name), runs the chosen command with
// its output on stdout and its errors on stderr, and returns the exit status.
// It never calls os.Exit, so tests can call it in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(exitPanic)
			if !ok {
				panic(r)
			}
			code = e.code
		}
	}()

	var c cli
	parser, err := newParser(ctx, &c, stdout, stderr)
	if err != nil { // a mistake in the cli struct's tags
		fmt.Fprintf(stderr, "flakeid: %v\n", err)
		return exitError
	}
	// A shell asking for completions (COMP_LINE set by bash, zsh or fish
	// through completion.go's code) is answered and nothing else runs.
	kongplete.Complete(parser, kongplete.WithExitFunc(func(code int) { panic(exitPanic{code}) }))
	kctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "flakeid: %v\n", err)
		hint := "flakeid --help"
		var perr *kong.ParseError
		if errors.As(err, &perr) && perr.Context != nil {
			if sel := perr.Context.Selected(); sel != nil {
				hint = commandPath(sel) + " --help"
			}
		}
		fmt.Fprintf(stderr, "Run %q for usage.\n", hint)
		return exitUsage
	}
	// After parsing, so that --help still works to look the names up; before
	// running, so that nothing starts with a setting silently ignored.
	if err := checkEnv(parser.Model, os.Environ()); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "flakeid: %s\n", line)
		}
		hint := "flakeid <command> --help"
		if sel := kctx.Selected(); sel != nil {
			hint = commandPath(sel) + " --help"
		}
		fmt.Fprintf(stderr, "Run %q for the variables it reads.\n", hint)
		return exitUsage
	}
	// The service says, before it starts, which settings of other commands
	// it was given and does nothing with, so that nobody believes them
	// applied. (A one-shot command does not: it runs in shells whose
	// environment and config file serve every command.)
	if kctx.Selected() != nil && kctx.Selected().Name == "serve" {
		unused, err := unusedSettings(kctx, string(c.Config), os.Environ())
		if err != nil {
			fmt.Fprintf(stderr, "flakeid: %v\n", err)
			return exitUsage
		}
		for _, u := range unused {
			fmt.Fprintf(stderr, "%s: warning: %s is not read by this command (it sets a flag of another command)\n", commandPath(kctx.Selected()), u)
		}
	}
	if err := kctx.Run(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", commandPath(kctx.Selected()), err)
		return exitError
	}
	return exitOK
}

// commandPath is the command line that selects n, as a user types it:
// "flakeid tags create" for the create command under tags (n may be a
// command's argument node too; nil is the binary itself).
func commandPath(n *kong.Node) string {
	var names []string
	for ; n != nil; n = n.Parent {
		if n.Type == kong.CommandNode {
			names = append(names, n.Name)
		}
	}
	slices.Reverse(names)
	return strings.Join(append([]string{"flakeid"}, names...), " ")
}

// newParser is the kong parser of c, the binary's command line, writing help
// and usage errors to stdout and stderr and binding ctx for the commands.
func newParser(ctx context.Context, c *cli, stdout, stderr io.Writer) (*kong.Kong, error) {
	return kong.New(c,
		kong.Name("flakeid"),
		kong.Description("Generate, decode and explain 63-bit Snowflake-style unique IDs."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(exitPanic{code}) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.ExplicitGroups([]kong.Group{{
			Key:         "layout",
			Title:       "Layout flags:",
			Description: layoutGroupHelp(),
		}}),
		kong.Vars{
			"presets":    strings.Join(snowflake.PresetNames(), ", "),
			"max_count":  humanize.Thousands(maxCount),
			"max_borrow": snowflake.DefaultMaxBorrow.String(),
			// configHelpPrinter puts an example of the chosen command's
			// own flags in its place.
			"config_help": configFlagHelp,
		},
		kong.Help(configHelpPrinter),
		kong.ValueFormatter(helpWithDefault),
		kong.BindTo(ctx, (*context.Context)(nil)),
		kong.Bind(&streams{stdout: stdout, stderr: stderr}),
	)
}

// configFlagHelp is the --config flag's own line of help: the paragraph
// (configHelp) follows the flags, so that it does not push them down.
const configFlagHelp = "Read flag values from a JSON file (see \"Config file\" below)."

// configHelpPrinter is kong's help followed by a paragraph on the config
// file made for the command asked about: its example keys are flags of that
// command.
func configHelpPrinter(options kong.HelpOptions, kctx *kong.Context) error {
	for _, f := range kctx.Model.Flags {
		if f.Name == "config" {
			f.Help = configFlagHelp
		}
	}
	if err := kong.DefaultHelpPrinter(options, kctx); err != nil {
		return err
	}
	fmt.Fprintf(kctx.Stdout, "\nConfig file (--config FILE, $FLAKEID_CONFIG):\n%s", wrapText(configHelp(kctx), "  ", 80))
	return nil
}

// wrapText breaks text into lines of at most width characters (words are
// never split), each with indent before it.
func wrapText(text, indent string, width int) string {
	var b, line strings.Builder
	for _, w := range strings.Fields(text) {
		if line.Len() > 0 && len(indent)+line.Len()+1+len(w) > width {
			b.WriteString(indent + line.String() + "\n")
			line.Reset()
		}
		if line.Len() > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(w)
	}
	if line.Len() > 0 {
		b.WriteString(indent + line.String() + "\n")
	}
	return b.String()
}

// configHelp is the help of --config for the command kctx selects (or for
// no command in particular, when kctx is nil or selects none), with an
// example of a file made of up to three of that command's own flags.
func configHelp(kctx *kong.Context) string {
	const (
		rule  = "Read flag values from a JSON file whose keys are flag names with _ for -"
		after = "; flags and environment variables win over it. A key that is no flag of any command is an error " +
			"(keys of other commands' flags are ignored, so one file can serve several commands)."
	)
	if kctx == nil || kctx.Selected() == nil {
		return rule + ", e.g. {\"data_dir\": \"/var/lib/flakeid\", \"coordinator\": \"etcd://10.0.0.1:2379\"}" + after
	}
	has := map[string]bool{}
	for _, f := range kctx.Flags() {
		if configurable(f) && !f.Hidden {
			has[configKey(f.Name)] = true
		}
	}
	var example []string
	for _, kv := range configExamples() {
		if has[kv[0]] && len(example) < 3 {
			example = append(example, strconv.Quote(kv[0])+": "+kv[1])
		}
	}
	if len(example) == 0 {
		return rule + after
	}
	return rule + ", e.g. for " + commandPath(kctx.Selected()) + " {" + strings.Join(example, ", ") + "}" + after
}

// configExamples are the keys --config's help may show, with a value each,
// in the order it prefers them.
func configExamples() [][2]string {
	return [][2]string{
		{"listen", `"0.0.0.0:8080"`},
		{"coordinator", `"etcd://10.0.0.1:2379"`},
		{"store", `"postgres://flakeid@10.0.0.2:5432/ids"`},
		{"max_count", "1000"},
		{"datacenter", "1"},
		{"data_dir", `"/var/lib/flakeid"`},
		{"duration", `"30m"`},
		{"target", `"http://10.0.0.1:8080"`},
		{"mask_keyring", `"/etc/flakeid/keyring"`},
		{"form", `"base62"`},
		{"server", `"http://10.0.0.1:8080"`},
		{"format", `"base58"`},
		{"preset", `"sonyflake"`},
		{"json", "true"},
	}
}

// helpWithDefault is kong's help of a flag, plus "(default X)" when the
// flag has a default that its placeholder hides (--datacenter=D) and its
// help does not state.
func helpWithDefault(v *kong.Value) string {
	if v.Tag.PlaceHolder != "" && v.HasDefault && v.Default != "" && !v.IsBool() &&
		!strings.Contains(v.Help, "default "+v.Default) {
		d := "(default " + v.Default + ")"
		if v.Target.Kind() == reflect.String {
			d = "(default " + strconv.Quote(v.Default) + ")"
		}
		shown := *v // a copy: the model keeps its own help
		if h, ok := strings.CutSuffix(v.Help, "."); ok {
			shown.Help = h + " " + d + "."
		} else {
			shown.Help = v.Help + " " + d
		}
		return kong.DefaultHelpValueFormatter(&shown)
	}
	return kong.DefaultHelpValueFormatter(v)
}

// layoutGroupHelp describes the layout flags and lists the presets.
func layoutGroupHelp() string {
	var b strings.Builder
	b.WriteString("The layout starts from --preset; each width, --epoch or --time-unit flag given then " +
		"overrides that one field of the preset, so the widths must still add up to at most 63 bits " +
		"(--time-bits 0 gives the time field whatever the other fields leave). Presets:")
	for _, name := range snowflake.PresetNames() {
		l, _ := snowflake.Preset(name)
		fmt.Fprintf(&b, "\n  %-10s %s", name, l)
	}
	return b.String()
}

// layoutFlags select the layout; every command embeds them. A nil pointer
// means the flag was not given, so the preset's value stands.
type layoutFlags struct {
	Preset         string         `default:"default" placeholder:"NAME" env:"FLAKEID_PRESET" group:"layout" help:"Layout preset to start from: ${presets}."`
	TimeBits       *int           `placeholder:"N" env:"FLAKEID_TIME_BITS" group:"layout" help:"Width of the time field (0 = the bits the other fields leave)."`
	DatacenterBits *int           `placeholder:"N" env:"FLAKEID_DATACENTER_BITS" group:"layout" help:"Width of the datacenter field."`
	WorkerBits     *int           `placeholder:"N" env:"FLAKEID_WORKER_BITS" group:"layout" help:"Width of the worker field."`
	SequenceBits   *int           `placeholder:"N" env:"FLAKEID_SEQUENCE_BITS" group:"layout" help:"Width of the per-tick sequence."`
	Epoch          *epochFlag     `placeholder:"TIME" env:"FLAKEID_EPOCH" group:"layout" help:"Epoch the time field counts from: RFC 3339 (2025-01-01T00:00:00Z), a UTC date (2025-01-01) or Unix milliseconds."`
	TimeUnit       *time.Duration `placeholder:"DURATION" env:"FLAKEID_TIME_UNIT" group:"layout" help:"Length of one tick of the time field, 1µs–1h (e.g. 1ms, 10ms)."`
}

// overridden reports whether any flag besides --preset was given.
func (f *layoutFlags) overridden() bool {
	return f.TimeBits != nil || f.DatacenterBits != nil || f.WorkerBits != nil ||
		f.SequenceBits != nil || f.Epoch != nil || f.TimeUnit != nil
}

// layout builds the layout the flags describe, normalized: the preset, then
// each given flag in place of the preset's field.
func (f *layoutFlags) layout() (snowflake.Layout, error) {
	l, err := snowflake.Preset(f.Preset)
	if err != nil {
		return l, err
	}
	if f.TimeBits != nil {
		l.TimeBits = *f.TimeBits
	}
	if f.DatacenterBits != nil {
		l.DatacenterBits = *f.DatacenterBits
	}
	if f.WorkerBits != nil {
		l.WorkerBits = *f.WorkerBits
	}
	if f.SequenceBits != nil {
		l.SequenceBits = *f.SequenceBits
	}
	if f.Epoch != nil {
		l.Epoch = time.Time(*f.Epoch)
	}
	if f.TimeUnit != nil {
		// The library reads a zero unit as "the default, 1ms"; on the
		// command line 0 is a mistake, not a request for the default.
		if *f.TimeUnit == 0 {
			return l, fmt.Errorf("--time-unit 0s: want %v–%v", snowflake.MinTimeUnit, snowflake.MaxTimeUnit)
		}
		l.TimeUnit = *f.TimeUnit
	}
	n, err := l.Normalize()
	if err != nil {
		if f.overridden() && l.TimeBits+l.DatacenterBits+l.WorkerBits+l.SequenceBits > snowflake.MaxBits {
			err = fmt.Errorf("%w\n(width flags replace the %s preset's fields one by one; narrow another field too, or give --time-bits 0 for whatever is left)", err, f.Preset)
		}
		return n, err
	}
	return n, nil
}

// epochFlag is the value of --epoch: an RFC 3339 time, a date or Unix
// milliseconds.
type epochFlag time.Time

// UnmarshalText parses an epoch for kong.
func (e *epochFlag) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		*e = epochFlag(time.UnixMilli(ms).UTC())
		return nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		*e = epochFlag(t.UTC())
		return nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		*e = epochFlag(t)
		return nil
	}
	return fmt.Errorf("epoch %q: want an RFC 3339 time (2025-01-01T00:00:00Z), a date (2025-01-01) or Unix milliseconds", s)
}

// timeFormat is RFC 3339 with milliseconds, or with microseconds for a
// layout whose ticks are shorter than a millisecond.
func timeFormat(l snowflake.Layout) string {
	if l.TimeUnit < time.Millisecond {
		return "2006-01-02T15:04:05.000000Z07:00"
	}
	return "2006-01-02T15:04:05.000Z07:00"
}

// writeFields writes "key: value" lines with the values aligned.
func writeFields(w io.Writer, fields [][2]string) error {
	width := 0
	for _, f := range fields {
		width = max(width, len(f[0]))
	}
	var b strings.Builder
	for _, f := range fields {
		fmt.Fprintf(&b, "%-*s %s\n", width+1, f[0]+":", f[1])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

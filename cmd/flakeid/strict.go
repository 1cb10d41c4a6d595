package main

// Configuration is strict: a key of a --config file or a FLAKEID_ variable
// that nothing reads is an error, not a setting silently ignored (a typo such
// as "coordinater" once made every node fall back to its own file
// coordinator, all of them leasing worker 0).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/flakeid/flakeid/internal/suggest"
)

// envPrefix begins the name of every environment variable of the binary.
const envPrefix = "FLAKEID_"

// testEnvPrefix begins the names reserved for the test suite and the scripts
// (FLAKEID_TEST_ETCD, FLAKEID_TEST_STEPS_DIR, …): checkEnv skips them, so
// that scripts can export them to everything they start. The binary's own
// hidden test flags (FLAKEID_TEST_CLOCK_OFFSET, FLAKEID_TEST_CLOCK_ADMIN)
// use this prefix too, and still read their variables.
const testEnvPrefix = "FLAKEID_TEST_"

// configFlag is the value of --config: a JSON file whose keys are flag
// names with _ for - ({"listen": "0.0.0.0:8080", "max_count": 1000}).
// Flags and environment variables win over it. Unlike kong.ConfigFlag it is
// read strictly: a key that is no flag of any command, a key given twice or
// data after the object is an error naming the file and the key (and the
// key most likely meant).
type configFlag string

// BeforeResolve reads the file before kong resolves the flags not given on
// the command line, and makes it a resolver of theirs.
func (configFlag) BeforeResolve(k *kong.Kong, kctx *kong.Context, trace *kong.Path) error {
	path, _ := kctx.FlagValue(trace.Flag).(configFlag)
	r, err := loadConfig(k.Model, kctx, string(path))
	if err != nil {
		return err
	}
	kctx.AddResolver(r)
	return nil
}

// loadConfig reads the config file at path and returns the kong resolver of
// its values, after checking its keys against the flags of app. kctx (may be
// nil) is the command line being parsed: when no key is near an unknown
// one, the message lists the keys of the chosen command.
func loadConfig(app *kong.Application, kctx *kong.Context, path string) (kong.Resolver, error) {
	path = kong.ExpandPath(path)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	if err := checkJSON(data, configShape(app, kctx)); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	r, err := kong.JSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return r, nil
}

// configKey is the key of a config file that sets flag: the flag's name with
// _ for -, as kong.JSON looks it up first.
func configKey(name string) string { return strings.ReplaceAll(name, "-", "_") }

// configAlias is the other key kong.JSON reads for a flag: its name in
// camelCase (max-count → maxCount).
func configAlias(name string) string {
	parts := strings.Split(name, "-")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// configShape is the shape of a config file: an object whose keys are the
// flags of every command (a file may serve several commands, as `serve` and
// `workers ls` on one node do), except --help and --config. A flag name
// with dots would be a nested object, as kong.JSON reads it; no flag has
// one.
func configShape(app *kong.Application, kctx *kong.Context) *shape {
	s := &shape{keys: map[string]*shape{}, aliases: map[string]string{}}
	_ = kong.Visit(app, func(node kong.Visitable, next kong.Next) error {
		if f, ok := node.(*kong.Flag); ok && configurable(f) {
			addConfigKey(s, f.Name, scalarOf(f.Target.Type()))
		}
		return next(nil)
	})
	if kctx != nil {
		if sel := kctx.Selected(); sel != nil {
			var listed []string
			for _, f := range kctx.Flags() {
				if configurable(f) && !f.Hidden {
					listed = append(listed, configKey(f.Name))
				}
			}
			slices.Sort(listed)
			s.listed, s.listNote = slices.Compact(listed), " of "+commandPath(sel)
		}
	}
	return s
}

// configurable reports whether a config file may set flag f.
func configurable(f *kong.Flag) bool {
	if f.Name == "help" {
		return false
	}
	// Not Target.Interface(): flags of unexported embedded structs
	// (maskKeyFlags) cannot be read that way.
	t := f.Target.Type()
	return t != reflect.TypeFor[configFlag]() && t != reflect.TypeFor[versionFlag]()
}

// scalarOf is the JSON kind a config value of a flag of type t must be: "a
// number" for Go's plain integer and float types, "a boolean" for bool, ""
// (any) otherwise — durations, named types with parsers of their own, and
// strings, which kong reads from any scalar. A string where a number is
// meant ({"worker_bits": "3"}) is refused, not read as the number.
func scalarOf(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.PkgPath() != "" {
		return "" // a named type: time.Duration, a level, an enum
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	}
	return ""
}

// addConfigKey adds the key of the flag name to s, nested at its dots; its
// value must be of the JSON kind scalar ("": any). A key that flags of
// different kinds share takes any value.
func addConfigKey(s *shape, name, scalar string) {
	parts := strings.Split(name, ".")
	for _, part := range parts[:len(parts)-1] {
		key := configKey(part)
		sub := s.keys[key]
		if sub == nil || sub.keys == nil {
			sub = &shape{keys: map[string]*shape{}, aliases: map[string]string{}}
			s.keys[key] = sub
		}
		s = sub
	}
	last := parts[len(parts)-1]
	key := configKey(last)
	switch prev, seen := s.keys[key]; {
	case !seen && scalar != "":
		s.keys[key] = &shape{scalar: scalar}
	case !seen:
		s.keys[key] = nil
	case prev != nil && prev.scalar != scalar:
		s.keys[key] = nil
	}
	if a := configAlias(last); a != configKey(last) {
		s.aliases[a] = configKey(last)
	}
}

// knownEnv returns the environment variables the binary reads: those of
// every flag and argument of every command of app, as the model (built from
// the env tags) holds them. The binary reads no FLAKEID_ variable otherwise
// (TestNoDirectEnvReads keeps it so).
func knownEnv(app *kong.Application) map[string]bool {
	known := map[string]bool{}
	_ = kong.Visit(app, func(node kong.Visitable, next kong.Next) error {
		if v, ok := node.(*kong.Value); ok && v.Tag != nil {
			for _, env := range v.Tag.Envs {
				known[env] = true
			}
		}
		return next(nil)
	})
	return known
}

// checkEnv reports every variable of environ ("NAME=value") whose name
// begins with FLAKEID_ but that no flag of app reads (a misspelling such as
// FLAKEID_COORDINATER would otherwise be ignored), naming the variable most
// likely meant. Names beginning with FLAKEID_TEST_ are reserved for the test
// suite and the scripts, and skipped.
func checkEnv(app *kong.Application, environ []string) error {
	known := knownEnv(app)
	var suffixes []string // the names without the prefix, to compare
	for name := range known {
		if s, ok := strings.CutPrefix(name, envPrefix); ok {
			suffixes = append(suffixes, s)
		}
	}
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || strings.HasPrefix(name, testEnvPrefix) || known[name] {
			continue
		}
		unknown = append(unknown, name)
	}
	slices.Sort(unknown)
	var errs []error
	for _, name := range slices.Compact(unknown) {
		if best, ok := suggest.Nearest(strings.TrimPrefix(name, envPrefix), suffixes); ok {
			errs = append(errs, fmt.Errorf("unknown environment variable %s; did you mean %s?", name, envPrefix+best))
		} else {
			errs = append(errs, fmt.Errorf("unknown environment variable %s: no flag of flakeid reads it "+
				"(each command's --help lists its variables; names beginning with %s are reserved for tests)", name, testEnvPrefix))
		}
	}
	return errors.Join(errs...)
}

// unusedSettings names the settings a run of the selected command of kctx
// does not read although they were given: keys of the --config file at
// configPath ("" for none) and FLAKEID_ variables of environ that belong to
// flags of other commands. A config file may serve several commands (serve
// and workers ls on one node), so such a key is no error; but an operator
// who put {"worker": 3} in the file of `serve` (where the worker id is
// leased) must be told that it does nothing there. run prints a warning
// for each at start.
func unusedSettings(kctx *kong.Context, configPath string, environ []string) ([]string, error) {
	used, usedEnv := map[string]bool{}, map[string]bool{}
	for _, f := range kctx.Flags() {
		used[configKey(f.Name)], used[configAlias(f.Name)] = true, true
		if f.Tag != nil {
			for _, e := range f.Tag.Envs {
				usedEnv[e] = true
			}
		}
	}
	var unused []string
	if configPath != "" {
		data, err := os.ReadFile(kong.ExpandPath(configPath))
		if err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(data, &keys); err != nil {
			return nil, fmt.Errorf("config %s: %w", configPath, err)
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if !used[k] && k != "config" {
				unused = append(unused, fmt.Sprintf("the key %q of the config file %s", k, configPath))
			}
		}
	}
	known := knownEnv(kctx.Model)
	var envs []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if known[name] && !usedEnv[name] {
			envs = append(envs, name)
		}
	}
	slices.Sort(envs)
	for _, name := range slices.Compact(envs) {
		unused = append(unused, "the environment variable "+name)
	}
	return unused, nil
}

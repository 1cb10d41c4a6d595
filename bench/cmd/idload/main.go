// Command idload measures ID services on this machine: N workers, each with
// its own connection, repeat one operation for a fixed window and the tool
// prints ops/s, IDs/s and p50/p90/p99/p99.9 latency (and appends a JSON
// line with -json). With -rate the workers offer a fixed load instead, and
// latency counts from each operation's scheduled time (wrk2's method). It
// only ever targets loopback addresses.
//
// Modes:
//
//	http            GET -url (keep-alive, one connection per worker, with a
//	                minimal HTTP/1.1 client, or -client nethttp); IDs per
//	                answer from -ids: one, ranges (the JSON "count" of
//	                ?format=ranges) or lines (Accept: text/plain)
//	redis-incr      one INCR of -key per op (go-redis, one connection per worker)
//	pg-nextval      one SELECT nextval(-seq) per op (pgx, one connection per worker)
//	connect-unary   NextSnowflake(count=-count), or NextSegment(-tag, -count),
//	                over -protocol connect, grpc or grpcweb
//	connect-stream  StreamSnowflake(count=-count, batch=-batch): each received
//	                message is an op, its ranges' counts are its IDs
//
// Subcommands:
//
//	idload wrk -label L -round R -json FILE < wrk-output   record wrk --latency output
//	idload redis-benchmark -label L … < output            record redis-benchmark output: --csv, or the
//	                                                      default output (--precision 3), which has p99.9
//	idload redis-benchmark -server-pid P … -- CMD…        run the tool's command and record its output,
//	                                                      with the server's CPU time while it ran
//	idload hello -listen ADDR [-timeouts]                 serve a constant ID with plain net/http:
//	                                                      the ceiling of any net/http handler here
//	idload resp-hello -listen ADDR [-loop goroutines|epoll] answer every RESP command with a counter:
//	                                                      the ceiling of a Go RESP server here
//	idload summary [-ratio A/B]… [-p999-ratio A/B]… [-cpu-ratio A/B]… FILE…
//	                                                      medians per label (and of the fixed-rate
//	                                                      runs, with the generator's lateness),
//	                                                      same-round ratios of IDs/s, of p99.9 and
//	                                                      of IDs per server CPU-second
//
// Examples:
//
//	idload -mode http -url http://127.0.0.1:8080/api/snowflake/get/x -c 8 -d 10s
//	idload -mode redis-incr -c 8 -d 10s
//	idload -mode pg-nextval -pg postgres://postgres@127.0.0.1:5432/test -c 8
//	idload -mode connect-unary -base http://127.0.0.1:8080 -protocol grpc -count 100000 -c 2
//	idload -mode connect-stream -base http://127.0.0.1:8080 -c 2 -batch 100000
//	idload -mode http -url http://127.0.0.1:8080/api/snowflake/get/x -c 8 -rate 20000   # fixed rate, p99.9 as clients see it
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/flakeid/flakeid/bench/load"
)

type options struct {
	mode, label, jsonOut, note string
	round, workers, serverPID  int
	warmup, duration           time.Duration
	rate                       float64

	url, accept, ids, client string // http

	redisAddr, key string // redis-incr
	pgDSN, seq     string // pg-nextval

	base, protocol, tag string // connect-*
	count, batch        int64
	h2c                 bool
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "wrk":
			exit(ingestCmd("wrk", parseWrkP999, os.Args[2:]))
			return
		case "redis-benchmark":
			exit(ingestCmd("redis-benchmark", parseRedisBenchmarkAny, os.Args[2:]))
			return
		case "hello":
			exit(helloCmd(os.Args[2:]))
			return
		case "resp-hello":
			exit(respHelloCmd(os.Args[2:]))
			return
		case "summary":
			exit(summaryCmd(os.Args[2:]))
			return
		}
	}
	var o options
	flag.StringVar(&o.mode, "mode", "", "http, redis-incr, pg-nextval, connect-unary or connect-stream")
	flag.StringVar(&o.label, "label", "", "label of the result (default: the mode)")
	flag.IntVar(&o.round, "round", 0, "round number, for same-round ratios in the summary")
	flag.StringVar(&o.jsonOut, "json", "", "append the result as a JSON line to this file")
	flag.StringVar(&o.note, "note", "", "free text stored with the result")
	flag.IntVar(&o.workers, "c", 8, "concurrent workers, each with its own connection")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured warm-up before the window")
	flag.DurationVar(&o.duration, "d", 10*time.Second, "measured window")
	flag.IntVar(&o.serverPID, "server-pid", 0, "the server's process id: record the CPU time it used in the window (Linux /proc), so that the summary can compare IDs per server CPU-second (-cpu-ratio); 0: not measured")
	flag.Float64Var(&o.rate, "rate", 0, "offered load in ops/s over all workers (wrk2's fixed-rate mode: latency from each op's scheduled time, coordinated omission corrected); 0: closed loop")
	flag.StringVar(&o.url, "url", "", "http: the URL to GET")
	flag.StringVar(&o.accept, "accept", "", "http: Accept header")
	flag.StringVar(&o.client, "client", "raw", "http: raw (a minimal HTTP/1.1 keep-alive client, cheap on CPU) or nethttp (Go's net/http client)")
	flag.StringVar(&o.ids, "ids", "one", "http: IDs per answer: one, ranges (JSON \"count\") or lines")
	flag.StringVar(&o.redisAddr, "redis", "127.0.0.1:6379", "redis-incr: address")
	flag.StringVar(&o.key, "key", "idload:incr", "redis-incr: key to INCR")
	flag.StringVar(&o.pgDSN, "pg", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "pg-nextval: connection URL")
	flag.StringVar(&o.seq, "seq", "idload_seq", "pg-nextval: sequence (created when missing)")
	flag.StringVar(&o.base, "base", "http://127.0.0.1:8080", "connect-*: base URL of the server")
	flag.StringVar(&o.protocol, "protocol", "connect", "connect-*: connect, grpc or grpcweb")
	flag.StringVar(&o.tag, "tag", "", "connect-unary: call NextSegment for this tag instead of NextSnowflake")
	flag.Int64Var(&o.count, "count", 1, "connect-unary: IDs per call; connect-stream: IDs per stream (0: until the window ends)")
	flag.Int64Var(&o.batch, "batch", 0, "connect-stream: most IDs per message (0: the server's default)")
	flag.BoolVar(&o.h2c, "h2c", false, "connect-*: use HTTP/2 without TLS for the connect and grpcweb protocols too (grpc always does)")
	flag.Parse()
	if flag.NArg() > 0 {
		exit(fmt.Errorf("unexpected arguments %q", flag.Args()))
	}
	exit(run(o))
}

func exit(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "idload:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.label == "" {
		o.label = o.mode
	}
	var (
		newWorker func(context.Context, int) (load.Worker, error)
		target    string
		err       error
	)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	switch o.mode {
	case "http":
		target = o.url + " (" + o.client + ")"
		newWorker, err = httpWorkers(o)
	case "redis-incr":
		target = "redis://" + o.redisAddr + " INCR " + o.key
		newWorker, err = redisWorkers(o)
	case "pg-nextval":
		target = o.pgDSN + " nextval(" + o.seq + ")"
		newWorker, err = pgWorkers(ctx, o)
	case "connect-unary", "connect-stream":
		target = o.base + " " + o.protocol
		newWorker, err = connectWorkers(o)
	case "":
		return errors.New("no -mode (http, redis-incr, pg-nextval, connect-unary, connect-stream)")
	default:
		return fmt.Errorf("unknown -mode %q", o.mode)
	}
	if err != nil {
		return err
	}
	cfg := load.RunConfig{
		Workers:   o.workers,
		Warmup:    o.warmup,
		Duration:  o.duration,
		NewWorker: newWorker,
		Rate:      o.rate,
		Spin:      load.SpinBefore,
	}
	if o.serverPID != 0 {
		if _, err := load.ProcessCPU(o.serverPID); err != nil {
			return fmt.Errorf("-server-pid %d: %w", o.serverPID, err)
		}
		cfg.ServerCPU = func() (time.Duration, error) { return load.ProcessCPU(o.serverPID) }
	}
	rec, _, err := load.Run(ctx, cfg)
	rec.Label, rec.Round, rec.Mode, rec.Target = o.label, o.round, o.mode, target
	if o.note != "" && rec.Note != "" {
		rec.Note = o.note + "; " + rec.Note
	} else if o.note != "" {
		rec.Note = o.note
	}
	if err != nil {
		return err
	}
	fmt.Println(rec.String())
	if o.jsonOut != "" {
		return load.Append(o.jsonOut, &rec)
	}
	return nil
}

// ingestCmd records the output of another load tool (wrk, redis-benchmark)
// read from stdin.
func ingestCmd(tool string, parse func([]byte) (load.Record, error), args []string) error {
	fs := flag.NewFlagSet("idload "+tool, flag.ContinueOnError)
	label := fs.String("label", tool, "label of the result")
	round := fs.Int("round", 0, "round number")
	jsonOut := fs.String("json", "", "append the result as a JSON line to this file")
	note := fs.String("note", "", "free text stored with the result")
	workers := fs.Int("c", 0, "connections, when the tool's output does not say (redis-benchmark)")
	target := fs.String("target", "", "what was measured (default: what the output says)")
	errs := fs.Int64("errors", 0, "errors counted elsewhere (the server's metrics), added to the output's")
	serverPID := fs.Int("server-pid", 0, "with the tool's command after the flags: the server's process id; the CPU time it used while the command ran is recorded, as -server-pid of a load run (0: not measured)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var in []byte
	var cpu time.Duration
	var err error
	switch {
	case fs.NArg() > 0:
		in, cpu, err = runTool(fs.Args(), *serverPID)
	case *serverPID != 0:
		err = fmt.Errorf("idload %s: -server-pid needs the tool's command after the flags (its output on stdin gives no window to measure)", tool)
	default:
		in, err = io.ReadAll(os.Stdin)
	}
	if err != nil {
		return err
	}
	rec, err := parse(in)
	if err != nil {
		return err
	}
	rec.ServerCPU = cpu.Seconds()
	rec.Label, rec.Round, rec.Note = *label, *round, *note
	if *target != "" {
		rec.Target = *target
	}
	rec.Errors += *errs
	if rec.Workers == 0 {
		rec.Workers = *workers
	}
	rec.Load1 = load.Load1()
	rec.Load1E = rec.Load1
	fmt.Println(rec.String())
	if *jsonOut != "" {
		return load.Append(*jsonOut, &rec)
	}
	return nil
}

// runTool runs a load tool's command and returns its standard output (its
// standard error goes to idload's), and, with a server pid, the CPU time
// the server used while the command ran (load.ProcessCPU).
func runTool(argv []string, serverPID int) (out []byte, cpu time.Duration, err error) {
	var c0 time.Duration
	if serverPID != 0 {
		if c0, err = load.ProcessCPU(serverPID); err != nil {
			return nil, 0, fmt.Errorf("server CPU time: %w", err)
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	if out, err = cmd.Output(); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	if serverPID != 0 {
		c1, err := load.ProcessCPU(serverPID)
		if err != nil {
			return nil, 0, fmt.Errorf("server CPU time: %w", err)
		}
		cpu = c1 - c0
	}
	return out, cpu, nil
}

// helloCmd serves GET / with a constant 19-digit ID as text/plain through a
// bare net/http server: no routing, metrics or generation. wrk against it
// measures what net/http itself costs on this machine, the ceiling for any
// handler served by net/http (flakeid's HTTP API is).
func helloCmd(args []string) error {
	fs := flag.NewFlagSet("idload hello", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:18089", "address to serve on (loopback)")
	timeouts := fs.Bool("timeouts", false, "also ReadTimeout 10s, WriteTimeout 30s and IdleTimeout 30s, as flakeid serve's defaults: what the deadlines they set on every request cost")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctype := []string{"text/plain; charset=utf-8"}
	body := []byte("1234567890123456789")
	srv := &http.Server{Addr: *listen, ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header()["Content-Type"] = ctype
			w.Write(body)
		})}
	if *timeouts {
		srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout = 10*time.Second, 30*time.Second, 30*time.Second
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func summaryCmd(args []string) error {
	fs := flag.NewFlagSet("idload summary", flag.ContinueOnError)
	var ratios, tails multiFlag
	fs.Var(&ratios, "ratio", "LABEL_A/LABEL_B: IDs/s ratio per round (repeatable)")
	fs.Var(&tails, "p999-ratio", "LABEL_A/LABEL_B: p99.9 latency ratio per round (repeatable)")
	var cpus multiFlag
	fs.Var(&cpus, "cpu-ratio", "LABEL_A/LABEL_B: ratio of IDs per server CPU-second per round, of runs with -server-pid (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var recs []load.Record
	for _, path := range fs.Args() {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		rs, err := load.ReadRecords(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		recs = append(recs, rs...)
	}
	if len(recs) == 0 {
		return errors.New("summary: no records")
	}
	load.WriteSummary(os.Stdout, recs)
	if slices.ContainsFunc(recs, func(r load.Record) bool { return r.Rate > 0 }) {
		fmt.Println()
		load.WriteFixedRate(os.Stdout, recs)
	}
	for _, p := range []struct {
		pairs []string
		of    func([]load.Record, []string) ([]load.Ratio, error)
	}{{ratios, load.Ratios}, {tails, load.P999Ratios}, {cpus, load.CPURatios}} {
		if len(p.pairs) == 0 {
			continue
		}
		rs, err := p.of(recs, p.pairs)
		if err != nil {
			return err
		}
		fmt.Println()
		load.WriteRatios(os.Stdout, rs)
	}
	return nil
}

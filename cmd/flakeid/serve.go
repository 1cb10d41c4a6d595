package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/flakeid/flakeid/backend/nats"
	"github.com/flakeid/flakeid/node"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/server"
	"github.com/flakeid/flakeid/snowflake"
)

// serveCmd runs the ID service. With no flags it is a complete single node:
// a worker id leased from a file and segments in a bbolt file, both under
// the data directory, on 127.0.0.1:8080.
type serveCmd struct {
	Listen          string        `default:"127.0.0.1:8080" env:"FLAKEID_LISTEN" help:"Address to serve HTTP, Connect, gRPC and gRPC-Web on."`
	MaxCount        int           `default:"100000" env:"FLAKEID_MAX_COUNT" help:"Most IDs one request may ask for, 1–10,000,000."`
	StreamBatch     int           `default:"4096" env:"FLAKEID_STREAM_BATCH" help:"Most IDs per streamed message, 1–max-count."`
	TokensFile      string        `type:"path" placeholder:"FILE" env:"FLAKEID_TOKENS_FILE" help:"JSON list of bearer tokens, [{\"name\":…,\"token\":…(≥16 chars),\"tags\":[\"orders\" or \"*\"],\"snowflake\":true,\"admin\":false}]; enables auth (health, readiness and metrics stay open)."`
	TLSCert         string        `type:"path" placeholder:"FILE" env:"FLAKEID_TLS_CERT" help:"PEM certificate: serve HTTPS (with --tls-key)."`
	TLSKey          string        `type:"path" placeholder:"FILE" env:"FLAKEID_TLS_KEY" help:"PEM private key of --tls-cert."`
	ShutdownTimeout time.Duration `default:"10s" env:"FLAKEID_SHUTDOWN_TIMEOUT" help:"How long a graceful shutdown waits for in-flight requests, 0–5m."`
	ReadTimeout     time.Duration `default:"10s" env:"FLAKEID_READ_TIMEOUT" help:"A whole request, headers and body, must arrive within this, 1s–5m (its headers within 10s or this, the shorter); a slower client's connection is closed."`
	WriteTimeout    time.Duration `default:"30s" env:"FLAKEID_WRITE_TIMEOUT" help:"Writing one answer must end within this, 1s–10m; a stream (StreamSnowflake, health Watch) gets it anew for each message, so it lasts as long as the client reads."`
	IdleTimeout     time.Duration `default:"30s" env:"FLAKEID_IDLE_TIMEOUT" help:"An idle keep-alive connection is closed after this, 1s–1h."`
	MaxConns        int           `default:"1024" env:"FLAKEID_MAX_CONNS" help:"Most connections open at once, idle ones included, 1–1,000,000; beyond it a new connection gets a 503 (plain HTTP) or is closed (TLS) at once."`
	CORSOrigin      []string      `name:"cors-origin" placeholder:"ORIGIN" env:"FLAKEID_CORS_ORIGIN" help:"Let browser pages of this origin (https://app.example.com; * for any; repeat or comma-separate for more) call the HTTP API, Connect and gRPC-Web: preflights answered, Access-Control-Allow-Origin set. Off unless given."`
	MetricsMaxTags  int           `default:"1000" env:"FLAKEID_METRICS_MAX_TAGS" help:"Most segment tags with a tag label of their own in the metrics, 0–100,000; the others are counted under tag=\"(other)\"."`
	RESPListen      string        `name:"resp-listen" placeholder:"HOST:PORT" env:"FLAKEID_RESP_LISTEN" help:"Also serve the Redis protocol here (off unless given): any Redis client's INCR <tag> or INCR snowflake gets IDs; TLS when --tls-cert is set; see docs/OPERATIONS.md."`
	RESPMaxConns    int           `name:"resp-max-conns" default:"1024" env:"FLAKEID_RESP_MAX_CONNS" help:"Most Redis-protocol connections at once, 1–1,000,000; beyond it a new one gets -ERR max number of clients reached."`
	RESPMaxArgs     int           `name:"resp-max-args" default:"64" env:"FLAKEID_RESP_MAX_ARGS" help:"Most arguments of one Redis-protocol command, 1–1,048,576; more is a protocol error that closes the connection."`
	RESPMaxRequest  int           `name:"resp-max-request" default:"65536" env:"FLAKEID_RESP_MAX_REQUEST" help:"Most bytes of one Redis-protocol command, 1024–67,108,864; more is a protocol error that closes the connection."`
	RESPIdleTimeout time.Duration `name:"resp-idle-timeout" default:"0s" env:"FLAKEID_RESP_IDLE_TIMEOUT" help:"Close a Redis-protocol connection idle this long, 0 (never, as Redis) or 1s–24h."`
	Policy          string        `default:"wait" enum:"wait,borrow" env:"FLAKEID_POLICY" help:"When a tick's sequence is used up: wait for the next tick, or borrow up to ${max_borrow} from the future (${enum})."`
	AutoCreateTags  bool          `env:"FLAKEID_AUTO_CREATE_TAGS" help:"Create an unknown segment tag on first use (step 1000) instead of answering 404."`
	SegmentDuration time.Duration `default:"15m" env:"FLAKEID_SEGMENT_DURATION" help:"Dynamic step target: a step of a tag should last about this long (Leaf's 15m); longer rides out longer database outages (see docs/GUARANTEES.md)."`
	TypeIDPrefix    string        `name:"typeid-prefix" placeholder:"PREFIX" env:"FLAKEID_TYPEID_PREFIX" help:"Prefix of the TypeIDs of format=typeid when a request names none (order → order_01jpgt…): up to 63 of a–z and _, not first or last. Default none."`
	MaskForm        string        `default:"base32" enum:"base32,base62" env:"FLAKEID_MASK_FORM" help:"Text form of masked IDs (${enum}): base32 is case-insensitive (15 characters, 13 for the jssafe layout), base62 case-sensitive (13, or 11)."`
	MaskSnowflake   bool          `env:"FLAKEID_MASK_SNOWFLAKE" help:"Hand out every Snowflake ID masked (needs --mask-key or --mask-keyring)."`
	MaskTags        []string      `placeholder:"TAG" env:"FLAKEID_MASK_TAGS" help:"Segment tags whose IDs are handed out masked; * means every tag (needs --mask-key or --mask-keyring)."`
	Mask            maskKeyFlags  `embed:"" prefix:"mask-"`
	LogFormat       string        `default:"text" enum:"text,json" env:"FLAKEID_LOG_FORMAT" help:"Log format (${enum})."`
	LogLevel        string        `default:"info" enum:"debug,info,warn,error" env:"FLAKEID_LOG_LEVEL" help:"Log level (${enum})."`

	Data   dataFlags   `embed:""`
	Coord  coordFlags  `embed:""`
	Store  storeFlags  `embed:""`
	Layout layoutFlags `embed:""`
}

// config maps the flags onto server.Config and checks it.
//
// The flags (and so the variables and config file keys) keep the ranges
// their help states, which differ from server.Config's at 0: there a zero
// field means its default, and "none" of ShutdownTimeout and MetricsMaxTags
// is negative. So a flag whose range excludes 0 is refused at 0 here, and
// --shutdown-timeout 0 (do not wait) and --metrics-max-tags 0 (no tag
// labels) become negative.
func (c *serveCmd) config() (server.Config, error) {
	if err := c.checkRanges(); err != nil {
		return server.Config{}, err
	}
	cfg := server.DefaultConfig()
	cfg.Listen, cfg.MaxCount, cfg.StreamBatch = c.Listen, c.MaxCount, c.StreamBatch
	cfg.TLSCert, cfg.TLSKey, cfg.ShutdownTimeout = c.TLSCert, c.TLSKey, c.ShutdownTimeout
	cfg.ReadTimeout, cfg.WriteTimeout, cfg.IdleTimeout = c.ReadTimeout, c.WriteTimeout, c.IdleTimeout
	cfg.MaxConns, cfg.MetricsMaxTags = c.MaxConns, c.MetricsMaxTags
	cfg.CORSOrigins = c.CORSOrigin
	cfg.TypeIDPrefix = c.TypeIDPrefix
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = -1 // do not wait
	}
	if cfg.MetricsMaxTags == 0 {
		cfg.MetricsMaxTags = -1 // no tag labels
	}
	cfg.RESP = server.RESPConfig{Listen: c.RESPListen, MaxConns: c.RESPMaxConns, MaxArgs: c.RESPMaxArgs,
		MaxRequest: c.RESPMaxRequest, IdleTimeout: c.RESPIdleTimeout}
	if c.ReadTimeout >= time.Second {
		// The headers' own bound (10s) may not exceed the whole request's.
		cfg.ReadHeaderTimeout = min(cfg.ReadHeaderTimeout, c.ReadTimeout)
	}
	if c.TokensFile != "" {
		b, err := os.ReadFile(c.TokensFile)
		if err != nil {
			return cfg, fmt.Errorf("--tokens-file: %w", err)
		}
		if err := strictUnmarshal(b, &cfg.Tokens); err != nil {
			return cfg, fmt.Errorf("--tokens-file %s: %w", c.TokensFile, err)
		}
		if len(cfg.Tokens) == 0 {
			return cfg, fmt.Errorf("--tokens-file %s lists no tokens", c.TokensFile)
		}
	}
	cfg.Mask = server.MaskConfig{Form: c.MaskForm, Snowflake: c.MaskSnowflake, Tags: c.MaskTags}
	keys, err := c.Mask.keys("mask-")
	if err != nil {
		return cfg, err
	}
	for _, k := range keys {
		cfg.Mask.Keys = append(cfg.Mask.Keys, server.MaskKey{ID: k.id, Key: hex.EncodeToString(k.key)})
	}
	if cfg.Mask.Bits, err = c.Mask.bits("mask-", 0); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// checkRanges refuses what server.Config would read otherwise than the flags'
// help says: 0 where the flag's range excludes it (the server would take
// its default), and --shutdown-timeout and --metrics-max-tags outside
// 0–5m and 0–100,000 (the server takes a negative value as none). The
// errors read as the server's for the same values.
func (c *serveCmd) checkRanges() error {
	for _, r := range []struct {
		bad  bool
		what string
	}{
		{c.MaxCount == 0, "max count 0, want 1–10,000,000"},
		{c.StreamBatch == 0, fmt.Sprintf("stream batch 0, want 1–%d (max count)", c.MaxCount)},
		{c.ShutdownTimeout < 0 || c.ShutdownTimeout > 5*time.Minute, fmt.Sprintf("shutdown timeout %v, want 0–5m", c.ShutdownTimeout)},
		{c.ReadTimeout == 0, "read timeout 0s, want 1s–5m"},
		{c.WriteTimeout == 0, "write timeout 0s, want 1s–10m"},
		{c.IdleTimeout == 0, "idle timeout 0s, want 1s–1h"},
		{c.MaxConns == 0, "max conns 0, want 1–1,000,000"},
		{c.MetricsMaxTags < 0 || c.MetricsMaxTags > 100_000, fmt.Sprintf("metrics max tags %d, want 0–100,000", c.MetricsMaxTags)},
		{c.RESPMaxConns == 0, "resp max conns 0, want 1–1,000,000"},
		{c.RESPMaxArgs == 0, "resp max args 0, want 1–1,048,576"},
		{c.RESPMaxRequest == 0, "resp max request 0 bytes, want 1024–67,108,864"},
	} {
		if r.bad {
			return fmt.Errorf("%w: %s", server.ErrInvalidConfig, r.what)
		}
	}
	return nil
}

// startAttrs are the attributes of the log line serve starts with: the
// version, where its state lives (data directory, coordinator, store, with
// credentials masked), the layout, the datacenter and the address to listen
// on.
func (c *serveCmd) startAttrs(cfg server.Config, l snowflake.Layout) []any {
	dir, err := c.Data.dir()
	if err != nil {
		dir = "(" + err.Error() + ")"
	}
	coord, err := c.Coord.url(&c.Data)
	if err != nil {
		coord = "(" + err.Error() + ")"
	}
	store := c.Store.redacted(&c.Data)
	return []any{"version", versionLine(), "data_dir", dir, "coordinator", redactURL(coord), "store", store,
		"layout", l.String(), "datacenter", c.Coord.Datacenter, "listen", cfg.Listen, "tls", cfg.TLSCert != ""}
}

func (c *serveCmd) logger(out *streams) *slog.Logger {
	var lvl slog.Level
	lvl.UnmarshalText([]byte(c.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(out.stderr, opts))
	}
	return slog.New(slog.NewTextHandler(out.stderr, opts))
}

// Run serves until the process is told to stop (SIGINT, SIGTERM), then
// drains requests and releases the worker-id lease.
func (c *serveCmd) Run(ctx context.Context, out *streams) error {
	cfg, err := c.config()
	if err != nil {
		return err
	}
	l, err := c.Layout.layout()
	if err != nil {
		return err
	}
	if _, err := snowflake.New(snowflake.Settings{Layout: l, Now: c.Coord.clock()}); err != nil {
		return err // before a worker id is leased and the layout recorded
	}
	log := c.logger(out)
	log.Info("flakeid: starting", c.startAttrs(cfg, l)...)
	defer tuneGC(os.Getenv)()

	// Every listener first: a port in use fails the start before anything
	// is leased (starting.go).
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen: %w (nothing was leased)", err)
	}
	defer ln.Close()
	var rln net.Listener
	if cfg.RESP.Listen != "" {
		if rln, err = net.Listen("tcp", cfg.RESP.Listen); err != nil {
			return fmt.Errorf("--resp-listen: %w (nothing was leased)", err)
		}
		defer rln.Close()
	}
	bound := []any{"addr", ln.Addr().String()}
	if rln != nil {
		bound = append(bound, "resp_addr", rln.Addr().String())
	}
	log.Info("flakeid: listening; not ready until a worker id is leased", bound...)
	stopHTTP, stopRESP := func() {}, func() {}
	if cfg.TLSCert == "" {
		stopHTTP = answerWhileStarting(ln, answerHTTPStarting)
		defer stopHTTP()
		if rln != nil {
			stopRESP = answerWhileStarting(rln, answerRESPStarting)
			defer stopRESP()
		}
	}

	coord, err := c.Coord.open(ctx, &c.Data)
	if err != nil {
		return err
	}
	defer coord.Close()
	settings := snowflake.Settings{Layout: l, DatacenterID: c.Coord.Datacenter, Now: c.Coord.clock()}
	if c.Policy == "borrow" {
		settings.Policy = snowflake.Borrow
	}
	ncfg := node.Config{Coordinator: coord, Lease: c.Coord.leaseConfig(true), Settings: settings, Logger: log}
	if err := ncfg.Validate(); err != nil {
		return err // before a worker id is leased and the contract recorded
	}
	n, err := node.Start(ctx, ncfg)
	if err != nil {
		return fmt.Errorf("acquiring a worker id: %w", err)
	}
	defer n.Close()

	stores, err := c.Store.open(ctx, &c.Data)
	if err != nil {
		return err
	}
	defer stores.Close()
	counterKeys, err := cfg.Mask.CounterKeys()
	if err != nil {
		return err
	}
	segCfg := stores.config(segment.Config{AutoCreate: c.AutoCreateTags,
		SegmentDuration: c.SegmentDuration, MaxBatch: cfg.MaxCount, Logger: log, CounterKeys: counterKeys})
	if tc := c.Coord.testClock(); tc != nil {
		segCfg.Now = tc.Now // series' periods follow the node's (shifted) clock
	}
	segs, err := segment.New(segCfg)
	if err != nil {
		return err
	}
	defer segs.Close()
	if len(stores.list) > 1 {
		// Which store serves which share of a tag is recorded in the
		// stores: shares that collide, or that leave IDs unserved (a store
		// missing from the flags), are refused before anything is served.
		if err := segs.CheckStrides(ctx); errors.Is(err, segment.ErrInvalidConfig) {
			return fmt.Errorf("the segment stores' shares of their tags do not fit together; nothing is served:\n%w", err)
		} else if err != nil {
			log.Warn("flakeid: a segment store could not be read at start: its shares are checked when it answers", "err", err)
		}
	}

	opts := server.Options{Config: cfg, Node: n, Segments: segs, Logger: log}
	if ts, ok := stores.list[0].(interface {
		Tinyid() bool
		TinyidTokens(context.Context) (map[string][]string, error)
	}); ok && ts.Tinyid() {
		opts.TinyidTokens = ts.TinyidTokens // Tinyid's paths take the tokens of tiny_id_token
	}
	if c.Coord.TestClockAdmin {
		opts.TestClock = c.Coord.testClock()
		log.Warn("flakeid: TEST ONLY: POST /admin/test/clock can shift this node's clock; never run production like this")
	}
	srv, err := server.New(opts)
	if err != nil {
		return err
	}
	st := n.Status()
	switch shared := c.Coord.Coordinator != "" && !strings.HasPrefix(strings.ToLower(c.Coord.Coordinator), "file:"); {
	case !shared:
		log.Warn("flakeid: the worker id is leased from a file on this machine, which coordinates with nobody: "+
			"a second server on another machine (behind the same load balancer, say) would hold the same worker id and issue the same IDs. "+
			"For a second node, point both at one coordinator (--coordinator etcd://…, redis://…, postgres://…), or give each its own --datacenter",
			"datacenter", st.DatacenterID, "worker", st.WorkerID)
	case st.DatacenterID == 0:
		this, others := coordinatorScope(c.Coord.Coordinator)
		log.Warn("flakeid: datacenter 0 on a shared coordinator: every cluster on " + this + " shares its one datacenter registry, " +
			"which refuses this datacenter to any other namespace and any other layout; but a cluster on another coordinator (" + others + ") " +
			"that also uses datacenter 0 issues the same IDs, and no coordinator can see that; give every cluster its own --datacenter")
	}
	scheme := "http"
	if cfg.TLSCert != "" {
		scheme = "https"
	}
	stopHTTP()
	stopRESP()
	// Tests and the verifier read addr= right after the message: keep it first.
	log.Info("flakeid: serving", "addr", ln.Addr().String(), "url", scheme+"://"+ln.Addr().String(),
		"datacenter", st.DatacenterID, "worker", st.WorkerID, "layout", l.String())
	if rln == nil {
		return srv.Serve(ctx, ln)
	}
	log.Info("flakeid: serving RESP", "addr", rln.Addr().String(), "tls", cfg.TLSCert != "")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	respErr := make(chan error, 1)
	go func() {
		err := srv.ServeRESP(ctx, rln)
		cancel() // the HTTP side stops with it
		respErr <- err
	}()
	err = srv.Serve(ctx, ln)
	cancel()
	return errors.Join(err, <-respErr)
}

// coordinatorScope says what one coordinator is for a coordinator URL —
// everything that shares its one datacenter registry — and what lies
// outside it, for serve's warning on datacenter 0.
func coordinatorScope(raw string) (this, others string) {
	u, err := url.Parse(raw)
	if err != nil {
		return "this coordinator", "another server or cluster"
	}
	switch strings.ToLower(u.Scheme) {
	case "etcd":
		return "this etcd cluster", "another etcd cluster"
	case "zk":
		return "this ZooKeeper ensemble", "another ensemble"
	case "consul", "consuls":
		return "this Consul cluster", "another Consul cluster or datacenter"
	case "redis", "rediss":
		db := strings.Trim(u.Path, "/")
		if db == "" {
			db = "0"
		}
		return "database " + db + " of this Redis server", "another Redis server, or another database of this one"
	case "postgres", "postgresql":
		return "this PostgreSQL database (the schema its search_path creates tables in)", "another database or schema"
	case "mysql":
		return "this MySQL database", "another database"
	case "nats", "tls":
		bucket := strings.Trim(u.Path, "/")
		if bucket == "" {
			bucket = nats.DefaultBucket
		}
		return "the bucket " + bucket + " of this NATS server", "another NATS server, or another bucket of this one"
	}
	return "this coordinator", "another server or cluster"
}

package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/flakeid/flakeid/idmask"
	"github.com/flakeid/flakeid/node"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/segment/segmenttest"
	"github.com/flakeid/flakeid/snowflake"
)

// respEnv is a real Server served over HTTP (Serve) and the Redis protocol
// (ServeRESP), each on a port of 127.0.0.1 of its own.
type respEnv struct {
	srv      *Server
	node     *node.Node
	segs     *segment.Allocator
	mem      *segmenttest.Memory // the segment store, with tag "orders" (step 1000)
	addr     string              // the RESP listener's host:port
	httpAddr string              // the HTTP listener's host:port
	log      *connLog
	// stop cancels ServeRESP's context and returns what ServeRESP
	// returned; the test's cleanup calls it too (it runs once).
	stop func() error
}

// newRESPEnv serves a Server (a node on a bbolt coordinator, segments on
// an in-memory store with tag "orders") with the default config changed by
// mod and the segment config by segMod (either may be nil), over HTTP and
// RESP, until the test ends. It takes a *testing.F too (FuzzRESP).
func newRESPEnv(t testing.TB, mod func(*Config), segMod func(*segment.Config)) *respEnv {
	t.Helper()
	buf := &connLog{}
	log := slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	coord := fixtureCoordinator()
	// A 2 s reservation (streamLease): a RESP PING answers whether the
	// node may issue, and fixtureLease's 300 ms ran out under a renewal's
	// stalled fsync on a loaded CI machine, in two runs out of two there.
	n, err := node.Start(t.Context(), node.Config{Coordinator: coord, Logger: log, Lease: streamLease()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	mem := segmenttest.NewMemory()
	if err := mem.Create(t.Context(), segment.Tag{Name: "orders", Step: 1000}); err != nil {
		t.Fatal(err)
	}
	scfg := segment.Config{Store: mem, Logger: log}
	if segMod != nil {
		segMod(&scfg)
	}
	segs, err := segment.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { segs.Close() })
	cfg := DefaultConfig()
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(Options{Config: cfg, Node: n, Segments: segs, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rctx, rcancel := context.WithCancel(context.Background())
	httpDone, respDone := make(chan error, 1), make(chan error, 1)
	go func() { httpDone <- srv.Serve(ctx, ln) }()
	go func() { respDone <- srv.ServeRESP(rctx, ln2) }()
	stop := sync.OnceValue(func() error {
		rcancel()
		return <-respDone
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("ServeRESP: %v", err)
		}
		cancel()
		if err := <-httpDone; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &respEnv{srv: srv, node: n, segs: segs, mem: mem, addr: ln2.Addr().String(),
		httpAddr: ln.Addr().String(), log: buf, stop: stop}
}

// client is a go-redis client of the RESP listener speaking RESP proto (2
// or 3), with opts changed by mod (may be nil), closed when the test ends.
// It does not retry, so that a command is sent once.
func (e *respEnv) client(t testing.TB, proto int, mod func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: e.addr, Protocol: proto, MaxRetries: -1,
		DialTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}}
	if mod != nil {
		mod(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// rawConn is a TCP connection to the RESP listener that the test writes
// bytes to and reads replies from.
type rawConn struct {
	net.Conn
	br    *bufio.Reader
	proto int
}

// dial opens a raw connection, closed when the test ends.
func (e *respEnv) dial(t testing.TB) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", e.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, br: bufio.NewReader(c), proto: 2}
}

// send writes s as is.
func (c *rawConn) send(t testing.TB, s string) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatalf("writing %q: %v", clipInput(s), err)
	}
}

// reply reads one reply (within 10 s).
func (c *rawConn) reply(t testing.TB) respValue {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	v, err := readRESP(c.br, c.proto)
	if err != nil {
		t.Fatalf("reading a reply: %v", err)
	}
	return v
}

// do sends a command, its arguments in RESP's framing, and reads its reply.
func (c *rawConn) do(t testing.TB, args ...string) respValue {
	t.Helper()
	c.send(t, respCmd(args...))
	return c.reply(t)
}

// closed waits up to 10 s for the server to close the connection and fails
// if it sends anything first.
func (c *rawConn) closed(t testing.TB) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := c.br.ReadByte()
	switch {
	case err == nil:
		rest, _ := c.br.Peek(c.br.Buffered())
		t.Fatalf("the server sent %q, want the connection closed", append([]byte{b}, rest...))
	case isClosed(err):
	default:
		t.Fatalf("the connection is not closed: %v", err)
	}
}

// isClosed reports whether a read error is the peer's close: EOF, or a
// reset (the server closed with unread input).
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// wantInt checks an integer reply.
func wantInt(t testing.TB, what string, v respValue) int64 {
	t.Helper()
	if v.kind != ':' {
		t.Fatalf("%s: %v, want an integer", what, v)
	}
	return v.num
}

// wantErr checks an error reply: its prefix, and the texts it must hold.
func wantErr(t testing.TB, what string, v respValue, prefix string, mentions ...string) {
	t.Helper()
	if !v.isError() || !strings.HasPrefix(v.str, prefix+" ") {
		t.Fatalf("%s: %v, want an error %s …", what, v, prefix)
	}
	if err := checkErrorReply(v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for _, m := range mentions {
		if !strings.Contains(v.str, m) {
			t.Fatalf("%s: %q does not mention %q", what, v.str, m)
		}
	}
}

// redisErr checks a go-redis error: a server error with prefix, holding
// the mentions.
func redisErr(t testing.TB, what string, err error, prefix string, mentions ...string) {
	t.Helper()
	var re redis.Error
	if err == nil || !errors.As(err, &re) || !strings.HasPrefix(err.Error(), prefix+" ") {
		t.Fatalf("%s: %v, want a server error %s …", what, err, prefix)
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			t.Fatalf("%s: %q does not mention %q", what, err, m)
		}
	}
}

// int64s reads go-redis's reply of ID.NEXT as integers.
func int64s(t testing.TB, what string, cmd *redis.Cmd) []int64 {
	t.Helper()
	v, err := cmd.Result()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	list, ok := v.([]any)
	if !ok {
		t.Fatalf("%s: %#v, want an array", what, v)
	}
	out := make([]int64, len(list))
	for i, x := range list {
		n, ok := x.(int64)
		if !ok {
			t.Fatalf("%s: element %d is %#v, want an integer", what, i, x)
		}
		out[i] = n
	}
	return out
}

// counter reads flakeid_resp_commands_total{command,result}.
func (e *respEnv) counter(t testing.TB, command, result string) float64 {
	t.Helper()
	return metricSum(t, e.srv.metrics.respCommands.WithLabelValues(command, result))
}

// snowflakeIssued reads flakeid_ids_issued_total{kind="snowflake"}.
func (e *respEnv) snowflakeIssued(t testing.TB) float64 {
	t.Helper()
	return metricSum(t, e.srv.metrics.issuedSnowflake)
}

// tagIssued reads flakeid_ids_issued_total{kind="segment",tag}.
func (e *respEnv) tagIssued(t testing.TB, tag string) float64 {
	t.Helper()
	return metricSum(t, e.srv.metrics.issued.WithLabelValues("segment", tag))
}

// httpDo sends a request to the HTTP listener on a connection of its own.
func (e *respEnv) httpDo(t testing.TB, method, path, body string) (int, string) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(method, "http://"+e.httpAddr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// checkSnowflake checks that id is a Snowflake ID of the env's node: its
// worker and datacenter ids are the node's, its time about now.
func (e *respEnv) checkSnowflake(t testing.TB, what string, id int64) snowflake.Parts {
	t.Helper()
	st := e.node.Status()
	p, err := e.node.Decode(snowflake.ID(id))
	if err != nil {
		t.Fatalf("%s: %d does not decode: %v", what, id, err)
	}
	if p.Worker != st.WorkerID || p.Datacenter != st.DatacenterID || time.Since(p.Time).Abs() > time.Minute {
		t.Fatalf("%s: %d decodes to %+v; the node holds worker %d, datacenter %d", what, id, p, st.WorkerID, st.DatacenterID)
	}
	return p
}

// TestRESPIncrAndIDNext: over go-redis, RESP2 and RESP3, INCR of a tag
// hands out its IDs in order; INCR snowflake, SNOWFLAKE and snowflake:x
// hand out increasing Snowflake IDs of the node's worker id; ID.NEXT
// orders 5 gives the next 5 IDs in order, without a count 1; ID.NEXT
// snowflake 3 gives 3 increasing Snowflake IDs.
func TestRESPIncrAndIDNext(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
			c := e.client(t, proto, nil)
			ctx := t.Context()
			first, err := c.Incr(ctx, "orders").Result()
			if err != nil {
				t.Fatal(err)
			}
			for i := int64(1); i < 5; i++ {
				if v, err := c.Incr(ctx, "orders").Result(); err != nil || v != first+i {
					t.Fatalf("INCR orders %d: %d, %v; want %d", i+1, v, err, first+i)
				}
			}
			last := first + 4
			var prev int64
			for _, key := range []string{"snowflake", "SNOWFLAKE", "snowflake:x", "SnowFlake:orders:7", "snowflake:"} {
				v, err := c.Incr(ctx, key).Result()
				if err != nil {
					t.Fatalf("INCR %s: %v", key, err)
				}
				e.checkSnowflake(t, "INCR "+key, v)
				if v <= prev {
					t.Fatalf("INCR %s: %d after %d", key, v, prev)
				}
				prev = v
			}
			ids := int64s(t, "ID.NEXT orders 5", c.Do(ctx, "ID.NEXT", "orders", 5))
			if len(ids) != 5 {
				t.Fatalf("ID.NEXT orders 5: %v", ids)
			}
			for i, id := range ids {
				if id != last+1+int64(i) {
					t.Fatalf("ID.NEXT orders 5 after %d: %v, want consecutive", last, ids)
				}
			}
			last += 5
			if ids := int64s(t, "ID.NEXT orders", c.Do(ctx, "id.next", "orders")); len(ids) != 1 || ids[0] != last+1 {
				t.Fatalf("ID.NEXT orders (no count) after %d: %v", last, ids)
			}
			sf := int64s(t, "ID.NEXT snowflake 3", c.Do(ctx, "ID.NEXT", "snowflake", 3))
			if len(sf) != 3 {
				t.Fatalf("ID.NEXT snowflake 3: %v", sf)
			}
			for _, id := range sf {
				e.checkSnowflake(t, "ID.NEXT snowflake 3", id)
				if id <= prev {
					t.Fatalf("ID.NEXT snowflake 3: %v, not increasing after %d", sf, prev)
				}
				prev = id
			}
		})
	}
}

// TestRESPIDNextBadCount: ID.NEXT with a count of 0, -1, abc, 100001 (over
// the default MaxCount) or one past int64 is an ERR naming the count, on a
// tag and on snowflake, and takes no ID: the next INCR orders is the one
// after the last good ID, and no Snowflake ID was counted.
func TestRESPIDNextBadCount(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
			c := e.client(t, proto, nil)
			ctx := t.Context()
			last, err := c.Incr(ctx, "orders").Result()
			if err != nil {
				t.Fatal(err)
			}
			sf := e.snowflakeIssued(t)
			for _, count := range []string{"0", "-1", "abc", "100001", "99999999999999999999", "1.5", ""} {
				for _, key := range []string{"orders", "snowflake"} {
					err := c.Do(ctx, "ID.NEXT", key, count).Err()
					redisErr(t, "ID.NEXT "+key+" "+strconv.Quote(count), err, "ERR", "count")
				}
			}
			if v, err := c.Incr(ctx, "orders").Result(); err != nil || v != last+1 {
				t.Fatalf("INCR orders after the refused ID.NEXTs: %d, %v; want %d", v, err, last+1)
			}
			if got := e.snowflakeIssued(t); got != sf {
				t.Fatalf("%v Snowflake IDs issued by refused ID.NEXTs", got-sf)
			}
		})
	}
	c := e.dial(t)
	wantErr(t, "ID.NEXT orders 100001", c.do(t, "ID.NEXT", "orders", "100001"), "ERR", "count", "100001", "1 to 100000")
	wantErr(t, "ID.NEXT orders abc", c.do(t, "ID.NEXT", "orders", "abc"), "ERR", `"abc"`, "whole number")
}

// TestRESPDecode: ID.DECODE of a Snowflake ID answers its parts as the
// node's layout reads them — a flat array of field/value pairs in RESP2, a
// map in RESP3 — with time in RFC 3339 (ms, UTC); a bad ID is an ERR.
func TestRESPDecode(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
			c := e.client(t, proto, nil)
			ctx := t.Context()
			id, err := c.Incr(ctx, "snowflake").Result()
			if err != nil {
				t.Fatal(err)
			}
			p := e.checkSnowflake(t, "INCR snowflake", id)
			forms := [][]any{{"ID.DECODE", id}, {"id.decode", strconv.FormatInt(id, 10), "plain"}}
			for _, text := range textForms(snowflake.ID(id)) {
				forms = append(forms, []any{"ID.DECODE", text})
			}
			for _, args := range forms {
				v, err := c.Do(ctx, args...).Result()
				if err != nil {
					t.Fatalf("%v: %v", args, err)
				}
				got := map[string]any{}
				switch proto {
				case 2:
					flat, ok := v.([]any)
					if !ok || len(flat) != 14 {
						t.Fatalf("%v in RESP2: %#v, want a flat array of 7 pairs", args, v)
					}
					for i := 0; i < len(flat); i += 2 {
						got[flat[i].(string)] = flat[i+1]
					}
				case 3:
					m, ok := v.(map[any]any)
					if !ok || len(m) != 7 {
						t.Fatalf("%v in RESP3: %#v, want a map of 7 fields", args, v)
					}
					for k, x := range m {
						got[k.(string)] = x
					}
				}
				want := map[string]any{
					"id": strconv.FormatInt(id, 10), "time": p.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
					"unix_ms": p.Time.UnixMilli(), "tick": p.Tick, "datacenter": p.Datacenter, "worker": p.Worker, "sequence": p.Sequence,
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%v: %v, want %v", args, got, want)
				}
				if !strings.HasSuffix(got["time"].(string), "Z") {
					t.Fatalf("%v: time %v is not UTC", args, got["time"])
				}
			}
			redisErr(t, "ID.DECODE garbage!", c.Do(ctx, "ID.DECODE", "garbage!").Err(), "ERR", "garbage!")
			redisErr(t, "ID.DECODE", c.Do(ctx, "ID.DECODE").Err(), "ERR", "wrong number of arguments")
		})
	}
}

// TestRESPCounterCommandsRefused: INCRBY (but by 1), INCRBYFLOAT, DECR and
// DECRBY are ERRs that point to ID.NEXT, on a tag and on snowflake, and
// take no ID; INCRBY key 1 (what redis-py's incr sends) is INCR key.
func TestRESPCounterCommandsRefused(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	c := e.client(t, 2, nil)
	ctx := t.Context()
	last, err := c.Incr(ctx, "orders").Result()
	if err != nil {
		t.Fatal(err)
	}
	sf := e.snowflakeIssued(t)
	for _, key := range []string{"orders", "snowflake"} {
		redisErr(t, "INCRBY", c.IncrBy(ctx, key, 5).Err(), "ERR", "INCRBY", "ID.NEXT "+key)
		redisErr(t, "INCRBY 0", c.IncrBy(ctx, key, 0).Err(), "ERR", "ID.NEXT")
		redisErr(t, "INCRBY -1", c.IncrBy(ctx, key, -1).Err(), "ERR", "ID.NEXT")
		redisErr(t, "INCRBY 01", c.Do(ctx, "INCRBY", key, "01").Err(), "ERR", "ID.NEXT")
		redisErr(t, "INCRBYFLOAT", c.IncrByFloat(ctx, key, 1.5).Err(), "ERR", "ID.NEXT")
		redisErr(t, "DECR", c.Decr(ctx, key).Err(), "ERR", "DECR", "ID.NEXT")
		redisErr(t, "DECRBY", c.DecrBy(ctx, key, 2).Err(), "ERR", "ID.NEXT")
	}
	if v, err := c.Incr(ctx, "orders").Result(); err != nil || v != last+1 {
		t.Fatalf("INCR orders after refused counters: %d, %v; want %d", v, err, last+1)
	}
	if got := e.snowflakeIssued(t); got != sf {
		t.Fatalf("%v Snowflake IDs issued by refused counter commands", got-sf)
	}
	if v, err := c.IncrBy(ctx, "orders", 1).Result(); err != nil || v != last+2 {
		t.Fatalf("INCRBY orders 1: %d, %v; want %d", v, err, last+2)
	}
	if v, err := c.IncrBy(ctx, "snowflake", 1).Result(); err != nil {
		t.Fatalf("INCRBY snowflake 1: %v", err)
	} else {
		e.checkSnowflake(t, "INCRBY snowflake 1", v)
	}
}

// TestRESPUnknownCommandAndArity: an unknown command is "ERR unknown
// command" (quoting its name and arguments on one line, even with CR/LF in
// them) and a wrong number of arguments "ERR wrong number of arguments";
// the connection stays usable after each, and nothing is taken.
func TestRESPUnknownCommandAndArity(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	c := e.dial(t)
	wantErr(t, "FLUSHALL", c.do(t, "FLUSHALL"), "ERR", "unknown command 'FLUSHALL'")
	wantErr(t, "SET a b", c.do(t, "SET", "a", "b"), "ERR", "unknown command 'SET'", "'a' 'b'")
	wantErr(t, "GET with CR/LF", c.do(t, "GET", "a\r\nb", "\x00"), "ERR", "unknown command 'GET'")
	wantErr(t, "a long name", c.do(t, strings.Repeat("X", 100)), "ERR", "unknown command")
	if v := c.do(t, "PING"); v.kind != '+' || v.str != "PONG" {
		t.Fatalf("PING after unknown commands: %v", v)
	}
	for _, args := range [][]string{{"INCR"}, {"INCR", "orders", "x"}, {"ID.NEXT"}, {"ID.NEXT", "snowflake", "1", "FORMAT", "uuid7", "PREFIX", "a", "b"},
		{"ID.DECODE", "1", "plain", "x", "y"}, {"ECHO"}, {"PING", "a", "b"}, {"AUTH", "a", "b", "c"}, {"SELECT"}} {
		wantErr(t, strings.Join(args, " "), c.do(t, args...), "ERR", "wrong number of arguments for '"+strings.ToLower(args[0])+"' command")
	}
	wantErr(t, "ID.DECODE 1 plain x", c.do(t, "ID.DECODE", "1", "plain", "x"), "ERR", "syntax error: ID.DECODE id [plain|masked], or ID.DECODE number TAG tag")
	wantErr(t, "ID.NEXT orders 1 2", c.do(t, "ID.NEXT", "orders", "1", "2"), "ERR", "syntax error: ID.NEXT key [count] [FORMAT uuid7|typeid|ulid] [PREFIX prefix]")
	wantErr(t, "ID.NEXT orders FORMAT uuid7", c.do(t, "ID.NEXT", "orders", "FORMAT", "uuid7"), "ERR", "FORMAT and PREFIX are for Snowflake IDs")
	wantErr(t, "ID.BOUNDS FROM", c.do(t, "ID.BOUNDS", "FROM"), "ERR", "syntax error: ID.BOUNDS [FROM time] [TO time]")
	if v := wantInt(t, "INCR orders after the errors", c.do(t, "INCR", "orders")); v != 1 {
		t.Fatalf("INCR orders after the errors: %d, want 1 (the errors took IDs)", v)
	}
	for _, proto := range []int{2, 3} {
		rc := e.client(t, proto, func(o *redis.Options) { o.PoolSize = 1 })
		redisErr(t, "NOSUCH over go-redis", rc.Do(t.Context(), "NOSUCH", "x").Err(), "ERR", "unknown command")
		if err := rc.Ping(t.Context()).Err(); err != nil {
			t.Fatalf("PING after an unknown command over go-redis: %v", err)
		}
	}
}

// TestRESPPipeline: a go-redis pipeline of 1000 mixed commands (INCR of a
// tag and of snowflake, ID.NEXT, PING, ECHO, an unknown command) gets its
// replies in order, in RESP2 and RESP3.
func TestRESPPipeline(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
			c := e.client(t, proto, nil)
			ctx := t.Context()
			last, err := c.Incr(ctx, "orders").Result()
			if err != nil {
				t.Fatal(err)
			}
			pipe := c.Pipeline()
			cmds := make([]redis.Cmder, 1000)
			for i := range cmds {
				switch i % 6 {
				case 0:
					cmds[i] = pipe.Incr(ctx, "orders")
				case 1:
					cmds[i] = pipe.Incr(ctx, "snowflake")
				case 2:
					cmds[i] = pipe.Do(ctx, "ID.NEXT", "orders", 2)
				case 3:
					cmds[i] = pipe.Ping(ctx)
				case 4:
					cmds[i] = pipe.Echo(ctx, fmt.Sprintf("message %d", i))
				case 5:
					cmds[i] = pipe.Do(ctx, "NOSUCH", i)
				}
			}
			pipe.Exec(ctx) // the unknown commands make it return an error
			var prevSF int64
			for i, cmd := range cmds {
				switch i % 6 {
				case 0:
					v, err := cmd.(*redis.IntCmd).Result()
					if err != nil || v != last+1 {
						t.Fatalf("command %d, INCR orders: %d, %v; want %d", i, v, err, last+1)
					}
					last = v
				case 1:
					v, err := cmd.(*redis.IntCmd).Result()
					if err != nil || v <= prevSF {
						t.Fatalf("command %d, INCR snowflake: %d, %v after %d", i, v, err, prevSF)
					}
					prevSF = v
				case 2:
					ids := int64s(t, fmt.Sprintf("command %d, ID.NEXT orders 2", i), cmd.(*redis.Cmd))
					if len(ids) != 2 || ids[0] != last+1 || ids[1] != last+2 {
						t.Fatalf("command %d, ID.NEXT orders 2: %v after %d", i, ids, last)
					}
					last += 2
				case 3:
					if v, err := cmd.(*redis.StatusCmd).Result(); err != nil || v != "PONG" {
						t.Fatalf("command %d, PING: %q, %v", i, v, err)
					}
				case 4:
					if v, err := cmd.(*redis.StringCmd).Result(); err != nil || v != fmt.Sprintf("message %d", i) {
						t.Fatalf("command %d, ECHO: %q, %v", i, v, err)
					}
				case 5:
					redisErr(t, fmt.Sprintf("command %d, NOSUCH", i), cmd.Err(), "ERR", "unknown command 'NOSUCH'", fmt.Sprintf("'%d'", i))
				}
			}
		})
	}
}

// TestRESPConcurrentIncr: 16 goroutines each sending 500 INCR of two tags
// and of snowflake get IDs that are unique per key across all of them and
// increasing per goroutine per key.
func TestRESPConcurrentIncr(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	if err := e.mem.Create(t.Context(), segment.Tag{Name: "chat", Step: 10}); err != nil {
		t.Fatal(err)
	}
	const goroutines, rounds = 16, 500
	keys := []string{"orders", "chat", "snowflake"}
	c := e.client(t, 3, func(o *redis.Options) { o.PoolSize = goroutines })
	got := make([][][]int64, goroutines) // goroutine → key → IDs
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		got[g] = make([][]int64, len(keys))
		wg.Go(func() {
			for i := range rounds {
				for k, key := range keys {
					v, err := c.Incr(context.Background(), key).Result()
					if err != nil {
						errs <- fmt.Errorf("goroutine %d, INCR %s %d: %w", g, key, i, err)
						return
					}
					if n := len(got[g][k]); n > 0 && v <= got[g][k][n-1] {
						errs <- fmt.Errorf("goroutine %d, INCR %s: %d after %d", g, key, v, got[g][k][n-1])
						return
					}
					got[g][k] = append(got[g][k], v)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k, key := range keys {
		seen := map[int64]bool{}
		for g := range goroutines {
			for _, v := range got[g][k] {
				if seen[v] {
					t.Fatalf("INCR %s handed out %d twice", key, v)
				}
				seen[v] = true
			}
		}
		if len(seen) != goroutines*rounds {
			t.Fatalf("INCR %s: %d IDs, want %d", key, len(seen), goroutines*rounds)
		}
	}
	if _, err := e.node.Decode(snowflake.ID(got[0][2][0])); err != nil {
		t.Fatal(err)
	}
}

// TestRESPTags: a key that is no valid tag name is an ERR naming the
// character; an unknown tag is an ERR, or is created on first use with
// AutoCreate; an exhausted tag is EXHAUSTED; and a tag named snowflake or
// snowflake:… cannot be created over HTTP (400 naming "reserved").
func TestRESPTags(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	c := e.dial(t)
	wantErr(t, "INCR a/b", c.do(t, "INCR", "a/b"), "ERR", "a/b", "'/'")
	wantErr(t, "ID.NEXT a b 2", c.do(t, "ID.NEXT", "a b", "2"), "ERR", "' '")
	wantErr(t, "INCR of an empty key", c.do(t, "INCR", ""), "ERR")
	wantErr(t, "INCR ..", c.do(t, "INCR", ".."), "ERR")
	wantErr(t, "INCR with CR/LF", c.do(t, "INCR", "a\r\nb"), "ERR")
	wantErr(t, "INCR nope", c.do(t, "INCR", "nope"), "ERR", "nope")
	wantErr(t, "ID.NEXT nope 3", c.do(t, "ID.NEXT", "nope", "3"), "ERR", "nope")

	if err := e.mem.Create(t.Context(), segment.Tag{Name: "full", Step: 10}); err != nil {
		t.Fatal(err)
	}
	if err := e.mem.SetMaxID("full", math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "INCR of an exhausted tag", c.do(t, "INCR", "full"), "EXHAUSTED", "full")

	for _, name := range []string{"snowflake", "SNOWFLAKE", "snowflake:x", "Snowflake:"} {
		status, body := e.httpDo(t, "POST", "/v1/segment/tags", `{"tag":"`+name+`","step":10}`)
		if status != 400 || !strings.Contains(body, "reserved") || !strings.Contains(body, codeInvalid) {
			t.Fatalf("creating tag %q over HTTP: %d %s; want 400 invalid_argument naming reserved", name, status, body)
		}
	}
	if _, err := e.mem.Get(t.Context(), "snowflake"); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("tag snowflake after the refused creation: %v", err)
	}

	auto := newRESPEnv(t, nil, func(c *segment.Config) { c.AutoCreate = true })
	ac := auto.dial(t)
	if v := wantInt(t, "INCR fresh with AutoCreate", ac.do(t, "INCR", "fresh")); v != 1 {
		t.Fatalf("INCR of an auto-created tag: %d, want 1", v)
	}
	if v := wantInt(t, "INCR fresh again", ac.do(t, "INCR", "fresh")); v != 2 {
		t.Fatalf("INCR of an auto-created tag, again: %d, want 2", v)
	}
	if _, err := auto.mem.Get(t.Context(), "fresh"); err != nil {
		t.Fatalf("the auto-created tag: %v", err)
	}
	wantErr(t, "INCR a/b with AutoCreate", ac.do(t, "INCR", "a/b"), "ERR", "'/'")
}

// respTokens are the tokens of the auth tests, of different scopes.
var respTokens = []Token{
	{Name: "shop", Token: "shop-token-0123456789", Tags: []string{"orders"}},
	{Name: "ids", Token: "ids-token-0123456789", Snowflake: true},
	{Name: "admin", Token: "admin-token-0123456789", Tags: []string{"*"}, Snowflake: true, Admin: true},
	{Name: "unmasker", Token: "unmask-token-0123456789", Tags: []string{"orders"}, Unmask: true},
}

// TestRESPAuth: with tokens configured every command but AUTH, HELLO and
// QUIT is NOAUTH before AUTH (PING too); HELLO without AUTH is NOAUTH; a
// wrong token, or a user that is neither "default" nor the token's name,
// is WRONGPASS; AUTH token, AUTH default token, AUTH <name> token and
// HELLO 3 AUTH <name> token log in; go-redis's Password and Username work.
// Without tokens, AUTH is the ERR Redis gives without a password.
func TestRESPAuth(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, func(c *Config) { c.Tokens = respTokens }, nil)
	c := e.dial(t)
	wantErr(t, "INCR before AUTH", c.do(t, "INCR", "orders"), "NOAUTH", "Authentication required.")
	wantErr(t, "PING before AUTH", c.do(t, "PING"), "NOAUTH")
	wantErr(t, "ID.NEXT before AUTH", c.do(t, "ID.NEXT", "snowflake", "2"), "NOAUTH")
	wantErr(t, "HELLO before AUTH", c.do(t, "HELLO"), "NOAUTH")
	wantErr(t, "HELLO 3 before AUTH", c.do(t, "HELLO", "3"), "NOAUTH")
	wantErr(t, "AUTH wrong", c.do(t, "AUTH", "wrong-token-0123456789"), "WRONGPASS")
	wantErr(t, "AUTH another token's name", c.do(t, "AUTH", "ids", "shop-token-0123456789"), "WRONGPASS")
	wantErr(t, "AUTH an unknown user", c.do(t, "AUTH", "nobody", "shop-token-0123456789"), "WRONGPASS")
	wantErr(t, "AUTH default wrong", c.do(t, "AUTH", "default", "wrong-token-0123456789"), "WRONGPASS")
	wantErr(t, "INCR after failed AUTHs", c.do(t, "INCR", "orders"), "NOAUTH")
	if v := c.do(t, "AUTH", "shop-token-0123456789"); v.kind != '+' || v.str != "OK" {
		t.Fatalf("AUTH token: %v", v)
	}
	if v := wantInt(t, "INCR orders after AUTH", c.do(t, "INCR", "orders")); v != 1 {
		t.Fatalf("INCR orders after AUTH: %d, want 1 (refused commands took IDs)", v)
	}
	for _, args := range [][]string{{"AUTH", "default", "ids-token-0123456789"}, {"AUTH", "ids", "ids-token-0123456789"}} {
		c := e.dial(t)
		if v := c.do(t, args...); v.kind != '+' || v.str != "OK" {
			t.Fatalf("%v: %v", args[:2], v)
		}
		e.checkSnowflake(t, "INCR snowflake", wantInt(t, "INCR snowflake", c.do(t, "INCR", "snowflake")))
	}
	h := e.dial(t)
	wantErr(t, "HELLO 3 AUTH with a wrong token", h.do(t, "HELLO", "3", "AUTH", "ids", "wrong-token-0123456789"), "WRONGPASS")
	h.proto = 3
	v := h.do(t, "HELLO", "3", "AUTH", "ids", "ids-token-0123456789")
	if m, err := v.fields(); err != nil || v.kind != '%' || m["proto"].num != 3 || m["server"].str != "flakeid" {
		t.Fatalf("HELLO 3 AUTH ids token: %v (%v)", v, err)
	}
	e.checkSnowflake(t, "INCR snowflake after HELLO AUTH", wantInt(t, "INCR snowflake", h.do(t, "INCR", "snowflake")))

	ctx := t.Context()
	for _, proto := range []int{2, 3} {
		rc := e.client(t, proto, func(o *redis.Options) { o.Password = "ids-token-0123456789" })
		if v, err := rc.Incr(ctx, "snowflake").Result(); err != nil {
			t.Fatalf("go-redis RESP%d with Password: %v", proto, err)
		} else {
			e.checkSnowflake(t, "go-redis INCR snowflake", v)
		}
		rc = e.client(t, proto, func(o *redis.Options) { o.Username, o.Password = "shop", "shop-token-0123456789" })
		if _, err := rc.Incr(ctx, "orders").Result(); err != nil {
			t.Fatalf("go-redis RESP%d with Username and Password: %v", proto, err)
		}
		rc = e.client(t, proto, func(o *redis.Options) { o.Username, o.Password = "ids", "shop-token-0123456789" })
		if err := rc.Incr(ctx, "orders").Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Fatalf("go-redis RESP%d with another token's name: %v, want WRONGPASS", proto, err)
		}
		rc = e.client(t, proto, nil)
		redisErr(t, fmt.Sprintf("go-redis RESP%d without a password", proto), rc.Incr(ctx, "orders").Err(), "NOAUTH")
	}

	open := newRESPEnv(t, nil, nil)
	oc := open.dial(t)
	wantErr(t, "AUTH without tokens", oc.do(t, "AUTH", "whatever-0123456789"), "ERR", "AUTH <password> called without any password configured")
	wantErr(t, "AUTH user token without tokens", oc.do(t, "AUTH", "default", "whatever-0123456789"), "ERR", "without any password configured")
	if v := oc.do(t, "PING"); v.str != "PONG" {
		t.Fatalf("PING without tokens: %v", v)
	}
}

// TestRESPScopes: a token's scopes hold as over HTTP: a token without
// Snowflake is NOPERM on INCR snowflake and ID.NEXT snowflake, a token with
// tags [orders] is NOPERM on another tag (naming it); and a refused
// command takes no ID. A later AUTH replaces the scopes.
func TestRESPScopes(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, func(c *Config) { c.Tokens = respTokens }, nil)
	if err := e.mem.Create(t.Context(), segment.Tag{Name: "other", Step: 10}); err != nil {
		t.Fatal(err)
	}
	c := e.dial(t)
	c.do(t, "AUTH", "shop", "shop-token-0123456789")
	last := wantInt(t, "INCR orders", c.do(t, "INCR", "orders"))
	sf := e.snowflakeIssued(t)
	wantErr(t, "INCR snowflake with shop's token", c.do(t, "INCR", "snowflake"), "NOPERM", `"shop"`, "Snowflake")
	wantErr(t, "ID.NEXT snowflake 3 with shop's token", c.do(t, "ID.NEXT", "snowflake", "3"), "NOPERM")
	wantErr(t, "INCR other with shop's token", c.do(t, "INCR", "other"), "NOPERM", `"other"`)
	wantErr(t, "ID.NEXT other 5 with shop's token", c.do(t, "ID.NEXT", "other", "5"), "NOPERM", `"other"`)
	if got := e.snowflakeIssued(t); got != sf {
		t.Fatalf("%v Snowflake IDs issued to refused commands", got-sf)
	}
	if got := e.tagIssued(t, "other"); got != 0 {
		t.Fatalf("%v IDs of tag other issued to refused commands", got)
	}
	if v := wantInt(t, "INCR orders", c.do(t, "INCR", "orders")); v != last+1 {
		t.Fatalf("INCR orders after the refusals: %d, want %d", v, last+1)
	}

	ids := e.dial(t)
	ids.do(t, "AUTH", "ids-token-0123456789")
	e.checkSnowflake(t, "INCR snowflake with ids' token", wantInt(t, "INCR snowflake", ids.do(t, "INCR", "snowflake")))
	wantErr(t, "INCR orders with ids' token", ids.do(t, "INCR", "orders"), "NOPERM", `"orders"`)
	// A new AUTH replaces the token, and the tags it was allowed.
	ids.do(t, "AUTH", "shop-token-0123456789")
	if v := wantInt(t, "INCR orders after AUTH shop", ids.do(t, "INCR", "orders")); v != last+2 {
		t.Fatalf("INCR orders after AUTH shop: %d, want %d", v, last+2)
	}
	wantErr(t, "INCR snowflake after AUTH shop", ids.do(t, "INCR", "snowflake"), "NOPERM")

	admin := e.dial(t)
	admin.do(t, "AUTH", "admin", "admin-token-0123456789")
	wantInt(t, "INCR other with admin's token", admin.do(t, "INCR", "other"))
	wantInt(t, "INCR snowflake with admin's token", admin.do(t, "INCR", "snowflake"))
}

// TestRESPMasking: where the server masks a tag's or the Snowflake IDs,
// INCR of the key is an ERR pointing to ID.NEXT and takes nothing, ID.NEXT
// answers bulk strings (masked texts, made with the configured key) that
// ID.DECODE reads back to consecutive IDs; with tokens configured, decoding
// a masked text needs a token with unmask (NOPERM otherwise).
func TestRESPMasking(t *testing.T) {
	t.Parallel()
	key := MaskKey{ID: 5, Key: maskKeyOld}
	mc := MaskConfig{Keys: []MaskKey{key}, Tags: []string{"orders"}, Snowflake: true}
	kr := ring(t, idmask.Bits63, key)
	e := newRESPEnv(t, func(c *Config) { c.Mask = mc }, nil)
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
			c := e.dial(t)
			if proto == 3 {
				c.proto = 3
				c.do(t, "HELLO", "3")
			}
			issued := e.tagIssued(t, "orders")
			wantErr(t, "INCR of a masked tag", c.do(t, "INCR", "orders"), "ERR", "masked", "ID.NEXT orders")
			wantErr(t, "INCR of masked snowflake", c.do(t, "INCR", "snowflake"), "ERR", "masked", "ID.NEXT snowflake")
			if got := e.tagIssued(t, "orders"); got != issued {
				t.Fatalf("INCR of a masked tag took %v IDs", got-issued)
			}
			decode := func(text string) int64 {
				t.Helper()
				v := c.do(t, "ID.DECODE", text, "masked")
				m, err := v.fields()
				if err != nil || m["masked"].str != text || m["key_id"].num != int64(key.ID) || len(m) != 9 {
					t.Fatalf("ID.DECODE %s masked: %v (%v)", text, v, err)
				}
				id, err := strconv.ParseInt(m["id"].str, 10, 64)
				if err != nil {
					t.Fatalf("ID.DECODE %s: id %v", text, m["id"])
				}
				if want, err := kr.UnmaskText(text); err != nil || want != id {
					t.Fatalf("ID.DECODE %s: id %d; the key unmasks it to %d (%v)", text, id, want, err)
				}
				return id
			}
			v := c.do(t, "ID.NEXT", "orders", "3")
			if v.kind != '*' || len(v.elems) != 3 {
				t.Fatalf("ID.NEXT orders 3 (masked): %v, want 3 bulk strings", v)
			}
			var first int64
			for i, x := range v.elems {
				if x.kind != '$' || x.str == "" || x.str[0] != '5' {
					t.Fatalf("ID.NEXT orders 3 (masked): element %d is %v, want a masked text of key id 5", i, x)
				}
				id := decode(x.str)
				if i == 0 {
					first = id
				} else if id != first+int64(i) {
					t.Fatalf("ID.NEXT orders 3 (masked): %v decode to non-consecutive IDs", v)
				}
			}
			v = c.do(t, "ID.NEXT", "orders")
			if v.kind != '*' || len(v.elems) != 1 || decode(v.elems[0].str) != first+3 {
				t.Fatalf("ID.NEXT orders after the refused INCR: %v, want the ID after %d", v, first+2)
			}
			v = c.do(t, "ID.NEXT", "snowflake", "2")
			if v.kind != '*' || len(v.elems) != 2 {
				t.Fatalf("ID.NEXT snowflake 2 (masked): %v", v)
			}
			a, b := decode(v.elems[0].str), decode(v.elems[1].str)
			e.checkSnowflake(t, "a masked Snowflake ID", a)
			if b <= a {
				t.Fatalf("masked Snowflake IDs decode to %d, %d", a, b)
			}
		})
	}

	t.Run("tokens", func(t *testing.T) {
		e := newRESPEnv(t, func(c *Config) { c.Mask, c.Tokens = mc, respTokens }, nil)
		shop := e.dial(t)
		shop.do(t, "AUTH", "shop-token-0123456789")
		v := shop.do(t, "ID.NEXT", "orders", "1")
		if v.kind != '*' || len(v.elems) != 1 || v.elems[0].kind != '$' {
			t.Fatalf("ID.NEXT orders 1 (masked): %v", v)
		}
		text := v.elems[0].str
		wantErr(t, "ID.DECODE of a masked text without unmask", shop.do(t, "ID.DECODE", text, "masked"), "NOPERM", "unmask")
		wantErr(t, "ID.DECODE of a masked text without unmask (auto)", shop.do(t, "ID.DECODE", text), "NOPERM")
		if m, err := shop.do(t, "ID.DECODE", "1234567", "plain").fields(); err != nil || m["id"].str != "1234567" {
			t.Fatalf("ID.DECODE of a plain ID with shop's token: %v %v", m, err)
		}
		un := e.dial(t)
		un.do(t, "AUTH", "unmasker", "unmask-token-0123456789")
		m, err := un.do(t, "ID.DECODE", text, "masked").fields()
		if want, _ := kr.UnmaskText(text); err != nil || m["id"].str != strconv.FormatInt(want, 10) {
			t.Fatalf("ID.DECODE of a masked text with an unmask token: %v %v; want id %d", m, err, want)
		}
		admin := e.dial(t)
		admin.do(t, "AUTH", "admin-token-0123456789")
		if _, err := admin.do(t, "ID.DECODE", text, "masked").fields(); err != nil {
			t.Fatalf("ID.DECODE of a masked text with an admin token: %v", err)
		}
	})
}

// TestRESPReadiness: PING answers PONG (or its message) while the server
// is ready, and INFO says ready:1; once the node has lost its lease, PING
// and INCR snowflake are UNAVAILABLE and INFO says ready:0 with the reason.
func TestRESPReadiness(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	c := e.dial(t)
	if v := c.do(t, "PING"); v.kind != '+' || v.str != "PONG" {
		t.Fatalf("PING: %v", v)
	}
	if v := c.do(t, "PING", "hello there"); v.kind != '$' || v.str != "hello there" {
		t.Fatalf("PING message: %v", v)
	}
	if v := c.do(t, "INFO"); v.kind != '$' || !strings.Contains(v.str, "ready:1\r\n") || strings.Contains(v.str, "not_ready_reason") {
		t.Fatalf("INFO while ready: %v", v)
	}
	e.node.Close() // releases the lease
	wantErr(t, "PING without a lease", c.do(t, "PING"), "UNAVAILABLE", "lease")
	wantErr(t, "INCR snowflake without a lease", c.do(t, "INCR", "snowflake"), "UNAVAILABLE")
	wantErr(t, "ID.NEXT snowflake 2 without a lease", c.do(t, "ID.NEXT", "snowflake", "2"), "UNAVAILABLE")
	v := c.do(t, "INFO", "server")
	if v.kind != '$' || !strings.Contains(v.str, "ready:0\r\n") || !strings.Contains(v.str, "not_ready_reason:") {
		t.Fatalf("INFO without a lease: %v", v)
	}
	for _, l := range strings.Split(v.str, "\r\n") {
		if strings.ContainsAny(l, "\r\n") {
			t.Fatalf("INFO line %q", l)
		}
	}
}

// TestRESPProtocolErrors: framing errors and requests over the limits are
// answered "-ERR Protocol error: …" and the connection is closed, at once
// (a 512 MB bulk length or a million-argument header is refused from its
// header, without waiting for what would follow): a bulk of MaxRequest+1
// bytes, 65 arguments (MaxArgs 64), an inline line longer than MaxRequest,
// a bad array length, a non-bulk argument, a bad bulk length, a bulk not
// followed by CRLF, unbalanced quotes. Each counts in
// flakeid_resp_protocol_errors_total.
func TestRESPProtocolErrors(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, func(c *Config) { c.RESP.MaxRequest = 1024 }, nil)
	cases := []struct{ name, in, mention string }{
		{"512 MB bulk", "*2\r\n$536870912\r\n", "bulk of more than 1024 bytes"},
		{"a million arguments", "*1000000\r\n", "too many arguments"},
		{"bulk over max request", "*2\r\n$4\r\nECHO\r\n$1025\r\n" + strings.Repeat("x", 1025) + "\r\n", "1024"},
		{"65 arguments", "*65\r\n" + strings.Repeat("$1\r\na\r\n", 65), "too many arguments"},
		{"inline over max request", strings.Repeat("a", 2000) + "\r\n", "more than 1024 bytes"},
		{"*- without a length", "*-\r\n", "invalid multibulk length"},
		{"*x", "*x\r\n", "invalid multibulk length"},
		{"integer argument", "*1\r\n:5\r\n", "expected '$', got ':'"},
		{"bad bulk length", "*1\r\n$abc\r\n", "invalid bulk length"},
		{"bulk not ended by CRLF", "*1\r\n$3\r\nabcde", "not followed by CRLF"},
		{"unbalanced quotes", "ECHO \"abc\r\n", "unbalanced quotes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := e.dial(t)
			c.send(t, tc.in)
			wantErr(t, tc.name, c.reply(t), "ERR", "Protocol error: ", tc.mention)
			c.closed(t)
		})
	}
	if got := metricSum(t, e.srv.metrics.respProtocolErrors); got != float64(len(cases)) {
		t.Fatalf("flakeid_resp_protocol_errors_total %v, want %d", got, len(cases))
	}
	waitFor(t, "0 RESP connections", func() bool { return gaugeValue(t, e.srv.metrics.respConns) == 0 })
}

// TestRESPViolationAfterCommands: the commands that come before a framing
// error or a limit violation in the same write are answered, in order,
// before the protocol error; those after it are not run.
func TestRESPViolationAfterCommands(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	for _, tc := range []struct{ name, bad string }{
		{"framing", "*1\r\n:5\r\n"},
		{"max args", "*1000000\r\n"},
		{"bulk size", "*2\r\n$536870912\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			last := e.tagIssued(t, "orders")
			c := e.dial(t)
			c.send(t, "PING\r\n"+respCmd("PING")+"INCR orders\r\n"+respCmd("ECHO", "before")+tc.bad+"INCR orders\r\n")
			for _, want := range []string{"+PONG", "+PONG"} {
				if v := c.reply(t); v.String() != want[:1]+strconv.Quote(want[1:]) {
					t.Fatalf("reply: %v, want %s", v, want)
				}
			}
			if v := wantInt(t, "INCR orders before the violation", c.reply(t)); float64(v) != last+1 {
				t.Fatalf("INCR orders before the violation: %d, want %v", v, last+1)
			}
			if v := c.reply(t); v.kind != '$' || v.str != "before" {
				t.Fatalf("ECHO before the violation: %v", v)
			}
			wantErr(t, "the violation", c.reply(t), "ERR", "Protocol error")
			c.closed(t)
			if got := e.tagIssued(t, "orders"); got != last+1 {
				t.Fatalf("%v IDs taken, want 1: the command after the violation ran", got-last)
			}
		})
	}
}

// TestRESPEmptyCommandsSkipped: *0 and *-1 are empty commands, skipped as
// Redis skips them: no reply, the connection stays usable.
func TestRESPEmptyCommandsSkipped(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	c := e.dial(t)
	c.send(t, "*0\r\n*-1\r\n"+respCmd("PING")+"*0\r\nINCR orders\r\n*-1\r\n")
	if v := c.reply(t); v.str != "PONG" {
		t.Fatalf("PING after *0 and *-1: %v", v)
	}
	if v := wantInt(t, "INCR orders after *0", c.reply(t)); v != 1 {
		t.Fatalf("INCR orders after *0: %d", v)
	}
	if v := c.do(t, "ECHO", "still here"); v.str != "still here" {
		t.Fatalf("ECHO after *-1: %v", v)
	}
	if got := metricSum(t, e.srv.metrics.respProtocolErrors); got != 0 {
		t.Fatalf("flakeid_resp_protocol_errors_total %v after empty commands", got)
	}
}

// TestRESPInline: inline (telnet) commands work: PING, INCR orders, ID.NEXT
// with a bare LF, quoted arguments.
func TestRESPInline(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	c := e.dial(t)
	c.send(t, "PING\r\n")
	if v := c.reply(t); v.str != "PONG" {
		t.Fatalf("PING: %v", v)
	}
	c.send(t, "INCR orders\r\n")
	if v := wantInt(t, "INCR orders", c.reply(t)); v != 1 {
		t.Fatalf("INCR orders: %d", v)
	}
	c.send(t, "\r\n  \r\nid.next orders 2\n")
	if v := c.reply(t); v.kind != '*' || len(v.elems) != 2 || v.elems[0].num != 2 || v.elems[1].num != 3 {
		t.Fatalf("ID.NEXT orders 2: %v", v)
	}
	c.send(t, `ECHO "a b"`+"\r\n")
	if v := c.reply(t); v.kind != '$' || v.str != "a b" {
		t.Fatalf(`ECHO "a b": %v`, v)
	}
}

// TestRESPCrossProtocol: an HTTP request sent to the RESP port (as a
// browser's cross-protocol POST would) closes the connection without a
// reply, and is logged.
func TestRESPCrossProtocol(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	c := e.dial(t)
	c.send(t, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 13\r\n\r\nINCR orders\r\n")
	c.closed(t)
	if got := e.tagIssued(t, "orders"); got != 0 {
		t.Fatalf("the body of the HTTP request ran: %v IDs taken", got)
	}
	if !strings.Contains(e.log.String(), "HTTP request") {
		t.Fatalf("no warning logged:\n%s", e.log.String())
	}
}

// TestRESPMaxConns: with MaxConns 2, a third connection reads "-ERR max
// number of clients reached" and is closed, counted in
// flakeid_resp_connections_rejected_total; the two keep working, and once
// one closes a new connection is served.
func TestRESPMaxConns(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, func(c *Config) { c.RESP.MaxConns = 2 }, nil)
	var open []*rawConn
	for range 2 {
		c := e.dial(t)
		if v := c.do(t, "PING"); v.str != "PONG" {
			t.Fatalf("PING: %v", v)
		}
		open = append(open, c)
	}
	c := e.dial(t)
	wantErr(t, "a third connection", c.reply(t), "ERR", "max number of clients reached")
	c.closed(t)
	if got := metricSum(t, e.srv.metrics.respRejected); got != 1 {
		t.Fatalf("flakeid_resp_connections_rejected_total %v, want 1", got)
	}
	if status, body := e.httpDo(t, "GET", "/metrics", ""); status != 200 || !strings.Contains(body, "flakeid_resp_connections_rejected_total 1\n") {
		t.Fatalf("/metrics: %d, no flakeid_resp_connections_rejected_total 1", status)
	}
	for i, c := range open {
		if v := c.do(t, "INCR", "orders"); v.kind != ':' {
			t.Fatalf("connection %d after the rejection: %v", i+1, v)
		}
	}
	open[0].Close()
	waitFor(t, "1 RESP connection open", func() bool { return gaugeValue(t, e.srv.metrics.respConns) == 1 })
	if v := e.dial(t).do(t, "PING"); v.str != "PONG" {
		t.Fatalf("a new connection after one closed: %v", v)
	}
}

// TestRESPReadTimeout: a client that sends the start of a command and
// stops is closed after ReadTimeout (1 s), without a reply, and the command
// is not run.
func TestRESPReadTimeout(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, func(c *Config) { c.ReadTimeout, c.ReadHeaderTimeout = time.Second, time.Second }, nil)
	for _, partial := range []string{"*2\r\n$4\r\nINCR\r\n", "*2\r\n$4\r\nINCR\r\n$6\r\nord", "INCR ord"} {
		c := e.dial(t)
		c.send(t, partial)
		c.closed(t)
	}
	if got := e.tagIssued(t, "orders"); got != 0 {
		t.Fatalf("%v IDs taken by cut-off commands", got)
	}
}

// TestRESPSteadyPipelineOutlivesReadTimeout: with ReadTimeout 1 s, a client
// that streams a pipeline for 3 s, every command arriving whole within
// 50 ms but every write ending mid-command, is served to the end: the read
// timeout bounds one command, not a run of reads that each end mid-command.
func TestRESPSteadyPipelineOutlivesReadTimeout(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, func(c *Config) { c.ReadTimeout, c.ReadHeaderTimeout = time.Second, time.Second }, nil)
	c := e.dial(t)
	cmd := respCmd("INCR", "orders")
	half := len(cmd) / 2
	const n = 60
	replies := make(chan error, 1)
	go func() {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		for i := range n {
			v, err := readRESP(c.br, 2)
			if err == nil && (v.kind != ':' || v.num != int64(i+1)) {
				err = fmt.Errorf("reply %d: %v", i+1, v)
			}
			if err != nil {
				replies <- fmt.Errorf("after %d replies: %w", i, err)
				return
			}
		}
		replies <- nil
	}()
	start := time.Now()
	c.send(t, cmd[:half])
	for range n - 1 {
		time.Sleep(50 * time.Millisecond)
		if _, err := io.WriteString(c, cmd[half:]+cmd[:half]); err != nil {
			break // the reader reports why
		}
	}
	io.WriteString(c, cmd[half:])
	if err := <-replies; err != nil {
		t.Fatalf("a pipeline streamed for %v (each command whole within 50 ms, ReadTimeout 1 s) was cut off: %v",
			time.Since(start).Round(100*time.Millisecond), err)
	}
}

// TestRESPIdleTimeout: with IdleTimeout 1 s an idle connection is closed;
// with IdleTimeout 0 (the default) one idle for 2 s is still served.
func TestRESPIdleTimeout(t *testing.T) {
	t.Parallel()
	t.Run("1s", func(t *testing.T) {
		e := newRESPEnv(t, func(c *Config) { c.RESP.IdleTimeout = time.Second }, nil)
		c := e.dial(t)
		if v := c.do(t, "PING"); v.str != "PONG" {
			t.Fatalf("PING: %v", v)
		}
		c.closed(t)
		waitFor(t, "0 RESP connections", func() bool { return gaugeValue(t, e.srv.metrics.respConns) == 0 })
	})
	t.Run("0", func(t *testing.T) {
		e := newRESPEnv(t, nil, nil)
		c := e.dial(t)
		if v := c.do(t, "PING"); v.str != "PONG" {
			t.Fatalf("PING: %v", v)
		}
		time.Sleep(2 * time.Second)
		if v := c.do(t, "PING"); v.str != "PONG" {
			t.Fatalf("PING after 2 s idle: %v", v)
		}
	})
}

// TestRESPNonReadingClient: a client that pipelines thousands of ID.NEXT
// orders 100000 and never reads its replies is closed once a write has
// been blocked for WriteTimeout (1 s), the server's heap does not grow by
// the replies it could not send (less than 64 MB, while the replies asked
// for are gigabytes), and other clients are served meanwhile.
func TestRESPNonReadingClient(t *testing.T) {
	e := newRESPEnv(t, func(c *Config) { c.WriteTimeout = time.Second }, nil)
	other := e.client(t, 2, nil)
	if err := other.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "1 RESP connection", func() bool { return gaugeValue(t, e.srv.metrics.respConns) == 1 })
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapInuse, ms.HeapInuse

	hog := e.dial(t)
	payload := strings.Repeat(respCmd("ID.NEXT", "orders", "100000"), 5000)
	wrote := make(chan error, 1)
	go func() {
		hog.SetWriteDeadline(time.Now().Add(60 * time.Second))
		_, err := io.WriteString(hog, payload)
		wrote <- err
	}()
	waitFor(t, "the hog's commands run", func() bool { return e.tagIssued(t, "orders") >= 100000 })
	served := false
	for deadline := time.Now().Add(60 * time.Second); gaugeValue(t, e.srv.metrics.respConns) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the client that does not read is still connected after 60 s (write timeout 1 s)")
		}
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		if !served {
			if _, err := other.Incr(t.Context(), "orders").Result(); err != nil {
				t.Fatalf("another client while the hog blocks: %v", err)
			}
			served = true
		}
	}
	runtime.ReadMemStats(&ms)
	peak = max(peak, ms.HeapInuse)
	if growth := int64(peak) - int64(base); growth > 64<<20 {
		t.Fatalf("the heap grew by %d MB for a client that does not read", growth>>20)
	}
	t.Logf("heap in use grew by at most %.1f MB; %v IDs taken", float64(int64(peak)-int64(base))/(1<<20), e.tagIssued(t, "orders"))
	// The other client is served again. (Its PING also says whether the
	// node is ready: under the race detector on a loaded machine, the hog's
	// half a million IDs can delay a lease renewal past the reservation for a
	// moment, which is not what this test is about.)
	var pingErr error
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if pingErr = other.Ping(t.Context()).Err(); pingErr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("another client after the hog was closed: %v", pingErr)
		}
	}
	select {
	case <-wrote:
	case <-time.After(60 * time.Second):
		t.Fatal("the hog's write still blocks 60 s after the server closed it")
	}
}

// stopAndWait runs e.stop once the test's client is ready to read: it
// cancels ServeRESP's context, waits until the listener is closed (so the
// connections have been told to stop reading), and returns a channel with
// ServeRESP's result.
func (e *respEnv) stopAndWait(t *testing.T) <-chan error {
	t.Helper()
	stopped := make(chan error, 1)
	go func() { stopped <- e.stop() }()
	waitFor(t, "the RESP listener closed", func() bool {
		d, err := net.DialTimeout("tcp", e.addr, time.Second)
		if err == nil {
			d.Close()
		}
		return err != nil
	})
	return stopped
}

// served waits (up to 30 s) for ServeRESP to return, and checks it
// returned nil.
func served(t *testing.T, stopped <-chan error) {
	t.Helper()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("ServeRESP: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ServeRESP still runs 30 s after its context ended")
	}
}

// TestRESPShutdown: cancelling ServeRESP's context while a client has
// pipelined commands and reads none of the replies yet: the replies to the
// commands the server read are all delivered, then the connection is
// closed, no other ID is taken, and ServeRESP returns nil. A client that
// never reads is cut off after ShutdownTimeout (at once when it is
// negative).
func TestRESPShutdown(t *testing.T) {
	t.Parallel()
	t.Run("drain", func(t *testing.T) {
		// The last command's reply (8 MB) is more than the socket buffers
		// hold: the server is still writing it when told to stop.
		e := newRESPEnv(t, func(c *Config) { c.RESP.MaxRequest = 16 << 20 }, nil)
		c := e.dial(t)
		big := strings.Repeat("0123456789abcdef", 512<<10)
		c.send(t, "INCR orders\r\n"+respCmd("INCR", "orders")+"PING\r\n"+respCmd("ECHO", big))
		waitFor(t, "the pipeline read", func() bool { return e.counter(t, "echo", "ok") == 1 })
		stopped := e.stopAndWait(t)
		if v := wantInt(t, "INCR 1", c.reply(t)); v != 1 {
			t.Fatalf("INCR 1: %d", v)
		}
		if v := wantInt(t, "INCR 2", c.reply(t)); v != 2 {
			t.Fatalf("INCR 2: %d", v)
		}
		if v := c.reply(t); v.str != "PONG" {
			t.Fatalf("PING: %v", v)
		}
		if v := c.reply(t); v.kind != '$' || v.str != big {
			t.Fatalf("ECHO of 8 MB: %d bytes back", len(v.str))
		}
		c.closed(t)
		served(t, stopped)
	})

	t.Run("unread pipeline", func(t *testing.T) {
		// The client sends a burst of 5 MB, more than the server reads
		// before it stops: what the server read is answered, and those
		// answers arrive whole, although the server closes with input
		// unread (it shuts its write side and drains the input before
		// it closes, so the kernel does not reset the connection). A
		// client that sends without end is cut off, its last replies
		// lost: that cannot be helped.
		e := newRESPEnv(t, nil, nil)
		c := e.dial(t)
		pair := respCmd("INCR", "orders") + respCmd("ECHO", strings.Repeat("e", 1000))
		chunk := strings.Repeat(pair, 1000) // about 1 MB
		wrote := make(chan error, 1)
		go func() {
			c.SetWriteDeadline(time.Now().Add(60 * time.Second))
			for range 5 { // a burst the server drains when it closes
				if _, err := io.WriteString(c, chunk); err != nil {
					wrote <- err
					return
				}
			}
			wrote <- nil
		}()
		// Wait until the server is blocked writing to the client that
		// does not read: no ID taken for 300 ms.
		prev := -1.0
		for stable, deadline := 0, time.Now().Add(60*time.Second); stable < 3; time.Sleep(100 * time.Millisecond) {
			if now := e.tagIssued(t, "orders"); now == prev && now > 0 {
				stable++
			} else {
				stable, prev = 0, now
			}
			if time.Now().After(deadline) {
				t.Fatal("the server never blocked on the client that does not read")
			}
		}
		stopped := e.stopAndWait(t)
		c.SetReadDeadline(time.Now().Add(60 * time.Second))
		incrs, echoes := 0, 0
		var end error
		for {
			v, err := readRESP(c.br, 2)
			if err != nil {
				end = err
				break
			}
			switch {
			case v.kind == ':' && v.num == int64(incrs+1) && incrs == echoes:
				incrs++
			case v.kind == '$' && len(v.str) == 1000 && echoes == incrs-1:
				echoes++
			default:
				t.Fatalf("after %d INCR and %d ECHO replies: %v", incrs, echoes, v)
			}
		}
		served(t, stopped)
		select {
		case <-wrote:
		case <-time.After(60 * time.Second):
			t.Fatal("the client's write still blocks 60 s after the server closed")
		}
		taken := e.tagIssued(t, "orders")
		t.Logf("%d INCR and %d ECHO replies, %v IDs taken, the stream ended with %v", incrs, echoes, taken, end)
		if !isClosed(end) || taken != float64(incrs) || echoes != incrs && echoes != incrs-1 {
			t.Fatalf("the server took %v IDs and answered %d INCR (and %d ECHO) before the stream ended with %v "+
				"(io.ErrUnexpectedEOF: in the middle of a reply): answers to commands it read were lost", taken, incrs, echoes, end)
		}
	})

	t.Run("cut off", func(t *testing.T) {
		e := newRESPEnv(t, func(c *Config) { c.ShutdownTimeout = time.Second }, nil)
		idle := e.client(t, 3, nil)
		if err := idle.Ping(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		hog := e.dial(t)
		hog.send(t, strings.Repeat(respCmd("ID.NEXT", "orders", "100000"), 50))
		waitFor(t, "the hog's commands run", func() bool { return e.tagIssued(t, "orders") >= 100000 })
		served(t, e.stopAndWait(t))
		if got := gaugeValue(t, e.srv.metrics.respConns); got != 0 {
			t.Fatalf("%v RESP connections open after ServeRESP returned", got)
		}
	})

	t.Run("no wait", func(t *testing.T) {
		// A negative ShutdownTimeout cuts the hog off at once, not after
		// the default 10s.
		e := newRESPEnv(t, func(c *Config) { c.ShutdownTimeout = -1 }, nil)
		hog := e.dial(t)
		hog.send(t, strings.Repeat(respCmd("ID.NEXT", "orders", "100000"), 50))
		waitFor(t, "the hog's commands run", func() bool { return e.tagIssued(t, "orders") >= 100000 })
		start := time.Now()
		served(t, e.stopAndWait(t))
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("ServeRESP returned %v after its context ended, want at once", took)
		}
	})
}

// TestRESPIDNextCost: ID.NEXT orders 100000 costs the server about its
// reply's size in allocations (under 64 MB for a reply under 1 MB), not a
// copy of the pending replies per ID.
func TestRESPIDNextCost(t *testing.T) {
	e := newRESPEnv(t, nil, nil)
	in := []byte(respCmd("ID.NEXT", "orders", "100000"))
	serveBytes(t, e.srv, in) // warm up: the tag's buffers
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out := serveBytes(t, e.srv, in)
	runtime.ReadMemStats(&after)
	v, err := readRESP(bufio.NewReader(strings.NewReader(string(out))), 2)
	if err != nil || v.kind != '*' || len(v.elems) != 100000 {
		t.Fatalf("ID.NEXT orders 100000: %v %v", v, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Fatalf("ID.NEXT orders 100000 (a reply of %d KB) allocated %d MB", len(out)>>10, alloc>>20)
	}
}

// TestRESPTLS: with TLSCert and TLSKey the RESP listener speaks TLS: a
// go-redis client with the certificate's pool is served; a plain-text
// client gets no RESP reply and is closed.
func TestRESPTLS(t *testing.T) {
	t.Parallel()
	cert, key, pool := selfSigned(t, t.TempDir())
	e := newRESPEnv(t, func(c *Config) { c.TLSCert, c.TLSKey = cert, key }, nil)
	for _, proto := range []int{2, 3} {
		c := e.client(t, proto, func(o *redis.Options) {
			o.TLSConfig = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
		})
		if v, err := c.Incr(t.Context(), "orders").Result(); err != nil || v < 1 {
			t.Fatalf("INCR orders over TLS, RESP%d: %d, %v", proto, v, err)
		}
		if err := c.Ping(t.Context()).Err(); err != nil {
			t.Fatalf("PING over TLS: %v", err)
		}
	}
	plain := e.dial(t)
	plain.send(t, "PING\r\nINCR orders\r\n")
	plain.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(plain.br)
	if err != nil && !isClosed(err) {
		t.Fatalf("a plain-text client: %v after %q, want the connection closed", err, got)
	}
	if len(got) > 0 && strings.IndexByte("+-:$*%_", got[0]) >= 0 || strings.Contains(string(got), "PONG") {
		t.Fatalf("a plain-text client got %q, a RESP reply", got)
	}
	if v := e.tagIssued(t, "orders"); v != 2 {
		t.Fatalf("%v IDs of orders taken, want the 2 of the TLS clients", v)
	}
}

// TestRESPMetrics: flakeid_resp_commands_total counts commands by name and
// result (unknown ones as "other"), flakeid_resp_connections follows the
// connections up and down, flakeid_resp_protocol_errors_total counts
// framing errors, and the IDs count in flakeid_ids_issued_total; all on
// /metrics.
func TestRESPMetrics(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	c := e.dial(t)
	c.do(t, "PING")
	if got := gaugeValue(t, e.srv.metrics.respConns); got != 1 {
		t.Fatalf("flakeid_resp_connections %v with one open, want 1", got)
	}
	for range 3 {
		wantInt(t, "INCR orders", c.do(t, "INCR", "orders"))
	}
	c.do(t, "INCR", "a/b")
	c.do(t, "FOO")
	c.do(t, "incr")
	c.do(t, "ID.NEXT", "snowflake", "4")
	c2 := e.dial(t)
	c2.do(t, "PING")
	if got := gaugeValue(t, e.srv.metrics.respConns); got != 2 {
		t.Fatalf("flakeid_resp_connections %v with two open, want 2", got)
	}
	c2.Close()
	waitFor(t, "1 RESP connection", func() bool { return gaugeValue(t, e.srv.metrics.respConns) == 1 })
	for _, tc := range []struct {
		command, result string
		want            float64
	}{{"incr", "ok", 3}, {"incr", "error", 2}, {"other", "error", 1}, {"ping", "ok", 2}, {"id.next", "ok", 1}, {"id.next", "error", 0}} {
		if got := e.counter(t, tc.command, tc.result); got != tc.want {
			t.Errorf("flakeid_resp_commands_total{command=%q,result=%q} %v, want %v", tc.command, tc.result, got, tc.want)
		}
	}
	c.send(t, "*1\r\n:5\r\n")
	wantErr(t, "a non-bulk argument", c.reply(t), "ERR", "Protocol error")
	c.closed(t)
	waitFor(t, "0 RESP connections", func() bool { return gaugeValue(t, e.srv.metrics.respConns) == 0 })
	status, body := e.httpDo(t, "GET", "/metrics", "")
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	for _, want := range []string{
		`flakeid_resp_commands_total{command="incr",result="ok"} 3`,
		`flakeid_resp_commands_total{command="incr",result="error"} 2`,
		`flakeid_resp_commands_total{command="other",result="error"} 1`,
		`flakeid_resp_connections 0`,
		`flakeid_resp_connections_rejected_total 0`,
		`flakeid_resp_protocol_errors_total 1`,
		`flakeid_ids_issued_total{kind="segment",tag="orders"} 3`,
		`flakeid_ids_issued_total{kind="snowflake",tag=""} 4`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestRESPConnectionCommands: what clients send on connect: HELLO (2, 3,
// with SETNAME; 4 is NOPROTO), CLIENT SETNAME/GETNAME/SETINFO/ID/INFO/
// NO-EVICT and an unknown subcommand, SELECT 0 (others out of range), ECHO,
// COMMAND COUNT/INFO/DOCS, INFO's server and clients sections, CONFIG GET
// (an empty map), and QUIT, which answers OK and closes.
func TestRESPConnectionCommands(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	c := e.dial(t)
	m, err := c.do(t, "HELLO").fields()
	if err != nil || m["server"].str != "flakeid" || m["version"].str != "7.0.0" || m["proto"].num != 2 ||
		m["mode"].str != "standalone" || m["role"].str != "master" || m["modules"].kind != '*' || m["id"].kind != ':' {
		t.Fatalf("HELLO: %v %v", m, err)
	}
	wantErr(t, "HELLO 4", c.do(t, "HELLO", "4"), "NOPROTO", "unsupported protocol version")
	c.proto = 3
	v := c.do(t, "HELLO", "3", "SETNAME", "app-1")
	if m, err := v.fields(); err != nil || v.kind != '%' || m["proto"].num != 3 {
		t.Fatalf("HELLO 3: %v", v)
	}
	if v := c.do(t, "CLIENT", "GETNAME"); v.str != "app-1" {
		t.Fatalf("CLIENT GETNAME after HELLO SETNAME: %v", v)
	}
	for _, args := range [][]string{{"CLIENT", "SETNAME", "app-2"}, {"CLIENT", "SETINFO", "LIB-NAME", "go-redis"},
		{"CLIENT", "SETINFO", "lib-ver", "9.23.0"}, {"CLIENT", "NO-EVICT", "on"}, {"CLIENT", "NO-TOUCH", "off"}, {"SELECT", "0"}} {
		if v := c.do(t, args...); v.kind != '+' || v.str != "OK" {
			t.Fatalf("%v: %v", args, v)
		}
	}
	id := wantInt(t, "CLIENT ID", c.do(t, "CLIENT", "ID"))
	if v := c.do(t, "CLIENT", "INFO"); v.kind != '$' || !strings.Contains(v.str, fmt.Sprintf("id=%d ", id)) ||
		!strings.Contains(v.str, "name=app-2 ") || !strings.Contains(v.str, "lib-name=go-redis") || !strings.Contains(v.str, "resp=3") {
		t.Fatalf("CLIENT INFO: %v", v)
	}
	wantErr(t, "CLIENT KILL", c.do(t, "CLIENT", "KILL", "x"), "ERR", "unknown subcommand 'KILL'", "CLIENT HELP")
	wantErr(t, "CLIENT SETNAME with a space", c.do(t, "CLIENT", "SETNAME", "a b"), "ERR")
	wantErr(t, "SELECT 1", c.do(t, "SELECT", "1"), "ERR", "DB index is out of range")
	if v := c.do(t, "ECHO", "x\r\ny"); v.kind != '$' || v.str != "x\r\ny" {
		t.Fatalf("ECHO: %v", v)
	}
	count := wantInt(t, "COMMAND COUNT", c.do(t, "COMMAND", "COUNT"))
	if v := c.do(t, "COMMAND"); v.kind != '*' || int64(len(v.elems)) != count {
		t.Fatalf("COMMAND: %d entries, COMMAND COUNT %d", len(v.elems), count)
	}
	v = c.do(t, "COMMAND", "INFO", "incr", "nosuch", "ID.NEXT")
	if v.kind != '*' || len(v.elems) != 3 || v.elems[0].elems[0].str != "incr" || v.elems[0].elems[1].num != 2 ||
		!v.elems[1].null || v.elems[2].elems[0].str != "id.next" || v.elems[2].elems[1].num != -2 {
		t.Fatalf("COMMAND INFO incr nosuch ID.NEXT: %v", v)
	}
	if v := c.do(t, "COMMAND", "DOCS", "incr"); v.kind != '%' || len(v.elems) != 2 || v.elems[0].str != "incr" {
		t.Fatalf("COMMAND DOCS incr: %v", v)
	}
	v = c.do(t, "INFO")
	if v.kind != '$' || !strings.Contains(v.str, "# Server\r\n") || !strings.Contains(v.str, "redis_version:7.0.0\r\n") ||
		!strings.Contains(v.str, "# Clients\r\n") || !strings.Contains(v.str, "connected_clients:1") {
		t.Fatalf("INFO: %v", v)
	}
	_, port, _ := net.SplitHostPort(e.addr)
	if !strings.Contains(v.str, "tcp_port:"+port+"\r\n") {
		t.Fatalf("INFO lacks tcp_port:%s: %q", port, v.str)
	}
	if v := c.do(t, "INFO", "clients"); strings.Contains(v.str, "# Server") || !strings.Contains(v.str, "# Clients") {
		t.Fatalf("INFO clients: %v", v)
	}
	if v := c.do(t, "CONFIG", "GET", "maxmemory"); v.kind != '%' || len(v.elems) != 0 {
		t.Fatalf("CONFIG GET maxmemory in RESP3: %v, want an empty map", v)
	}
	// What redis-benchmark asks before it starts, and globs as Redis reads them.
	for _, tc := range []struct {
		pats []string
		want map[string]string
	}{
		{[]string{"save"}, map[string]string{"save": ""}},
		{[]string{"APPENDONLY", "save"}, map[string]string{"appendonly": "no", "save": ""}},
		{[]string{"max*"}, map[string]string{"maxclients": strconv.Itoa(DefaultRESPConfig().MaxConns)}},
		{[]string{"port", "databases"}, map[string]string{"port": port, "databases": "1"}},
		{[]string{"*"}, nil},
	} {
		v := c.do(t, append([]string{"CONFIG", "GET"}, tc.pats...)...)
		m, err := v.fields()
		if err != nil || v.kind != '%' {
			t.Fatalf("CONFIG GET %v: %v %v", tc.pats, v, err)
		}
		if tc.want == nil {
			if len(m) != 7 {
				t.Errorf("CONFIG GET *: %d parameters, want 7: %v", len(m), v)
			}
			continue
		}
		if len(m) != len(tc.want) {
			t.Errorf("CONFIG GET %v: %v, want %v", tc.pats, v, tc.want)
		}
		for k, w := range tc.want {
			if f, ok := m[k]; !ok || f.str != w {
				t.Errorf("CONFIG GET %v: %s = %v, want %q", tc.pats, k, f, w)
			}
		}
	}
	// CLIENT LIST shows every connection, with what each set itself.
	other := e.dial(t)
	if v := other.do(t, "CLIENT", "SETNAME", "other-app"); v.str != "OK" {
		t.Fatalf("CLIENT SETNAME: %v", v)
	}
	if v := c.do(t, "CLIENT", "LIST"); v.kind != '$' || strings.Count(v.str, "\n") != 2 ||
		!strings.Contains(v.str, fmt.Sprintf("id=%d ", id)) || !strings.Contains(v.str, "name=app-2 ") ||
		!strings.Contains(v.str, "name=other-app ") || strings.Index(v.str, "name=app-2 ") > strings.Index(v.str, "name=other-app ") {
		t.Fatalf("CLIENT LIST: %q", v.str)
	}
	wantErr(t, "CONFIG SET", c.do(t, "CONFIG", "SET", "maxmemory", "1"), "ERR", "not supported")
	c.send(t, "QUIT\r\nPING\r\n")
	if v := c.reply(t); v.kind != '+' || v.str != "OK" {
		t.Fatalf("QUIT: %v", v)
	}
	c.closed(t)
}

// TestRESPTransactions: MULTI queues commands (+QUEUED) and EXEC runs them
// in order, answering their replies as one array (a command that fails
// when run answers its error in the array, and takes no ID); a command
// refused while queued makes EXEC answer EXECABORT and run nothing;
// DISCARD drops the queue; EXEC and DISCARD without MULTI and a nested
// MULTI are errors; more than 10,000 commands are refused. go-redis's
// TxPipelined works in RESP2 and RESP3.
func TestRESPTransactions(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	c := e.dial(t)
	ok := func(what string, v respValue, want string) {
		t.Helper()
		if v.kind != '+' || v.str != want {
			t.Fatalf("%s: %v, want +%s", what, v, want)
		}
	}
	ok("MULTI", c.do(t, "MULTI"), "OK")
	ok("INCR orders queued", c.do(t, "INCR", "orders"), "QUEUED")
	ok("INCR a/b queued", c.do(t, "INCR", "a/b"), "QUEUED")
	ok("ID.NEXT orders 2 queued", c.do(t, "ID.NEXT", "orders", "2"), "QUEUED")
	ok("PING queued", c.do(t, "PING"), "QUEUED")
	if e.tagIssued(t, "orders") != 0 {
		t.Fatal("a queued command ran before EXEC")
	}
	v := c.do(t, "EXEC")
	if v.kind != '*' || len(v.elems) != 4 || v.elems[0].num != 1 || !v.elems[1].isError() ||
		len(v.elems[2].elems) != 2 || v.elems[2].elems[0].num != 2 || v.elems[3].str != "PONG" {
		t.Fatalf("EXEC: %v, want [1, an error, [2 3], PONG]", v)
	}
	wantErr(t, "the failed command in EXEC", v.elems[1], "ERR", "'/'")

	ok("MULTI", c.do(t, "MULTI"), "OK")
	ok("INCR orders queued", c.do(t, "INCR", "orders"), "QUEUED")
	wantErr(t, "an unknown command in MULTI", c.do(t, "NOSUCH"), "ERR", "unknown command")
	wantErr(t, "wrong arity in MULTI", c.do(t, "INCR"), "ERR", "wrong number of arguments")
	wantErr(t, "nested MULTI", c.do(t, "MULTI"), "ERR", "nested")
	wantErr(t, "EXEC after refused commands", c.do(t, "EXEC"), "EXECABORT")

	ok("MULTI", c.do(t, "MULTI"), "OK")
	ok("INCR orders queued", c.do(t, "INCR", "orders"), "QUEUED")
	ok("DISCARD", c.do(t, "DISCARD"), "OK")
	wantErr(t, "EXEC without MULTI", c.do(t, "EXEC"), "ERR", "without MULTI")
	wantErr(t, "DISCARD without MULTI", c.do(t, "DISCARD"), "ERR", "without MULTI")
	if v := wantInt(t, "INCR orders after the aborted and discarded transactions", c.do(t, "INCR", "orders")); v != 4 {
		t.Fatalf("INCR orders after the aborted and discarded transactions: %d, want 4", v)
	}

	ok("MULTI", c.do(t, "MULTI"), "OK")
	c.send(t, strings.Repeat("PING\r\n", 10_001))
	for i := range 10_000 {
		if v := c.reply(t); v.str != "QUEUED" {
			t.Fatalf("PING %d in MULTI: %v", i+1, v)
		}
	}
	wantErr(t, "the 10,001st command in MULTI", c.reply(t), "ERR", "10000")
	wantErr(t, "EXEC of an over-long transaction", c.do(t, "EXEC"), "EXECABORT")

	for _, proto := range []int{2, 3} {
		rc := e.client(t, proto, nil)
		ctx := t.Context()
		var incr *redis.IntCmd
		var next *redis.Cmd
		var ping *redis.StatusCmd
		if _, err := rc.TxPipelined(ctx, func(p redis.Pipeliner) error {
			incr = p.Incr(ctx, "orders")
			next = p.Do(ctx, "ID.NEXT", "orders", 2)
			ping = p.Ping(ctx)
			return nil
		}); err != nil {
			t.Fatalf("TxPipelined, RESP%d: %v", proto, err)
		}
		first, err := incr.Result()
		if ids := int64s(t, "ID.NEXT in a transaction", next); err != nil || len(ids) != 2 || ids[0] != first+1 || ids[1] != first+2 {
			t.Fatalf("TxPipelined, RESP%d: INCR %d (%v), ID.NEXT %v", proto, first, err, ids)
		}
		if ping.Val() != "PONG" {
			t.Fatalf("TxPipelined, RESP%d: PING %q", proto, ping.Val())
		}
	}
}

// TestRESPQuitInTransaction: QUIT sent inside MULTI leaves a reply stream
// a client can read: every reply whole (an EXEC array holds as many
// replies as it announces), then the close; and the IDs taken are those
// answered.
func TestRESPQuitInTransaction(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	c := e.dial(t)
	c.send(t, "MULTI\r\nINCR orders\r\nQUIT\r\nINCR orders\r\nEXEC\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var replies []respValue
	delivered := 0
	for {
		v, err := readRESP(c.br, 2)
		if isClosed(err) {
			break
		}
		if err != nil {
			t.Fatalf("after the replies %v: %v", replies, err)
		}
		replies = append(replies, v)
		for _, x := range append([]respValue{v}, v.elems...) {
			if x.kind == ':' {
				delivered++
			}
		}
	}
	if taken := e.tagIssued(t, "orders"); taken != float64(delivered) {
		t.Fatalf("replies %v: %d IDs answered, %v taken", replies, delivered, taken)
	}
}

// TestRESPLease: ID.LEASE, ID.RENEW and ID.RELEASE answer as the JSON API
// does, over both protocols, and refuse what it refuses.
func TestRESPLease(t *testing.T) {
	t.Parallel()
	e := newRESPEnv(t, nil, nil)
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
			c := e.client(t, proto, nil)
			ctx := t.Context()
			asMap := func(v any) map[string]any {
				t.Helper()
				got := map[string]any{}
				switch m := v.(type) {
				case []any:
					for i := 0; i+1 < len(m); i += 2 {
						got[m[i].(string)] = m[i+1]
					}
				case map[any]any:
					for k, v := range m {
						got[k.(string)] = v
					}
				default:
					t.Fatalf("a lease of %T", v)
				}
				return got
			}
			v, err := c.Do(ctx, "ID.LEASE", "OWNER", fmt.Sprintf("resp-%d", proto)).Result()
			if err != nil {
				t.Fatal(err)
			}
			l := asMap(v)
			name, _ := l["lease"].(string)
			if len(l) != 14 || len(name) != 32 || l["worker_bits"] != int64(5) || l["time_unit_us"] != int64(1000) ||
				l["first_tick"].(int64) >= l["end_tick"].(int64) || l["layout"] != e.srv.node.Layout().String() {
				t.Fatalf("ID.LEASE: %v", l)
			}
			time.Sleep(150 * time.Millisecond)
			v, err = c.Do(ctx, "id.renew", name).Result()
			if err != nil {
				t.Fatal(err)
			}
			if r := asMap(v); r["end_tick"].(int64) <= l["end_tick"].(int64) || r["worker"] != l["worker"] {
				t.Fatalf("ID.RENEW %v after %v", r, l)
			}
			if s, err := c.Do(ctx, "ID.RELEASE", name).Text(); err != nil || s != "OK" {
				t.Fatalf("ID.RELEASE: %q, %v", s, err)
			}
			_, err = c.Do(ctx, "ID.RENEW", name).Result()
			redisErr(t, "ID.RENEW of a released lease", err, "ERR", "no lease")
			_, err = c.Do(ctx, "ID.LEASE", "OWNER", "a b").Result()
			redisErr(t, "ID.LEASE OWNER 'a b'", err, "ERR", "owner")
			_, err = c.Do(ctx, "ID.LEASE", "TTL", "5").Result()
			redisErr(t, "ID.LEASE TTL 5", err, "ERR", "syntax error: ID.LEASE [OWNER owner]")
		})
	}
}

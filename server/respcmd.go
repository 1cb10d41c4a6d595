package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/redcon"

	"github.com/flakeid/flakeid/idview"
	"github.com/flakeid/flakeid/segment"
	"github.com/flakeid/flakeid/snowflake"
)

// respConn is one client connection of the RESP listener.
type respConn struct {
	s        *Server
	l        *respListener
	nc       net.Conn
	ctx      context.Context // ends when the listener cuts connections off
	id       int64
	created  time.Time
	rd       respReader
	wr       *redcon.Writer
	stopping atomic.Bool

	authed bool   // no tokens are configured, or AUTH succeeded
	tok    *Token // the token of AUTH (nil without tokens)
	proto  int    // 2, or 3 after HELLO 3
	name   string // CLIENT SETNAME
	// libName and libVer are CLIENT SETINFO's.
	libName, libVer string
	shown           atomic.Pointer[respShown] // what CLIENT LIST of other connections shows (publish)
	quit            bool                      // QUIT, a write failed, or a cross-protocol request: close after this
	tx              *respTx                   // MULTI under way

	// tags caches what a segment key was checked for (its name, the
	// token's permission, its masking), so that INCR on a known key
	// allocates nothing. Cleared by AUTH and when it holds respTagCache.
	tags map[string]*respTag
}

// respTag is a segment key checked by respConn.tag, with what serving it
// needs, looked up once: the allocator's handle of the tag (set by its
// first successful use) and the tag's issued counter.
type respTag struct {
	name   string
	mk     *masking
	h      *segment.Handle
	issued prometheus.Counter
}

// respTagCache is how many checked keys a connection keeps.
const respTagCache = 64

// respError is a RESP error reply of the protocol's own: its prefix (ERR,
// NOAUTH, WRONGPASS, NOPROTO…) and message.
type respError struct{ prefix, msg string }

func (e *respError) Error() string { return e.prefix + " " + e.msg }

func respErrorf(prefix, format string, args ...any) *respError {
	return &respError{prefix: prefix, msg: fmt.Sprintf(format, args...)}
}

// respCommand is one command of the RESP listener.
type respCommand struct {
	name    string // lower case
	arity   int    // Redis's: n exactly n arguments (name included), -n at least n
	maxArgs int    // most arguments, 0: no bound
	flags   []string
	keys    bool // the first argument is a key
	noAuth  bool // allowed before AUTH
	// txControl marks the commands that run at once inside MULTI (MULTI,
	// EXEC, DISCARD, QUIT) instead of being queued.
	txControl bool
	group     string
	summary   string
	run       func(c *respConn, args [][]byte) error
	ok, bad   prometheus.Counter
}

// respCommands is the listener's command table, built once per Server.
type respCommands struct {
	byName map[string]*respCommand
	list   []*respCommand
	other  *respCommand // counts unknown commands
	incr   *respCommand
}

// newRESPCommands builds the command table and resolves its metrics.
func newRESPCommands(m *metrics) *respCommands {
	list := []*respCommand{
		{name: "incr", arity: 2, flags: []string{"write", "fast"}, keys: true, group: "string",
			summary: "The next ID of the key: a Snowflake ID for snowflake or snowflake:*, else the next ID of the segment tag of that name.", run: (*respConn).incr},
		{name: "id.next", arity: -2, maxArgs: 7, flags: []string{"write", "fast"}, keys: true, group: "flakeid",
			summary: "ID.NEXT key [count] [FORMAT uuid7|typeid|ulid] [PREFIX prefix]: count IDs (default 1) of the key, in order; strings where the server masks them; for snowflake, FORMAT gives their UUIDv7, TypeID or ULID texts.", run: (*respConn).idNext},
		{name: "id.bounds", arity: -1, maxArgs: 5, flags: []string{"readonly", "fast"}, group: "flakeid",
			summary: "ID.BOUNDS [FROM time] [TO time]: the smallest and largest Snowflake IDs whose time lies in [from, to) (RFC 3339, a date, Unix ms, now or -1h; default the layout's epoch and end).", run: (*respConn).idBounds},
		{name: "id.decode", arity: -2, maxArgs: 4, flags: []string{"readonly", "fast"}, group: "flakeid",
			summary: "ID.DECODE id [plain|masked]: the parts of a Snowflake ID (time, datacenter, worker, sequence); ID.DECODE number TAG tag: the period and counter of a series' number.", run: (*respConn).idDecode},
		{name: "id.lease", arity: -1, maxArgs: 3, flags: []string{"write"}, group: "flakeid",
			summary: "ID.LEASE [OWNER owner]: lease a worker id for local generation (as POST /v1/leases): the lease's name, worker id, layout and ticks [first_tick, end_tick).", run: (*respConn).idLease},
		{name: "id.renew", arity: 2, flags: []string{"write", "fast"}, group: "flakeid",
			summary: "ID.RENEW lease: renew a lease (every renew_every_ms): its grown end_tick.", run: (*respConn).idRenew},
		{name: "id.release", arity: 2, flags: []string{"write", "fast"}, group: "flakeid",
			summary: "ID.RELEASE lease: free a lease's worker id, its reservation stored; stop issuing under it first.", run: (*respConn).idRelease},
		{name: "incrby", arity: 3, flags: []string{"write", "fast"}, keys: true, group: "string",
			summary: "INCRBY key 1 is INCR key (redis-py's incr sends it); any other increment is refused: use ID.NEXT key count.", run: (*respConn).incrBy},
		{name: "incrbyfloat", arity: 3, flags: []string{"write", "fast"}, keys: true, group: "string", summary: "Not supported: use ID.NEXT key count.", run: (*respConn).counterOnly},
		{name: "decr", arity: 2, flags: []string{"write", "fast"}, keys: true, group: "string", summary: "Not supported: IDs never go down.", run: (*respConn).counterOnly},
		{name: "decrby", arity: 3, flags: []string{"write", "fast"}, keys: true, group: "string", summary: "Not supported: IDs never go down.", run: (*respConn).counterOnly},
		{name: "multi", arity: 1, flags: []string{"fast"}, txControl: true, group: "transactions", summary: "Starts queuing commands for EXEC (client pipelines send them as transactions).", run: (*respConn).multi},
		{name: "exec", arity: 1, flags: []string{"fast"}, txControl: true, group: "transactions", summary: "Runs the commands queued since MULTI, in order; their replies as one array.", run: (*respConn).execTx},
		{name: "discard", arity: 1, flags: []string{"fast"}, txControl: true, group: "transactions", summary: "Drops the commands queued since MULTI.", run: (*respConn).discard},
		{name: "ping", arity: -1, maxArgs: 2, flags: []string{"fast"}, group: "connection", summary: "PONG when the server is ready to hand out IDs, else an UNAVAILABLE error with the reason.", run: (*respConn).ping},
		{name: "echo", arity: 2, flags: []string{"fast"}, group: "connection", summary: "Returns the message.", run: (*respConn).echo},
		{name: "quit", arity: -1, flags: []string{"fast", "no-auth"}, noAuth: true, txControl: true, group: "connection", summary: "Closes the connection.", run: (*respConn).quitCmd},
		{name: "hello", arity: -1, flags: []string{"fast", "no-auth"}, noAuth: true, group: "connection", summary: "HELLO [2|3 [AUTH user token] [SETNAME name]]: the protocol version and the server.", run: (*respConn).hello},
		{name: "auth", arity: -2, maxArgs: 3, flags: []string{"fast", "no-auth"}, noAuth: true, group: "connection", summary: "AUTH [user] token: the bearer tokens of the HTTP API.", run: (*respConn).auth},
		{name: "select", arity: 2, flags: []string{"fast"}, group: "connection", summary: "SELECT 0: there is one keyspace.", run: (*respConn).selectDB},
		{name: "client", arity: -2, flags: []string{"fast"}, group: "connection", summary: "CLIENT SETNAME|GETNAME|SETINFO|ID|INFO|LIST|NO-EVICT|NO-TOUCH|HELP.", run: (*respConn).client},
		{name: "info", arity: -1, flags: []string{"fast"}, group: "server", summary: "INFO [section]: the server and clients sections.", run: (*respConn).info},
		{name: "config", arity: -2, flags: []string{"admin"}, group: "server", summary: "CONFIG GET pattern…: save, appendonly, databases, maxclients, timeout, port, proto-max-bulk-len (flakeid is configured by flags); other subcommands are refused.", run: (*respConn).config},
		{name: "command", arity: -1, flags: []string{"fast"}, group: "server", summary: "COMMAND [COUNT|LIST|INFO name…|DOCS [name…]]: this table.", run: (*respConn).command},
	}
	t := &respCommands{byName: map[string]*respCommand{}, list: list,
		other: &respCommand{name: "other"}}
	t.incr = list[0]
	for _, c := range append(list, t.other) {
		c.ok = m.respCommands.WithLabelValues(c.name, "ok")
		c.bad = m.respCommands.WithLabelValues(c.name, "error")
		if c != t.other {
			t.byName[c.name] = c
		}
	}
	return t
}

// lookup finds a command by its name in any case, without allocating.
func (t *respCommands) lookup(name []byte) *respCommand {
	if len(name) == 4 && name[0]|0x20 == 'i' && name[1]|0x20 == 'n' && name[2]|0x20 == 'c' && name[3]|0x20 == 'r' {
		return t.incr // the hot path, without hashing
	}
	var buf [16]byte
	if len(name) > len(buf) {
		return nil
	}
	for i, b := range name {
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		buf[i] = b
	}
	return t.byName[string(buf[:len(name)])]
}

// exec runs one command and writes its reply.
func (c *respConn) exec(args [][]byte) {
	t := c.s.resp
	cmd := t.lookup(args[0])
	if cmd == nil {
		if isCrossProtocol(args[0]) {
			c.s.log.Warn("server: RESP connection closed: it sent an HTTP request (POST or Host:), possibly a cross-protocol attack from a browser",
				"remote", c.nc.RemoteAddr().String())
			c.quit = true
			return
		}
		if c.tx != nil {
			c.tx.failed = true
		}
		c.reply(t.other, respErrorf("ERR", "unknown command %s, with args beginning with: %s", quoteArg(args[0]), quoteArgs(args[1:])))
		return
	}
	err := c.check(cmd, args)
	if err == nil && c.tx != nil && !cmd.txControl {
		if err = c.tx.queue(args); err == nil {
			c.wr.WriteString("QUEUED")
			return
		}
	}
	if err != nil {
		if c.tx != nil {
			c.tx.failed = true
		}
		c.reply(cmd, err)
		return
	}
	c.reply(cmd, cmd.run(c, args))
}

// check checks what every command must keep: authentication (but for the
// commands allowed before it) and the number of arguments.
func (c *respConn) check(cmd *respCommand, args [][]byte) error {
	switch {
	case !c.authed && !cmd.noAuth:
		return respErrorf("NOAUTH", "Authentication required.")
	case cmd.arity > 0 && len(args) != cmd.arity, cmd.arity < 0 && len(args) < -cmd.arity,
		cmd.maxArgs > 0 && len(args) > cmd.maxArgs:
		return respErrorf("ERR", "wrong number of arguments for '%s' command", cmd.name)
	}
	return nil
}

// reply counts a command, and writes its error reply when it failed (a
// command that succeeded wrote its own reply).
func (c *respConn) reply(cmd *respCommand, err error) {
	if err == nil {
		cmd.ok.Inc()
		return
	}
	cmd.bad.Inc()
	var re *respError
	if errors.As(err, &re) {
		c.wr.WriteError(re.prefix + " " + respText(re.msg))
		return
	}
	ae := classify(err)
	if ae.Status >= 500 && ae.Code != codeUnavailable && ae.Code != codeTooLarge {
		c.s.log.Warn("server: RESP command failed", "command", cmd.name, "err", err)
	}
	c.wr.WriteError(respPrefix(ae.Code) + " " + respText(ae.Message))
}

// respPrefix is the RESP error prefix of an API error code.
func respPrefix(code string) string {
	switch code {
	case codeUnauth:
		return "NOAUTH"
	case codeForbidden:
		return "NOPERM"
	case codeUnavailable:
		return "UNAVAILABLE"
	case codeTooLarge:
		return "EXHAUSTED"
	}
	return "ERR"
}

// respText makes a message one line: an error or status reply ends at the
// first CR or LF, so none may be in it.
func respText(msg string) string {
	for i := 0; i < len(msg); i++ {
		if msg[i] == '\r' || msg[i] == '\n' {
			b := []byte(msg)
			for j := i; j < len(b); j++ {
				if b[j] == '\r' || b[j] == '\n' {
					b[j] = ' '
				}
			}
			return string(b)
		}
	}
	return msg
}

// quoteArg is a client's argument as an error message shows it: in single
// quotes, at most 40 bytes, bytes outside printable ASCII as \xHH.
func quoteArg(b []byte) string {
	out := []byte{'\''}
	for i, x := range b {
		if i == 40 {
			out = append(out, "…"...)
			break
		}
		if x < 0x20 || x > 0x7e || x == '\'' || x == '\\' {
			out = append(out, `\x`...)
			out = append(out, "0123456789abcdef"[x>>4], "0123456789abcdef"[x&15])
			continue
		}
		out = append(out, x)
	}
	return string(append(out, '\''))
}

// showKey is a key as a command in an error message shows it: as is when
// it is printable ASCII without spaces or quotes (every tag name is), else
// quoted.
func showKey(b []byte) string {
	if len(b) == 0 || len(b) > 40 {
		return quoteArg(b)
	}
	for _, x := range b {
		if x <= ' ' || x > '~' || x == '\'' || x == '"' || x == '\\' {
			return quoteArg(b)
		}
	}
	return string(b)
}

// quoteArgs quotes the first three of args, space-separated.
func quoteArgs(args [][]byte) string {
	s := ""
	for i, a := range args {
		if i == 3 {
			return s + " …"
		}
		if i > 0 {
			s += " "
		}
		s += quoteArg(a)
	}
	return s
}

// isCrossProtocol reports whether a command name is what an HTTP request
// sent to the RESP port reads as (Redis closes such connections too).
func isCrossProtocol(name []byte) bool {
	return bytes.EqualFold(name, []byte("post")) || bytes.EqualFold(name, []byte("host:"))
}

// isSnowflakeKey reports whether a key names Snowflake IDs.
func isSnowflakeKey(key []byte) bool { return segment.Reserved(string(key)) }

// tag checks a segment key: a valid tag name the connection's token may
// use. The answer is cached.
func (c *respConn) tag(key []byte) (*respTag, error) {
	if t, ok := c.tags[string(key)]; ok {
		return t, nil
	}
	name := string(key)
	if err := segment.ValidName(name); err != nil {
		return nil, err
	}
	if c.tok != nil {
		if err := tokenAllows(c.tok, name, false, false); err != nil {
			return nil, err
		}
	}
	t := &respTag{name: name, mk: c.s.mask.forTag(name)}
	if len(c.tags) >= respTagCache {
		clear(c.tags)
	}
	c.tags[name] = t
	return t, nil
}

// idLease answers ID.LEASE [OWNER owner].
func (c *respConn) idLease(args [][]byte) error {
	var owner string
	switch {
	case len(args) == 3 && bytes.EqualFold(args[1], []byte("owner")):
		owner = string(args[2])
	case len(args) != 1:
		return respErrorf("ERR", "syntax error: ID.LEASE [OWNER owner]")
	}
	if err := c.allowSnowflake(); err != nil {
		return err
	}
	l, err := c.s.acquireLease(c.ctx, owner)
	if err != nil {
		return err
	}
	c.writeLease(l)
	return nil
}

// idRenew answers ID.RENEW lease.
func (c *respConn) idRenew(args [][]byte) error {
	if err := c.allowSnowflake(); err != nil {
		return err
	}
	l, err := c.s.renewLease(string(args[1]))
	if err != nil {
		return err
	}
	c.writeLease(l)
	return nil
}

// idRelease answers ID.RELEASE lease.
func (c *respConn) idRelease(args [][]byte) error {
	if err := c.allowSnowflake(); err != nil {
		return err
	}
	if err := c.s.releaseLease(string(args[1])); err != nil {
		return err
	}
	c.wr.WriteString("OK")
	return nil
}

// writeLease writes a lease as a map with the JSON answer's keys (the
// layout's flattened in).
func (c *respConn) writeLease(l leaseJSON) {
	c.writeMap(14)
	c.wr.WriteBulkString("lease")
	c.wr.WriteBulkString(l.Lease)
	for _, f := range []struct {
		k string
		v int64
	}{{"datacenter", l.Datacenter}, {"worker", l.Worker}, {"time_bits", int64(l.Layout.TimeBits)},
		{"datacenter_bits", int64(l.Layout.DatacenterBits)}, {"worker_bits", int64(l.Layout.WorkerBits)},
		{"sequence_bits", int64(l.Layout.SequenceBits)}, {"time_unit_us", l.Layout.TimeUnitUs}} {
		c.wr.WriteBulkString(f.k)
		c.wr.WriteInt64(f.v)
	}
	c.wr.WriteBulkString("layout")
	c.wr.WriteBulkString(l.Layout.Name)
	for _, f := range []struct {
		k string
		v int64
	}{{"first_tick", l.FirstTick}, {"end_tick", l.EndTick}, {"now_us", l.NowUs}, {"renew_every_ms", l.RenewEveryMs}, {"ttl_ms", l.TTLMs}} {
		c.wr.WriteBulkString(f.k)
		c.wr.WriteInt64(f.v)
	}
}

// allowSnowflake checks that the connection may take Snowflake IDs.
func (c *respConn) allowSnowflake() error {
	if c.tok == nil {
		return nil
	}
	return tokenAllows(c.tok, "", true, false)
}

// maskedKey is the error of INCR on a key whose IDs are masked.
func maskedKey(key []byte) error {
	return respErrorf("ERR", "IDs of key %s are masked (text, not integers): use ID.NEXT %s", quoteArg(key), showKey(key))
}

// incr answers INCR key with one ID.
func (c *respConn) incr(args [][]byte) error {
	key := args[1]
	if isSnowflakeKey(key) {
		if err := c.allowSnowflake(); err != nil {
			return err
		}
		if c.s.mask.forSnowflake() != nil {
			return maskedKey(key)
		}
		var arr [1]snowflake.Batch
		b, err := c.s.nextSnowflake(1, arr[:0])
		if err != nil {
			return err
		}
		c.wr.WriteInt64(int64(b[0].First))
		return nil
	}
	t, err := c.tag(key)
	if err != nil {
		return err
	}
	if t.mk != nil {
		return maskedKey(key)
	}
	if t.h == nil {
		segs, err := c.s.segments()
		if err != nil {
			return err
		}
		if t.h, err = segs.Tag(c.ctx, t.name); err != nil {
			if isSeriesErr(err) {
				return respErrorf("ERR", "key %s is a series of business numbers (text, not integers): use ID.NEXT %s", quoteArg(key), showKey(key))
			}
			return err
		}
		t.issued = c.s.metrics.segmentIssued(t.name)
	}
	id, err := t.h.NextID(c.ctx)
	if err != nil {
		if errors.Is(err, segment.ErrUnknownTag) {
			t.h = nil // the tag was deleted: look it up again next time (created again, or unknown)
		}
		return err
	}
	t.issued.Inc()
	c.wr.WriteInt64(id)
	return nil
}

// incrBy answers INCRBY key 1 as INCR key: redis-py's incr(key) sends it.
// Any other increment is refused (IDs are not counters), nothing taken.
func (c *respConn) incrBy(args [][]byte) error {
	if string(args[2]) == "1" {
		return c.incr(args[:2])
	}
	return c.counterOnly(args)
}

// counterOnly answers INCRBY (but by 1), DECR and the like: IDs are not
// counters.
func (c *respConn) counterOnly(args [][]byte) error {
	return respErrorf("ERR", "%s is not supported: flakeid hands out IDs, not counters; use ID.NEXT %s <count> for several IDs",
		upper(args[0]), showKey(args[1]))
}

// upper is an ASCII command name in upper case.
func upper(b []byte) string {
	out := make([]byte, len(b))
	for i, x := range b {
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		out[i] = x
	}
	return string(out)
}

// idNext answers ID.NEXT key [count]: everything is checked before an ID
// is taken.
func (c *respConn) idNext(args [][]byte) error {
	key := args[1]
	n := int64(1)
	rest := args[2:]
	if len(rest) > 0 && !isOption(rest[0]) {
		var err error
		if n, err = wholeNumber("count", string(rest[0]), 1, int64(c.s.cfg.MaxCount)); err != nil {
			return err
		}
		rest = rest[1:]
	}
	var format, prefix string
	for len(rest) > 0 {
		if len(rest) < 2 || !isOption(rest[0]) {
			return respErrorf("ERR", "syntax error: ID.NEXT key [count] [FORMAT uuid7|typeid|ulid] [PREFIX prefix]")
		}
		if bytes.EqualFold(rest[0], []byte("format")) {
			format = string(rest[1])
		} else {
			prefix = string(rest[1])
		}
		rest = rest[2:]
	}
	var f idview.Form // FORMAT: the IDs' UUID-shaped texts
	if format != "" || prefix != "" {
		if !isSnowflakeKey(key) {
			return respErrorf("ERR", "FORMAT and PREFIX are for Snowflake IDs (ID.NEXT snowflake): segment IDs carry no time")
		}
		var err error
		if f, prefix, err = c.s.rpcFormat(format, prefix); err != nil {
			return err
		}
		if f == 0 {
			return respErrorf("ERR", "PREFIX is for FORMAT typeid")
		}
	}
	var rarr [4]run
	var runs []run
	var mk *masking
	if isSnowflakeKey(key) {
		if err := c.allowSnowflake(); err != nil {
			return err
		}
		mk = c.s.mask.forSnowflake()
		var arr [4]snowflake.Batch
		batches, err := c.s.nextSnowflake(n, arr[:0])
		if err != nil {
			return err
		}
		runs = batchRuns(rarr[:0], batches)
	} else {
		t, err := c.tag(key)
		if err != nil {
			return err
		}
		mk = t.mk
		var arr [4]segment.Span
		spans, err := c.s.nextSegment(c.ctx, t.name, n, arr[:0])
		if isSeriesErr(err) {
			return c.seriesNext(t.name, n)
		}
		if err != nil {
			return err
		}
		runs = spanRuns(rarr[:0], spans)
	}
	if mk != nil && f == 0 {
		if err := mk.check(runs); err != nil {
			return err
		}
	}
	var rng *rand.ChaCha8
	if f != 0 {
		rng = c.s.uuids.rng()
		defer c.s.uuids.putRNG(rng)
	}
	c.wr.WriteArray(int(n))
	var text [128]byte // a TypeID with the longest prefix is 90 bytes
	for i, id := range ids(runs) {
		switch {
		case f != 0:
			t, err := c.s.uuids.appendText(text[:0], id, f, prefix, mk, rng)
			if err != nil {
				return err // cannot happen: the IDs fit the layout
			}
			c.wr.WriteBulk(t)
		case mk != nil:
			t, err := mk.appendText(text[:0], id)
			if err != nil {
				return err // check said it cannot happen
			}
			c.wr.WriteBulk(t)
		default:
			c.wr.WriteInt64(id)
		}
		if i%respFlushEvery == respFlushEvery-1 {
			if c.wr.Flush() != nil {
				c.quit = true
				return nil
			}
		}
	}
	return nil
}

// isOption reports whether an argument of ID.NEXT is one of its options.
func isOption(a []byte) bool {
	return bytes.EqualFold(a, []byte("format")) || bytes.EqualFold(a, []byte("prefix"))
}

// idBounds answers ID.BOUNDS [FROM time] [TO time]: the smallest and
// largest Snowflake IDs whose time lies in the window.
func (c *respConn) idBounds(args [][]byte) error {
	var from, to string
	for rest := args[1:]; len(rest) > 0; rest = rest[2:] {
		switch {
		case len(rest) >= 2 && bytes.EqualFold(rest[0], []byte("from")):
			from = string(rest[1])
		case len(rest) >= 2 && bytes.EqualFold(rest[0], []byte("to")):
			to = string(rest[1])
		default:
			return respErrorf("ERR", "syntax error: ID.BOUNDS [FROM time] [TO time]")
		}
	}
	b, err := c.s.bounds(from, to)
	if err != nil {
		return err
	}
	pairs := 5
	if b.Note != "" {
		pairs = 6
	}
	c.writeMap(pairs)
	for _, f := range [][2]string{{"min", b.Min.String()}, {"max", b.Max.String()}, {"from", b.From}, {"to", b.To}, {"layout", b.Layout}, {"note", b.Note}}[:pairs] {
		c.wr.WriteBulkString(f[0])
		c.wr.WriteBulkString(f[1])
	}
	return nil
}

// seriesNext answers ID.NEXT of a series tag: its numbers as bulk strings.
func (c *respConn) seriesNext(tag string, n int64) error {
	nums, err := c.s.nextNumbers(c.ctx, tag, n)
	if err != nil {
		return err
	}
	c.wr.WriteArray(len(nums))
	for _, num := range nums {
		c.wr.WriteBulkString(num.Text)
	}
	return nil
}

// idDecode answers ID.DECODE id [plain|masked] with the ID's parts, and
// ID.DECODE number TAG tag with a series number's period and counter.
func (c *respConn) idDecode(args [][]byte) error {
	if len(args) == 4 || len(args) == 3 && bytes.EqualFold(args[2], []byte("tag")) {
		if len(args) != 4 || !bytes.EqualFold(args[2], []byte("tag")) {
			return respErrorf("ERR", "syntax error: ID.DECODE id [plain|masked], or ID.DECODE number TAG tag")
		}
		return c.decodeNumber(string(args[1]), string(args[3]))
	}
	as := ""
	if len(args) == 3 {
		as = string(args[2])
	}
	in, p, err := c.s.decode(string(args[1]), as, func() error {
		if c.tok == nil {
			return nil
		}
		return tokenMayUnmask(c.tok)
	})
	if err != nil {
		return err
	}
	pairs := 7
	if in.masked != "" {
		pairs += 2
	}
	if in.form != 0 {
		pairs += 2
		if in.prefix != "" {
			pairs++
		}
	}
	c.writeMap(pairs)
	c.wr.WriteBulkString("id")
	c.wr.WriteBulkString(in.id.String())
	c.wr.WriteBulkString("time")
	c.wr.WriteBulkString(p.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	for _, f := range []struct {
		k string
		v int64
	}{{"unix_ms", p.Time.UnixMilli()}, {"tick", p.Tick}, {"datacenter", p.Datacenter}, {"worker", p.Worker}, {"sequence", p.Sequence}} {
		c.wr.WriteBulkString(f.k)
		c.wr.WriteInt64(f.v)
	}
	if in.masked != "" {
		c.wr.WriteBulkString("masked")
		c.wr.WriteBulkString(in.masked)
		c.wr.WriteBulkString("key_id")
		c.wr.WriteInt64(int64(in.keyID))
	}
	if in.form != 0 {
		c.wr.WriteBulkString("form")
		c.wr.WriteBulkString(in.form.String())
		c.wr.WriteBulkString("uuid")
		c.wr.WriteBulkString(in.uuid.String())
		if in.prefix != "" {
			c.wr.WriteBulkString("prefix")
			c.wr.WriteBulkString(in.prefix)
		}
	}
	return nil
}

// decodeNumber answers ID.DECODE number TAG tag.
func (c *respConn) decodeNumber(number, tag string) error {
	t, err := c.tag([]byte(tag))
	if err != nil {
		return err
	}
	d, err := c.s.decodeNumber(c.ctx, t.name, number, func() error {
		if c.tok == nil {
			return nil
		}
		return tokenMayUnmask(c.tok)
	})
	if err != nil {
		return err
	}
	c.writeMap(10)
	for _, f := range [][2]string{{"tag", d.Tag}, {"number", d.Number}, {"numeric", d.Numeric}, {"period", d.Period},
		{"label", d.Label}, {"period_start", d.PeriodStart}, {"period_end", d.PeriodEnd}} {
		c.wr.WriteBulkString(f[0])
		c.wr.WriteBulkString(f[1])
	}
	c.wr.WriteBulkString("counter")
	c.wr.WriteInt64(d.Counter)
	c.wr.WriteBulkString("seq")
	c.wr.WriteInt64(d.Seq)
	c.wr.WriteBulkString("masked")
	c.wr.WriteInt64(map[bool]int64{false: 0, true: 1}[d.Masked])
	return nil
}

// writeMap starts a map of n pairs: a RESP3 map, or a RESP2 array of 2n.
func (c *respConn) writeMap(n int) {
	if c.proto == 3 {
		c.wr.WriteRaw(strconv.AppendInt([]byte{'%'}, int64(n), 10))
		c.wr.WriteRaw([]byte("\r\n"))
		return
	}
	c.wr.WriteArray(2 * n)
}

// writeNull writes the null of the connection's protocol.
func (c *respConn) writeNull() {
	if c.proto == 3 {
		c.wr.WriteRaw([]byte("_\r\n"))
		return
	}
	c.wr.WriteNull()
}

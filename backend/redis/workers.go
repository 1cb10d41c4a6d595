package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flakeid/flakeid/backend/internal/coord"
	"github.com/flakeid/flakeid/worker"
	"github.com/flakeid/flakeid/worker/protocol"
)

// DefaultPrefix is the key prefix when NewWorkers is given none.
const DefaultPrefix = "flakeid:workers"

// DefaultRegistry is the datacenter registry's key: one per Redis database,
// shared by every prefix in it.
const DefaultRegistry = "flakeid:datacenters"

// The fields of a datacenter's hash that are no worker id, and the
// registry's field that is no datacenter id.
const (
	nsField    = "ns"
	revField   = "rev"
	spaceField = "space"
)

// readScript reads datacenter KEYS[1] and its registry fields (KEYS[2],
// ARGV[1]) at one instant: {TIME's seconds, microseconds, HGETALL, the
// space, the claim}, the last two "" when absent and "=" + the value else.
const readScript = `
local t = redis.call('TIME')
local function seen(v) if v then return '=' .. v end return '' end
return {t[1], t[2], redis.call('HGETALL', KEYS[1]),
  seen(redis.call('HGET', KEYS[2], '` + spaceField + `')), seen(redis.call('HGET', KEYS[2], ARGV[1]))}
`

// commitScript commits to datacenter KEYS[1] and the registry KEYS[2]:
// ARGV the datacenter's registry field, the "rev" read, this commit's rev,
// the space and claim read (as readScript gives them), the space to write
// ("" none), the claim to write ("" none, "-" delete, "=" + the namespace),
// then field, value pairs of the hash. It replies 'ok' having written them,
// 'ok' without writing when the hash's rev is this commit's already (a
// retry of a commit whose reply was lost), and 'changed' without writing
// when what was read changed since.
const commitScript = `
local key, reg, dc = KEYS[1], KEYS[2], ARGV[1]
local function seen(v) if v then return '=' .. v end return '' end
local rev = redis.call('HGET', key, '` + revField + `')
if rev == ARGV[3] then return 'ok' end
if seen(rev) ~= ARGV[2] or seen(redis.call('HGET', reg, '` + spaceField + `')) ~= ARGV[4] or
   seen(redis.call('HGET', reg, dc)) ~= ARGV[5] then
  return 'changed'
end
if ARGV[6] ~= '' then redis.call('HSET', reg, '` + spaceField + `', ARGV[6]) end
if ARGV[7] == '-' then redis.call('HDEL', reg, dc)
elseif ARGV[7] ~= '' then redis.call('HSET', reg, dc, string.sub(ARGV[7], 2)) end
for i = 8, #ARGV, 2 do redis.call('HSET', key, ARGV[i], ARGV[i + 1]) end
redis.call('HSET', key, '` + revField + `', ARGV[3])
return 'ok'
`

// Workers is a worker.Coordinator, worker.MarkLowerer and worker.Registry
// over Redis: protocol.Driver over one hash per datacenter. It is safe for
// concurrent use.
type Workers struct {
	*protocol.Driver
	client   goredis.UniversalClient
	prefix   string
	registry string
	read     *goredis.Script
	commit   *goredis.Script
	owned    bool // Close closes the client: OpenWorkers made it
}

// NewWorkers returns a coordinator that keeps its slots and namespace
// records in client under keys "<prefix>:<datacenter>" and claims its
// datacenter ids in the registry DefaultRegistry, which every prefix of the
// database shares; an empty prefix means DefaultPrefix. Coordinators that
// share a prefix (and a database) share worker ids. Its Close leaves the
// client open: closing it stays the caller's job.
func NewWorkers(client goredis.UniversalClient, prefix string) *Workers {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	w := &Workers{client: client, prefix: prefix, registry: DefaultRegistry,
		read: goredis.NewScript(readScript), commit: goredis.NewScript(commitScript)}
	w.Driver = protocol.New(store{w})
	return w
}

// OpenWorkers opens the coordinator a redis:// or rediss:// (TLS) URL names:
//
//	redis://[[user]:password@]host:port[/db][?prefix=P&…]
//
// prefix= is the key prefix (DefaultPrefix when empty); registry= is
// refused, saying why (the registry is DefaultRegistry, one per database).
// prefix= is taken out of the URL, and the rest goes to go-redis's ParseURL: the
// database number in the path and go-redis's own options in the query (an
// unknown one is an error), with ContextTimeoutEnabled set so that each
// call ends with its context. It does not contact Redis: the client
// connects on first use, and a Redis that does not answer is reported then,
// as worker.ErrUnavailable. The *Workers owns the client it made: Close
// closes it.
func OpenWorkers(ctx context.Context, u *url.URL) (*Workers, error) {
	if s := strings.ToLower(u.Scheme); s != "redis" && s != "rediss" {
		return nil, coord.InvalidURL(fmt.Errorf("scheme %q, want redis or rediss", u.Scheme))
	}
	if err := coord.RefuseRegistry(u, "the hash "+DefaultRegistry); err != nil {
		return nil, err
	}
	// go-redis refuses an option it does not know, but cannot tell what a
	// misspelling of ours meant.
	if err := coord.CheckTypos(u, "prefix"); err != nil {
		return nil, err
	}
	taken, rest := coord.TakeQuery(u, "prefix")
	copts, err := goredis.ParseURL(rest.String())
	if err != nil {
		return nil, coord.InvalidURL(err)
	}
	copts.ContextTimeoutEnabled = true
	w := NewWorkers(goredis.NewClient(copts), taken[0])
	w.owned = true
	return w, nil
}

// Close closes the Redis client if OpenWorkers made it; a Workers from
// NewWorkers leaves its client open.
func (w *Workers) Close() error {
	if w.owned {
		return w.client.Close()
	}
	return nil
}

// Prefix is the key prefix: the namespace.
func (w *Workers) Prefix() string { return w.prefix }

// Registry is the key of the datacenter registry.
func (w *Workers) Registry() string { return w.registry }

// Key is the hash that holds the slots and the namespace record of a
// datacenter.
func (w *Workers) Key(datacenter int64) string {
	return w.prefix + ":" + strconv.FormatInt(datacenter, 10)
}

// store is w as a protocol.Store; Workers does not implement it itself, so
// that its exported methods are the coordinator's.
type store struct{ w *Workers }

// version is what a commit compares: the hash's rev, the registry's space
// and claim, as readScript gives them.
type version struct{ rev, space, claim string }

func (s store) Names() protocol.Names {
	return protocol.Names{Registry: "the registry " + s.w.registry, Namespace: s.w.prefix,
		Place: "the prefix " + s.w.prefix, Store: "Redis"}
}

// Read implements protocol.Store: one script reads the clock, the hash and
// the registry's fields.
func (s store) Read(ctx context.Context, dc int64) (protocol.State, error) {
	key := s.w.Key(dc)
	res, err := s.w.read.Run(ctx, s.w.client, []string{key, s.w.registry}, strconv.FormatInt(dc, 10)).Result()
	if err != nil {
		return protocol.State{}, s.w.failed(ctx, err, "reading %s and the registry %s", key, s.w.registry)
	}
	vals, _ := res.([]any)
	if len(vals) != 5 {
		return protocol.State{}, unexpected(key, res)
	}
	secs, err1 := strconv.ParseInt(fmt.Sprint(vals[0]), 10, 64)
	us, err2 := strconv.ParseInt(fmt.Sprint(vals[1]), 10, 64)
	flat, ok1 := vals[2].([]any)
	space, ok2 := vals[3].(string)
	claim, ok3 := vals[4].(string)
	if err1 != nil || err2 != nil || !ok1 || !ok2 || !ok3 || len(flat)%2 != 0 {
		return protocol.State{}, unexpected(key, res)
	}
	st := protocol.State{Datacenter: dc, Now: time.Unix(secs, us*1000).UTC(), Slots: map[int64]protocol.Slot{}}
	st.Space, st.HasSpace = strings.CutPrefix(space, "=")
	st.Claim.Namespace, _ = strings.CutPrefix(claim, "=")
	v := version{space: space, claim: claim}
	for i := 0; i < len(flat); i += 2 {
		field, _ := flat[i].(string)
		val, _ := flat[i+1].(string)
		switch field {
		case revField:
			v.rev = "=" + val
		case nsField:
			rec, err := parseRecord(val)
			if err != nil {
				return st, fmt.Errorf("%w: redis: %s: %w", worker.ErrUnavailable, key, err)
			}
			st.Record = &rec
		default:
			id, slot, err := parseSlot(field, val)
			if err != nil {
				return st, fmt.Errorf("%w: redis: %s: %w", worker.ErrUnavailable, key, err)
			}
			st.Slots[id] = slot
		}
	}
	st.Version = v
	return st, nil
}

// Commit implements protocol.Store: one script writes the registry's
// fields and the hash's fields that differ, if what was read is unchanged.
func (s store) Commit(ctx context.Context, read, next protocol.State) error {
	key, v := s.w.Key(read.Datacenter), read.Version.(version)
	args := []any{strconv.FormatInt(read.Datacenter, 10), v.rev, protocol.NewIncarnation(), v.space, v.claim, "", ""}
	if next.HasSpace && !read.HasSpace {
		args[5] = next.Space
	}
	if next.Claim != read.Claim {
		args[6] = "-"
		if next.Claim.Namespace != "" {
			args[6] = "=" + next.Claim.Namespace
		}
	}
	if next.Record != nil && (read.Record == nil || *next.Record != *read.Record) {
		r := next.Record
		args = append(args, nsField, fmt.Sprintf("%d|%d|%s|%s", r.InitialisedMs, r.FloorMs, r.Incarnation, r.Contract))
	}
	for id, sl := range next.Slots {
		if old, ok := read.Slots[id]; !ok || old != sl {
			args = append(args, strconv.FormatInt(id, 10), fmt.Sprintf("%d|%d|0|%s", sl.ExpiresMs, sl.HighMs, sl.Holder))
		}
	}
	res, err := s.w.commit.Run(ctx, s.w.client, []string{key, s.w.registry}, args...).Result()
	switch {
	case err != nil:
		return s.w.failed(ctx, err, "writing %s and the registry %s", key, s.w.registry)
	case res == "changed":
		return protocol.ErrConflict
	case res != "ok":
		return unexpected(key, res)
	}
	return nil
}

// Claims implements protocol.ClaimsReader: the registry hash, read whole.
func (s store) Claims(ctx context.Context) (worker.Claims, error) {
	m, err := s.w.client.HGetAll(ctx, s.w.registry).Result()
	if err != nil {
		return worker.Claims{}, s.w.failed(ctx, err, "reading the registry %s", s.w.registry)
	}
	var c worker.Claims
	for field, v := range m {
		if field == spaceField {
			c.Space, c.HasSpace = v, true
			continue
		}
		dc, ok := coord.ParseID(field)
		if !ok {
			return worker.Claims{}, fmt.Errorf("%w: redis: the registry %s has the field %q, which is no datacenter id", worker.ErrUnavailable, s.w.registry, clip(field))
		}
		c.Datacenters = append(c.Datacenters, worker.DatacenterClaim{Datacenter: dc, Namespace: v})
	}
	slices.SortFunc(c.Datacenters, func(a, b worker.DatacenterClaim) int { return cmp.Compare(a.Datacenter, b.Datacenter) })
	return c, nil
}

// parseSlot decodes one worker-id field of a datacenter's hash.
func parseSlot(field, v string) (int64, protocol.Slot, error) {
	bad := func(what string) error {
		return fmt.Errorf("corrupt field %q = %q: %s", clip(field), clip(v), what)
	}
	id, ok := coord.ParseID(field)
	if !ok {
		return 0, protocol.Slot{}, bad("the field is not a worker id")
	}
	parts := strings.SplitN(v, "|", 4)
	if len(parts) != 4 {
		return 0, protocol.Slot{}, bad("want <expires_ms>|<high_water_ms>|<previous_ms>|<holder>")
	}
	var nums [3]int64
	for i, p := range parts[:3] {
		if nums[i], ok = digits(p); !ok {
			return 0, protocol.Slot{}, bad(fmt.Sprintf("%q is not a millisecond count", clip(p)))
		}
	}
	return id, protocol.Slot{ExpiresMs: nums[0], HighMs: nums[1], Holder: parts[3]}, nil
}

// parseRecord decodes the namespace record field.
func parseRecord(v string) (protocol.Record, error) {
	bad := func(what string) error {
		return fmt.Errorf("corrupt field %q = %q: %s", nsField, clip(v), what)
	}
	parts := strings.SplitN(v, "|", 4)
	if len(parts) != 4 || parts[2] == "" {
		return protocol.Record{}, bad("want <initialised_ms>|<floor_ms>|<incarnation>|<contract>")
	}
	init, ok1 := digits(parts[0])
	floor, ok2 := digits(parts[1])
	if !ok1 || !ok2 {
		return protocol.Record{}, bad("want millisecond counts before the incarnation")
	}
	return protocol.Record{InitialisedMs: init, FloorMs: floor, Incarnation: parts[2], Contract: parts[3]}, nil
}

// digits parses 1–18 decimal digits.
func digits(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 18 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// failed wraps an error of Redis or of the connection in ErrUnavailable.
func (w *Workers) failed(ctx context.Context, err error, format string, args ...any) error {
	var rerr goredis.Error
	if errors.As(err, &rerr) {
		format += ": Redis replied with an error"
	}
	return coord.Unavailable(ctx, err, "redis: "+format, args...)
}

func unexpected(key string, res any) error {
	return fmt.Errorf("%w: redis: a script on %s replied %#v, not what this version of flakeid expects",
		worker.ErrUnavailable, key, res)
}

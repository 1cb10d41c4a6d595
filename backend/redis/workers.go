// Package redis is the worker-id coordinator over Redis: Workers implements
// worker.Coordinator with one hash per datacenter and Lua scripts.
//
// # Data model
//
// Datacenter dc is the hash "<prefix>:<dc>" (prefix DefaultPrefix unless
// given). Its field per ever-used worker id is the id in decimal, and its
// value is
//
//	<expires_ms>|<high_water_ms>|<previous_ms>|<holder>
//
// in milliseconds since the Unix epoch by Redis's clock: when the lease
// lapses (0 when free), the high-water mark, the mark that was stored when the
// current holder acquired the id (what Claim.Previous reports, kept so that a
// retried Acquire can answer the same), and the holder's owner token (empty
// when free). The holder comes last so that an owner token may contain any
// byte. A slot is held when its holder is non-empty and its expiry is later
// than Redis's clock. Expiry is never left to key TTLs: a lapsed lease keeps
// its field, and so its high-water mark, forever.
//
// # Atomicity and time
//
// Every state change is one Lua script (EVALSHA, falling back to EVAL when
// Redis lost its script cache), so each is atomic on the server, and reads
// the time with redis.call('TIME') inside the script: only Redis's clock
// decides expiry. Redis 7 replicates the effects of scripts, not the scripts,
// so reading TIME before writing is safe on replicas and AOF (the scripts
// also ask for effects replication on the older servers that need it). Each script
// touches one key, so a Redis Cluster works too.
//
//   - Acquire reads the whole hash (HGETALL), counts the held ids in
//     [0, Workers), and takes a free one: among free ids (never used,
//     released or lapsed) the lowest whose high-water mark has passed, else
//     the one with the smallest mark. It stores holder, expiry = now+TTL and
//     high = max(high, reserve), and returns the id and the mark stored
//     before. When every id is held it replies with an error that Acquire
//     turns into worker.ErrExhausted naming how many are held. An Acquire
//     is idempotent for its owner token: if the owner already holds a live
//     id (a client retried the script after losing its reply), that id is
//     extended and returned with the same Previous, instead of a second id
//     being taken.
//   - Renew and Release are a compare-and-set on the owner token: they
//     succeed only while the field's holder is this owner and its expiry is
//     later than now, and otherwise reply with the holder and its expiry,
//     which become worker.ErrNotHeld. Both raise the high-water mark (to the
//     maximum of stored and given); Renew sets the expiry to now+TTL, Release
//     clears holder and expiry.
//
// # Errors
//
// Connection failures, timeouts, and failures of Redis itself (script
// errors, a key of the wrong type, a corrupt field) wrap
// worker.ErrUnavailable and say what failed.
//
// # Clients
//
// Workers takes any go-redis UniversalClient (a *redis.Client, a cluster or
// failover client). Leases renew under a context deadline; create the client
// with Options.ContextTimeoutEnabled so that go-redis honours it, or its
// ReadTimeout bounds each renewal instead. go-redis retries a command whose
// connection failed; Acquire and Renew are idempotent, and a retried Release
// reports ErrNotHeld, which a lease ignores.
package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flakeid/flakeid/worker"
)

// DefaultPrefix is the key prefix when NewWorkers is given none.
const DefaultPrefix = "flakeid:workers"

// maxMs bounds every millisecond value the scripts handle: below 2^53, so
// Lua's doubles hold them exactly (10^15 ms is the year 33658).
const maxMs = 999_999_999_999_999

// The scripts' error replies start with these codes.
const (
	codeExhausted = "FLAKEID_EXHAUSTED"
	codeNotHeld   = "FLAKEID_NOTHELD"
	codeCorrupt   = "FLAKEID_CORRUPT"
)

// luaCommon parses slot values and reads the clock; it prefixes every script.
const luaCommon = `
-- Replicate effects, not the script: it reads TIME before writing. Always so
-- since Redis 7 (where this call is a no-op); needed by Redis 3.2–4.
if redis.replicate_commands then redis.replicate_commands() end
local function fmt(n) return string.format('%.0f', n) end
local function clean(s)
  s = string.gsub(s, '%c', '?')
  if #s > 80 then s = string.sub(s, 1, 80) .. '...' end
  return s
end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- parse returns expires, high, prev, holder of a slot value, or nil.
local function parse(v)
  local e, h, p, holder = string.match(v, '^(%d+)|(%d+)|(%d+)|(.*)$')
  if not e or #e > 15 or #h > 15 or #p > 15 then return nil end
  return tonumber(e), tonumber(h), tonumber(p), holder
end
local function corrupt(key, field, v)
  return redis.error_reply('` + codeCorrupt + ` field ' .. clean(field) .. ' of ' .. clean(key) ..
    ' is not <expires_ms>|<high_water_ms>|<previous_ms>|<holder>: ' .. clean(v))
end
`

// acquireScript: KEYS[1] the datacenter's hash; ARGV workers, owner, ttl_ms,
// reserve_ms. Replies {worker id, previous high-water ms}.
const acquireScript = luaCommon + `
local key = KEYS[1]
local workers = tonumber(ARGV[1])
local owner = ARGV[2]
local ttl = tonumber(ARGV[3])
local reserve = tonumber(ARGV[4])
local now = now_ms()
local flat = redis.call('HGETALL', key)
local seen = {}
local held = 0
local best, best_high = -1, 0
local function consider(id, high)
  local better
  if best < 0 then
    better = true
  else
    local passed, best_passed = high <= now, best_high <= now
    if passed ~= best_passed then
      better = passed
    elseif passed then
      better = id < best
    elseif high ~= best_high then
      better = high < best_high
    else
      better = id < best
    end
  end
  if better then best, best_high = id, high end
end
for i = 1, #flat, 2 do
  local field, v = flat[i], flat[i + 1]
  if not (field == '0' or (string.match(field, '^[1-9]%d*$') and #field <= 15)) then
    return corrupt(key, field, v)
  end
  local e, h, p, holder = parse(v)
  if not e then return corrupt(key, field, v) end
  local id = tonumber(field)
  if id < workers then
    seen[id] = true
    if holder ~= '' and e > now then
      if holder == owner then
        -- This owner's Acquire already ran (a retry): extend and answer the same.
        redis.call('HSET', key, field, fmt(now + ttl) .. '|' .. fmt(math.max(h, reserve)) .. '|' .. fmt(p) .. '|' .. owner)
        return {id, p}
      end
      held = held + 1
    else
      consider(id, h)
    end
  end
end
local never = 0
while seen[never] do never = never + 1 end
if never < workers then consider(never, 0) end
if best < 0 then
  return redis.error_reply('` + codeExhausted + ` ' .. held)
end
local field = fmt(best)
redis.call('HSET', key, field, fmt(now + ttl) .. '|' .. fmt(math.max(best_high, reserve)) .. '|' .. fmt(best_high) .. '|' .. owner)
return {best, best_high}
`

// changeScript is the head of Renew and Release: KEYS[1] the hash; ARGV
// field, owner, ttl_ms, reserve_ms. It leaves e, h, p, now set when the owner
// holds the field, and replies with an error otherwise.
const changeScript = luaCommon + `
local key, field, owner = KEYS[1], ARGV[1], ARGV[2]
local ttl, reserve = tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_ms()
local v = redis.call('HGET', key, field)
if not v then return redis.error_reply('` + codeNotHeld + ` 0 ') end
local e, h, p, holder = parse(v)
if not e then return corrupt(key, field, v) end
if holder ~= owner or e <= now then
  return redis.error_reply('` + codeNotHeld + ` ' .. fmt(e) .. ' ' .. clean(holder))
end
local high = math.max(h, reserve)
`

// renewScript replies with the new expiry.
const renewScript = changeScript + `
redis.call('HSET', key, field, fmt(now + ttl) .. '|' .. fmt(high) .. '|' .. fmt(p) .. '|' .. owner)
return now + ttl
`

// releaseScript replies with the high-water mark stored.
const releaseScript = changeScript + `
redis.call('HSET', key, field, '0|' .. fmt(high) .. '|0|')
return high
`

// Workers is a worker.Coordinator over Redis. It is safe for concurrent use.
type Workers struct {
	client  goredis.UniversalClient
	prefix  string
	acquire *goredis.Script
	renew   *goredis.Script
	release *goredis.Script
}

var _ worker.Coordinator = (*Workers)(nil)

// NewWorkers returns a coordinator that keeps its slots in client under keys
// "<prefix>:<datacenter>"; an empty prefix means DefaultPrefix. Coordinators
// that share a prefix (and a server) share worker ids.
func NewWorkers(client goredis.UniversalClient, prefix string) *Workers {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Workers{
		client:  client,
		prefix:  prefix,
		acquire: goredis.NewScript(acquireScript),
		renew:   goredis.NewScript(renewScript),
		release: goredis.NewScript(releaseScript),
	}
}

// Prefix is the key prefix.
func (w *Workers) Prefix() string { return w.prefix }

// Key is the hash that holds the slots of a datacenter.
func (w *Workers) Key(datacenter int64) string {
	return w.prefix + ":" + strconv.FormatInt(datacenter, 10)
}

// ceilMs is t in whole milliseconds, rounded up: a mark stored lower than
// asked could let the next holder reuse a tick.
func ceilMs(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Sub(time.UnixMilli(ms)) > 0 {
		ms++
	}
	return ms
}

// durationMs is d in whole milliseconds, rounded up.
func durationMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func checkReserve(reserve time.Time) (int64, error) {
	ms := ceilMs(reserve)
	if ms > maxMs {
		return 0, fmt.Errorf("%w: reservation %v is beyond what the Redis coordinator stores (%v)",
			worker.ErrInvalidConfig, reserve, msTime(maxMs))
	}
	return max(ms, 0), nil
}

// Acquire implements worker.Coordinator.
func (w *Workers) Acquire(ctx context.Context, req worker.Request) (worker.Claim, error) {
	switch {
	case req.Datacenter < 0 || req.Workers < 1 || req.Owner == "":
		return nil, fmt.Errorf("%w: bad request: datacenter %d, workers %d, owner %q", worker.ErrInvalidConfig,
			req.Datacenter, req.Workers, req.Owner)
	case req.TTL <= 0 || durationMs(req.TTL) > maxMs/2:
		return nil, fmt.Errorf("%w: bad request: TTL %v", worker.ErrInvalidConfig, req.TTL)
	}
	reserve, err := checkReserve(req.Reserve)
	if err != nil {
		return nil, err
	}
	key := w.Key(req.Datacenter)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: redis: acquiring a worker id in %s: %w", worker.ErrUnavailable, key, err)
	}
	res, err := w.acquire.Run(ctx, w.client, []string{key},
		req.Workers, req.Owner, durationMs(req.TTL), reserve).Result()
	if err != nil {
		if rest, ok := replyCode(err, codeExhausted); ok {
			return nil, fmt.Errorf("%w: all %s worker ids of datacenter %d are held (%s)", worker.ErrExhausted,
				rest, req.Datacenter, key)
		}
		return nil, w.failed("acquiring a worker id in "+key, err)
	}
	vals, ok := res.([]any)
	if !ok || len(vals) != 2 {
		return nil, unexpected("acquire", key, res)
	}
	id, ok1 := vals[0].(int64)
	prev, ok2 := vals[1].(int64)
	if !ok1 || !ok2 || id < 0 || id >= req.Workers || prev < 0 {
		return nil, unexpected("acquire", key, res)
	}
	return &claim{w: w, key: key, dc: req.Datacenter, id: id, owner: req.Owner, prev: msTime(prev)}, nil
}

// List implements worker.Coordinator.
func (w *Workers) List(ctx context.Context, datacenter int64) ([]worker.Info, error) {
	if datacenter < 0 {
		return nil, fmt.Errorf("%w: datacenter %d", worker.ErrInvalidConfig, datacenter)
	}
	key := w.Key(datacenter)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: redis: listing %s: %w", worker.ErrUnavailable, key, err)
	}
	m, err := w.client.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, w.failed("listing "+key, err)
	}
	infos := make([]worker.Info, 0, len(m))
	for field, v := range m {
		id, s, err := parseSlot(field, v)
		if err != nil {
			return nil, fmt.Errorf("%w: redis: %s: %w", worker.ErrUnavailable, key, err)
		}
		in := worker.Info{Datacenter: datacenter, Worker: id, HighWater: msTime(s.high)}
		if s.holder != "" {
			in.Holder, in.Expires = s.holder, msTime(s.expires)
		}
		infos = append(infos, in)
	}
	slices.SortFunc(infos, func(a, b worker.Info) int { return cmp.Compare(a.Worker, b.Worker) })
	return infos, nil
}

// slotValue is a decoded field value.
type slotValue struct {
	expires, high, prev int64
	holder              string
}

// parseSlot decodes one field of a datacenter's hash, as the scripts do.
func parseSlot(field, v string) (int64, slotValue, error) {
	bad := func(what string) error {
		return fmt.Errorf("corrupt field %q = %q: %s", field, clip(v), what)
	}
	id, ok := digits(field)
	if !ok || strconv.FormatInt(id, 10) != field {
		return 0, slotValue{}, bad("the field is not a worker id")
	}
	parts := strings.SplitN(v, "|", 4)
	if len(parts) != 4 {
		return 0, slotValue{}, bad("want <expires_ms>|<high_water_ms>|<previous_ms>|<holder>")
	}
	var nums [3]int64
	for i, p := range parts[:3] {
		n, ok := digits(p)
		if !ok {
			return 0, slotValue{}, bad(fmt.Sprintf("%q is not a millisecond count", p))
		}
		nums[i] = n
	}
	return id, slotValue{expires: nums[0], high: nums[1], prev: nums[2], holder: parts[3]}, nil
}

// digits parses 1–15 decimal digits, as the scripts' patterns accept.
func digits(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 15 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// replyCode reports whether err is an error reply of the scripts with the
// given code, and the rest of its message.
func replyCode(err error, code string) (string, bool) {
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		return "", false
	}
	msg := strings.TrimPrefix(rerr.Error(), "ERR ") // Redis adds it to a reply with no code
	if msg == code {
		return "", true
	}
	rest, ok := strings.CutPrefix(msg, code+" ")
	return rest, ok
}

// failed wraps an error of Redis or of the connection in ErrUnavailable.
func (w *Workers) failed(what string, err error) error {
	if rest, ok := replyCode(err, codeCorrupt); ok {
		return fmt.Errorf("%w: redis: %s: corrupt state: %s", worker.ErrUnavailable, what, rest)
	}
	var rerr goredis.Error
	if errors.As(err, &rerr) {
		return fmt.Errorf("%w: redis: %s: Redis replied with an error: %w", worker.ErrUnavailable, what, err)
	}
	return fmt.Errorf("%w: redis: %s: %w", worker.ErrUnavailable, what, err)
}

func unexpected(script, key string, res any) error {
	return fmt.Errorf("%w: redis: the %s script on %s replied %#v, not what this version of flakeid expects",
		worker.ErrUnavailable, script, key, res)
}

type claim struct {
	w      *Workers
	key    string
	dc, id int64
	owner  string
	prev   time.Time
}

func (c *claim) WorkerID() int64     { return c.id }
func (c *claim) Previous() time.Time { return c.prev }

// Renew implements worker.Claim.
func (c *claim) Renew(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	if ttl <= 0 || durationMs(ttl) > maxMs/2 {
		return fmt.Errorf("%w: TTL %v", worker.ErrInvalidConfig, ttl)
	}
	return c.change(ctx, "renewing", c.w.renew, durationMs(ttl), reserve)
}

// Release implements worker.Claim.
func (c *claim) Release(ctx context.Context, reserve time.Time) error {
	return c.change(ctx, "releasing", c.w.release, 0, reserve)
}

func (c *claim) change(ctx context.Context, verb string, s *goredis.Script, ttlMs int64, reserve time.Time) error {
	r, err := checkReserve(reserve)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("%s worker %d in %s", verb, c.id, c.key)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: redis: %s: %w", worker.ErrUnavailable, what, err)
	}
	res, err := s.Run(ctx, c.w.client, []string{c.key}, strconv.FormatInt(c.id, 10), c.owner, ttlMs, r).Result()
	if err != nil {
		if rest, ok := replyCode(err, codeNotHeld); ok {
			return c.notHeld(rest)
		}
		return c.w.failed(what, err)
	}
	if _, ok := res.(int64); !ok {
		return unexpected(verb, c.key, res)
	}
	return nil
}

// notHeld turns the reply "<expires_ms> <holder>" into ErrNotHeld.
func (c *claim) notHeld(rest string) error {
	exp, holder, _ := strings.Cut(rest, " ")
	expMs, _ := strconv.ParseInt(exp, 10, 64)
	switch {
	case holder == "":
		return fmt.Errorf("%w: worker %d of datacenter %d is held by nobody (%s)", worker.ErrNotHeld, c.id, c.dc, c.key)
	case holder == c.owner:
		return fmt.Errorf("%w: the lease of %q on worker %d of datacenter %d expired at %s (%s)", worker.ErrNotHeld,
			holder, c.id, c.dc, msTime(expMs).Format(time.RFC3339Nano), c.key)
	default:
		return fmt.Errorf("%w: worker %d of datacenter %d is held by %q, its lease running until %s (%s)", worker.ErrNotHeld,
			c.id, c.dc, holder, msTime(expMs).Format(time.RFC3339Nano), c.key)
	}
}

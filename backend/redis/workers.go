// Package redis is the worker-id coordinator over Redis: Workers implements
// worker.Coordinator with one hash per datacenter and Lua scripts.
//
// # Data model
//
// The namespace of a Workers is its key prefix (DefaultPrefix unless given).
// Datacenter dc is the hash "<prefix>:<dc>". Its field per ever-used worker id
// is the id in decimal, and its value is
//
//	<expires_ms>|<high_water_ms>|<previous_ms>|<holder>
//
// in milliseconds since the Unix epoch by Redis's clock: when the lease
// lapses (0 when free), the high-water mark, the mark that was stored when the
// current holder acquired the id (kept so that a retried Acquire can answer
// the same; a slot freed by Release keeps there the end of the released
// lease instead, so that a retried Release is not taken for a rollback), and
// the holder's owner token (empty when free). The holder comes
// last so that an owner token may contain any byte. A slot is held when its
// holder is non-empty and its expiry is later than Redis's clock. Expiry is
// never left to key TTLs: a lapsed lease keeps its field, and so its
// high-water mark, forever.
//
// The same hash holds the datacenter's namespace record (worker.Namespace)
// in the field "ns":
//
//	<initialised_ms>|<floor_ms>|<incarnation>|<contract>
//
// when it was (re)initialised by Redis's clock, its floor (initialised plus
// the quarantine of the request that initialised it), its incarnation (16
// random hex digits, made by the client) and the ID-space contract, last so
// that it may contain any byte. Record and slots live in one key, so that
// whatever loses or restores one loses or restores the other, and every
// script touches one key. Claim.Previous is the slot's stored mark raised to
// the floor.
//
// # Datacenter registry
//
// A hash outside every namespace, always DefaultRegistry
// ("flakeid:datacenters": one per Redis database, shared by every prefix in
// it, so that no two clusters on it can hold the same datacenter and worker
// id or use two layouts), holds the field "space", the ID space
// (worker.Request.Space: the layout) every namespace and datacenter on the
// registry shares, and maps each datacenter id to the prefix that claimed
// it. Acquire reads the space, the claim and the namespace record in one
// pipeline, decides by worker.Admit (refusing another layout, a datacenter
// of another prefix, another contract: worker.ErrContract, nothing
// written), and its script checks that the three are still what it read
// before it writes anything — the missing ones among them with the slot —
// or replies "changed", and Acquire reads and decides again. The script
// touches the namespace's key and the registry's, so on a Redis Cluster
// both must hash to one slot: give the prefix the registry's name as its
// hash tag (prefix={flakeid:datacenters}:workers). flakeid never deletes a registry field;
// delete it by hand to move a datacenter id to another prefix, or to change
// the layout of a registry whose every ID is behind you. Renewals never
// read the registry.
//
// # Reset: lost or rolled-back state
//
// Redis loses state when it restarts without persistence (no RDB/AOF, or
// SHUTDOWN NOSAVE), on FLUSHALL/FLUSHDB or a DEL of the keys, when it evicts
// keys under maxmemory with an allkeys-* policy (volatile-* policies never
// evict these keys: they have no TTL), and it goes back to an older state
// when it fails over to a replica that had not received the last writes
// (replication is asynchronous) or is restored from an older RDB/AOF file.
// Every Renew and Release checks, in its script and before the usual holder
// check, what its claim remembers — the incarnation and initialisation time
// it acquired under and the highest mark it stored — against the hash:
//
//   - the record is gone (restart without data, flush, DEL, eviction, a
//     replica or backup from before the datacenter was first used): the
//     script re-initialises the record (new incarnation, the claim's
//     contract, floor = now + the claim's quarantine) and the call fails
//     with worker.ErrReset;
//   - the record was initialised before the claim's incarnation was (a
//     replica or backup from before a later reset), or it is the claim's
//     incarnation but the claim's slot is gone or its mark is below one the
//     claim stored (a lagging replica, an older backup): the same, keeping
//     the record's contract and never lowering its floor;
//   - it is the claim's incarnation, but the slot is no longer the claim's
//     live lease (held by another owner, free, or lapsed) while Redis's clock
//     is still before the end E of the lease Redis last granted it (now + TTL
//     of its last successful Acquire or Renew, which the claim passes to the
//     script): in a consistent timeline the slot cannot be anybody else's
//     before E, so Redis went back to a copy in which the lease had lapsed
//     and a newcomer may have taken it from that copy's older mark. The
//     same re-initialisation; the newcomer's next renewal then fails with
//     worker.ErrReset too. A call after E is the ordinary expiry
//     (worker.ErrNotHeld), and so is one after the claim's own successful
//     Release;
//   - the record has another incarnation initialised no earlier than the
//     claim's: somebody already re-initialised it after a loss; the call
//     fails with worker.ErrReset and changes nothing.
//
// Slots are never touched by a reset: their marks still count. An Acquire
// that finds no record (a loss, evicted or deleted keys, or a hash written
// by an older flakeid) initialises it and keeps the slots. An Acquire cannot
// tell a rolled-back hash from a current one: a worker id released after the
// copy was made, or held by a live holder whose lease had lapsed in the
// copy, is handed out from its older, lower mark. The live holders of the
// datacenter find out at their next renewal (the holder of that very id by
// the rule above) and re-initialise the record, and a lease acquired from
// the older copy then ends at its own next renewal — but with no live holder
// left (a released id) nobody finds out. Do not restore an older copy under a
// running cluster: stop its nodes for the quarantine, or delete the keys
// (a loss is always recognised). flakeid versions before the namespace record refuse the "ns" field as
// corrupt on Acquire: upgrade every node of a prefix together.
//
// # Atomicity and time
//
// Every state change is one Lua script (EVALSHA, falling back to EVAL when
// Redis lost its script cache), so each is atomic on the server, and reads
// the time with redis.call('TIME') inside the script: only Redis's clock
// decides expiry. Redis 7 replicates the effects of scripts, not the scripts,
// so reading TIME before writing is safe on replicas and AOF (the scripts
// also ask for effects replication on the older servers that need it).
// Renew and Release touch one key; Acquire the namespace's and the
// registry's (see above for a Redis Cluster).
//
// A reservation past the request's worker.MarkBound — Redis's clock + the
// reservation ahead + the clock skew allowed — is refused by the Acquire and
// Renew scripts before they write (worker.ErrClockSkew), so a node whose
// clock runs ahead never pushes a mark into the future; Clock reads TIME
// for the leaser's check before it acquires.
//
//   - Acquire is admitted as above, then its script reads the whole hash (HGETALL), counts the held ids in
//     [0, Workers), and takes a free one: among free ids (never used,
//     released or lapsed) the lowest whose high-water mark has passed, else
//     the one with the smallest mark. It initialises the record when there
//     is none, stores holder, expiry = now+TTL and high = max(high,
//     reserve), and returns the id and the mark stored before. When every
//     id is held it replies with an error that Acquire turns into
//     worker.ErrExhausted naming how many are held, and writes nothing. An
//     Acquire is idempotent for its owner token: if the owner already holds
//     a live id (a client retried the script after losing its reply), that
//     id is extended and returned with the same Previous, instead of a
//     second id being taken.
//   - Renew and Release first check the namespace record as above, then are
//     a compare-and-set on the owner token: they succeed only while the
//     field's holder is this owner and its expiry is later than now, and
//     otherwise reply with the holder and its expiry, which become
//     worker.ErrNotHeld. Both raise the high-water mark (to the maximum of
//     stored and given); Renew sets the expiry to now+TTL, Release clears
//     holder and expiry. A renewal stays one script, one round trip.
//
// Claim.Clock is Redis's TIME (to the microsecond) as the last successful
// Acquire or Renew script read it, with stale 0.
//
// # Errors
//
// Connection failures, timeouts, and failures of Redis itself (script
// errors, a key of the wrong type, a corrupt field) wrap
// worker.ErrUnavailable and say what failed. Every error names the key (the
// namespace and datacenter) and what was found.
//
// # Clients
//
// OpenWorkers opens a coordinator URL (the --coordinator flag of the
// flakeid command):
//
//	redis://[[user]:password@]host:port[/db][?prefix=P&…]
//	rediss://…   (TLS)
//
// with a client of its own, which its Close closes. NewWorkers takes any
// go-redis UniversalClient (a *redis.Client, a cluster or failover client),
// which stays the caller's. Leases renew under a context deadline; create
// the client with Options.ContextTimeoutEnabled (OpenWorkers does) so that
// go-redis honours it, or its ReadTimeout bounds each renewal instead.
// go-redis retries a command whose connection failed; Acquire and Renew are
// idempotent, a retried Release reports ErrNotHeld, which a lease ignores,
// and a retried call that re-initialised the namespace reports ErrReset
// again.
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
)

// DefaultPrefix is the key prefix when NewWorkers is given none.
const DefaultPrefix = "flakeid:workers"

// DefaultRegistry is the datacenter registry's key: one per Redis database,
// shared by every prefix in it.
const DefaultRegistry = "flakeid:datacenters"

// nsField is the field of a datacenter's hash that holds its namespace
// record; every other field is a worker id.
const nsField = "ns"

// spaceField is the registry's field that holds the ID space; every other
// field is a datacenter id.
const spaceField = "space"

// maxMs bounds every millisecond value the scripts handle: below 2^53, so
// Lua's doubles hold them exactly (10^15 ms is the year 33658).
const maxMs = 999_999_999_999_999

// The scripts' error replies start with these codes.
const (
	codeExhausted = "FLAKEID_EXHAUSTED"
	codeNotHeld   = "FLAKEID_NOTHELD"
	codeCorrupt   = "FLAKEID_CORRUPT"
	codeReset     = "FLAKEID_RESET"
	codeSkew      = "FLAKEID_SKEW"
)

// luaCommon parses slot values and namespace records and reads the clock;
// it prefixes every script.
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
-- clock returns Redis's time in milliseconds and in microseconds.
local function clock()
  local t = redis.call('TIME')
  local sec, us = tonumber(t[1]), tonumber(t[2])
  return sec * 1000 + math.floor(us / 1000), sec * 1000000 + us
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
-- parse_ns returns initialised, floor, incarnation, contract of a namespace
-- record, or nil.
local function parse_ns(v)
  local i, f, inc, c = string.match(v, '^(%d+)|(%d+)|([^|]+)|(.*)$')
  if not i or #i > 15 or #f > 15 then return nil end
  return tonumber(i), tonumber(f), inc, c
end
local function corrupt_ns(key, v)
  return redis.error_reply('` + codeCorrupt + ` field ` + nsField + ` of ' .. clean(key) ..
    ' is not <initialised_ms>|<floor_ms>|<incarnation>|<contract>: ' .. clean(v))
end
local function ns_value(i, f, inc, c)
  return fmt(i) .. '|' .. fmt(f) .. '|' .. inc .. '|' .. c
end
`

// acquireScript: KEYS[1] the datacenter's hash, KEYS[2] the registry; ARGV
// workers, owner, ttl_ms, reserve_ms, contract, quarantine_ms, incarnation
// (for a new record), the ID space, the prefix, the datacenter's registry
// field, what Acquire read and admitted of the registry's space, of the
// datacenter's claim and of the record's contract (each "" when absent,
// else "=" and the value), and the mark bound's span in ms (-1: none).
// Replies {worker id, previous ms (raised to the floor), now_us, incarnation,
// initialised_ms, high-water ms stored, lease end ms}; {'changed'} when what
// was admitted is no longer what is recorded (nothing written: read and
// decide again); {'skew', now_us} when the reservation is past the bound
// (nothing written).
const acquireScript = luaCommon + `
local key, registry = KEYS[1], KEYS[2]
local workers = tonumber(ARGV[1])
local owner = ARGV[2]
local ttl = tonumber(ARGV[3])
local reserve = tonumber(ARGV[4])
local contract = ARGV[5]
local quarantine = tonumber(ARGV[6])
local fresh = ARGV[7]
local space, prefix, dcfield = ARGV[8], ARGV[9], ARGV[10]
local span = tonumber(ARGV[14])
local now, now_us = clock()
local function seen(v) if v then return '=' .. v end return '' end
local reg_space = redis.call('HGET', registry, '` + spaceField + `')
local reg_claim = redis.call('HGET', registry, dcfield)
local rec = redis.call('HGET', key, '` + nsField + `')
local init, floor, inc, c
if rec then
  init, floor, inc, c = parse_ns(rec)
  if not init then return corrupt_ns(key, rec) end
end
if seen(reg_space) ~= ARGV[11] or seen(reg_claim) ~= ARGV[12] or seen(c) ~= ARGV[13] then
  return {'changed'}
end
if span >= 0 and reserve > now + span then return {'skew', now_us} end
local flat = redis.call('HGETALL', key)
local seen = {}
local held = 0
local best, best_high = -1, 0
local mine, mine_high, mine_prev = -1, 0, 0
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
  if field ~= '` + nsField + `' then
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
          mine, mine_high, mine_prev = id, h, p
        end
        held = held + 1
      else
        consider(id, h)
      end
    end
  end
end
if mine < 0 then
  local never = 0
  while seen[never] do never = never + 1 end
  if never < workers then consider(never, 0) end
  if best < 0 then
    return redis.error_reply('` + codeExhausted + ` ' .. held)
  end
end
-- Admitted: create what is missing.
if not reg_space then redis.call('HSET', registry, '` + spaceField + `', space) end
if not reg_claim then redis.call('HSET', registry, dcfield, prefix) end
if not rec then
  init, floor, inc = now, now + quarantine, fresh
  redis.call('HSET', key, '` + nsField + `', ns_value(init, floor, inc, contract))
end
if mine >= 0 then
  -- This owner's Acquire already ran (a retry): extend and answer the same.
  local high = math.max(mine_high, reserve)
  redis.call('HSET', key, fmt(mine), fmt(now + ttl) .. '|' .. fmt(high) .. '|' .. fmt(mine_prev) .. '|' .. owner)
  return {mine, math.max(mine_prev, floor), now_us, inc, init, high, now + ttl}
end
local high = math.max(best_high, reserve)
redis.call('HSET', key, fmt(best), fmt(now + ttl) .. '|' .. fmt(high) .. '|' .. fmt(best_high) .. '|' .. owner)
return {best, math.max(best_high, floor), now_us, inc, init, high, now + ttl}
`

// changeScript is the head of Renew and Release: KEYS[1] the hash; ARGV
// field, owner, ttl_ms, reserve_ms, and the claim's incarnation,
// initialised_ms, highest stored mark, contract, quarantine_ms, a fresh
// incarnation, and the lease end ms its last successful Acquire or Renew
// granted, and the mark bound's span in ms (-1: none, as for Release). It
// checks the namespace record (re-initialising it and replying
// FLAKEID_RESET when the state was lost or rolled back), refuses a reserve
// past now + span with FLAKEID_SKEW <now_us>, writing nothing, then leaves
// e, h, p, now, now_us, high set when the owner holds the field, and replies
// with an error otherwise.
//
// FLAKEID_RESET replies are "<kind> <new floor ms or 0> <number> <incarnation>",
// except "taken <new floor ms> <slot's expires_ms> <now_ms> <holder>".
const changeScript = luaCommon + `
local key, field, owner = KEYS[1], ARGV[1], ARGV[2]
local ttl, reserve = tonumber(ARGV[3]), tonumber(ARGV[4])
local cinc, cinit, cstored = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local ccontract, quarantine, fresh = ARGV[8], tonumber(ARGV[9]), ARGV[10]
local cend = tonumber(ARGV[11])
local span = tonumber(ARGV[12])
local now, now_us = clock()
local rec = redis.call('HGET', key, '` + nsField + `')
local v = redis.call('HGET', key, field)
-- reinit records a new incarnation behind a floor, touching no slot.
local function reinit(old_floor, c, kind, n, inc)
  local f = now + quarantine
  if old_floor and old_floor > f then f = old_floor end
  redis.call('HSET', key, '` + nsField + `', ns_value(now, f, fresh, c))
  return redis.error_reply('` + codeReset + ` ' .. kind .. ' ' .. fmt(f) .. ' ' .. fmt(n) .. ' ' .. clean(inc))
end
if not rec then return reinit(nil, ccontract, 'gone', 0, '-') end
local ri, rf, rinc, rc = parse_ns(rec)
if not ri then return corrupt_ns(key, rec) end
if ri < cinit then return reinit(rf, rc, 'older', ri, rinc) end
if rinc ~= cinc then
  return redis.error_reply('` + codeReset + ` since 0 ' .. fmt(ri) .. ' ' .. clean(rinc))
end
if not v then return reinit(rf, rc, 'slot', 0, rinc) end
local e, h, p, holder = parse(v)
if not e then return corrupt(key, field, v) end
if h < cstored then return reinit(rf, rc, 'below', h, rinc) end
if holder ~= owner or e <= now then
  -- While the lease this script granted the claim runs (until cend), the slot
  -- can be nobody else's, free or lapsed only in an older copy — unless it is
  -- this claim's own Release, retried: the freed slot keeps cend.
  if now < cend and not (holder == '' and e == 0 and p == cend) then
    return reinit(rf, rc, 'taken', e, fmt(now) .. ' ' .. holder)
  end
  return redis.error_reply('` + codeNotHeld + ` ' .. fmt(e) .. ' ' .. clean(holder))
end
if span >= 0 and reserve > now + span then
  return redis.error_reply('` + codeSkew + ` ' .. fmt(now_us))
end
local high = math.max(h, reserve)
`

// renewScript replies {new expiry ms, now_us, high-water ms stored}.
const renewScript = changeScript + `
redis.call('HSET', key, field, fmt(now + ttl) .. '|' .. fmt(high) .. '|' .. fmt(p) .. '|' .. owner)
return {now + ttl, now_us, high}
`

// releaseScript replies {high-water ms stored, now_us}. The freed slot keeps
// the released lease's end as its previous mark, so that a retried Release
// is told ErrNotHeld, not a rollback.
const releaseScript = changeScript + `
redis.call('HSET', key, field, '0|' .. fmt(high) .. '|' .. fmt(cend) .. '|')
return {high, now_us}
`

// unclaimScript: KEYS[1] the datacenter's hash, KEYS[2] the registry; ARGV
// the datacenter's registry field, the prefix. It frees the field when it
// names the prefix and no slot of the hash is held or has a mark ahead of
// Redis's clock, in one step, replying {'ok'}; otherwise it changes
// nothing and replies {'claimed', who} (who empty when nobody claims it) or
// {'busy', now_ms, field, expires, high, holder, …} for each slot in the way.
const unclaimScript = luaCommon + `
local key, registry, dcfield, prefix = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local who = redis.call('HGET', registry, dcfield)
if who ~= prefix then return {'claimed', who or ''} end
local now = clock()
local flat = redis.call('HGETALL', key)
local busy = {'busy', now}
for i = 1, #flat, 2 do
  local field, v = flat[i], flat[i + 1]
  if field ~= '` + nsField + `' then
    local e, h, p, holder = parse(v)
    if not e then return corrupt(key, field, v) end
    if (holder ~= '' and e > now) or h > now then
      table.insert(busy, field)
      table.insert(busy, e)
      table.insert(busy, h)
      table.insert(busy, holder)
    end
  end
end
if #busy > 2 then return busy end
redis.call('HDEL', registry, dcfield)
return {'ok'}
`

// lowerScript: KEYS[1] the datacenter's hash; ARGV the worker id's field
// and the new mark in ms. It lowers the mark when the slot is not held, its
// mark is above the new one, and the new one is not before Redis's clock,
// replying {'ok', old mark}; otherwise it changes nothing and replies
// {'refused', now_ms, expires, high, holder} (a missing slot: zeros and no holder).
const lowerScript = luaCommon + `
local key, field, to = KEYS[1], ARGV[1], tonumber(ARGV[2])
local now = clock()
local v = redis.call('HGET', key, field)
if not v then return {'refused', now, 0, 0, ''} end
local e, h, p, holder = parse(v)
if not e then return corrupt(key, field, v) end
if (holder ~= '' and e > now) or h <= to or to < now then
  return {'refused', now, e, h, holder}
end
redis.call('HSET', key, field, fmt(e) .. '|' .. fmt(to) .. '|' .. fmt(p) .. '|' .. holder)
return {'ok', h}
`

// Workers is a worker.Coordinator over Redis. It is safe for concurrent use.
type Workers struct {
	client   goredis.UniversalClient
	prefix   string
	registry string
	acquire  *goredis.Script
	renew    *goredis.Script
	release  *goredis.Script
	unclaim  *goredis.Script
	lower    *goredis.Script
	owned    bool // Close closes the client: OpenWorkers made it
}

var (
	_ worker.Coordinator = (*Workers)(nil)
	_ worker.Registry    = (*Workers)(nil)
	_ worker.MarkLowerer = (*Workers)(nil)
)

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
	return &Workers{
		client:   client,
		prefix:   prefix,
		registry: DefaultRegistry,
		acquire:  goredis.NewScript(acquireScript),
		renew:    goredis.NewScript(renewScript),
		release:  goredis.NewScript(releaseScript),
		unclaim:  goredis.NewScript(unclaimScript),
		lower:    goredis.NewScript(lowerScript),
	}
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

// ceilMs, durationMs and msTime are coord.CeilMs, coord.CeilDurMs and
// coord.MsTime, for this package's tests.
func ceilMs(t time.Time) int64         { return coord.CeilMs(t) }
func durationMs(d time.Duration) int64 { return coord.CeilDurMs(d) }
func msTime(ms int64) time.Time        { return coord.MsTime(ms) }

func checkReserve(reserve time.Time) (int64, error) {
	ms := coord.CeilMs(reserve)
	if ms > maxMs {
		return 0, fmt.Errorf("%w: reservation %v is beyond what the Redis coordinator stores (%v)",
			worker.ErrInvalidConfig, reserve, coord.MsTime(maxMs))
	}
	return max(ms, 0), nil
}

// Acquire implements worker.Coordinator.
func (w *Workers) Acquire(ctx context.Context, req worker.Request) (worker.Claim, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	switch {
	case coord.CeilDurMs(req.TTL) > maxMs/2:
		return nil, fmt.Errorf("%w: bad request: TTL %v", worker.ErrInvalidConfig, req.TTL)
	case coord.CeilDurMs(req.Quarantine) > maxMs/2:
		return nil, fmt.Errorf("%w: bad request: quarantine %v", worker.ErrInvalidConfig, req.Quarantine)
	}
	reserve, err := checkReserve(req.Reserve)
	if err != nil {
		return nil, err
	}
	key := w.Key(req.Datacenter)
	if key == w.registry {
		return nil, fmt.Errorf("%w: redis: the datacenter registry %s is the key of datacenter %d of %s",
			worker.ErrInvalidConfig, w.registry, req.Datacenter, w.prefix)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: redis: acquiring a worker id in %s: %w", worker.ErrUnavailable, key, err)
	}
	inc, quarantine := coord.NewIncarnation(), coord.CeilDurMs(req.Quarantine)
	bound := req.MarkBound()
	dcField := strconv.FormatInt(req.Datacenter, 10)
	var res any
	for attempt := 1; ; attempt++ {
		seen, err := w.admit(ctx, req, key, dcField)
		if err != nil {
			return nil, err
		}
		res, err = w.acquire.Run(ctx, w.client, []string{key, w.registry},
			req.Workers, req.Owner, coord.CeilDurMs(req.TTL), reserve, req.Contract, quarantine, inc,
			req.Space, w.prefix, dcField, seen[0], seen[1], seen[2], bound.Span()).Result()
		if err != nil {
			if rest, ok := replyCode(err, codeExhausted); ok {
				return nil, fmt.Errorf("%w: all %s worker ids of datacenter %d are held (%s)", worker.ErrExhausted,
					rest, req.Datacenter, key)
			}
			return nil, w.failed("acquiring a worker id in "+key, err)
		}
		vals, _ := res.([]any)
		switch {
		case len(vals) == 1 && vals[0] == "changed":
			// The registry or the record changed between the read and the
			// script: decide again on what is there now.
			if attempt < 5 {
				continue
			}
			return nil, fmt.Errorf("%w: redis: the registry %s or %s changed under %d attempts to acquire in a row",
				worker.ErrUnavailable, w.registry, key, attempt)
		case len(vals) == 2 && vals[0] == "skew":
			if nowUs, ok := vals[1].(int64); ok {
				return nil, bound.Refused("acquiring a worker id in "+key, req.Reserve, time.UnixMicro(nowUs).UTC())
			}
		}
		break
	}
	vals, ok := res.([]any)
	if !ok || len(vals) != 7 {
		return nil, unexpected("acquire", key, res)
	}
	id, ok1 := vals[0].(int64)
	prev, ok2 := vals[1].(int64)
	nowUs, ok3 := vals[2].(int64)
	incarnation, ok4 := vals[3].(string)
	init, ok5 := vals[4].(int64)
	stored, ok6 := vals[5].(int64)
	end, ok7 := vals[6].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || id < 0 || id >= req.Workers || prev < 0 || nowUs <= 0 ||
		incarnation == "" || init < 0 || stored < 0 || end <= 0 {
		return nil, unexpected("acquire", key, res)
	}
	return &claim{
		w: w, key: key, dc: req.Datacenter, id: id, owner: req.Owner, prev: coord.MsTime(prev),
		incarnation: incarnation, initialised: init, stored: stored, end: end,
		contract: req.Contract, quarantine: quarantine, clock: time.UnixMicro(nowUs).UTC(), bound: bound,
	}, nil
}

// admit reads, in one round trip, the registry's ID space, the claim of
// the datacenter (field dcField) and the namespace record of key, and
// decides by worker.Admit. It returns what it read, each "" when absent and
// "=" + the value otherwise, for the acquire script to check unchanged.
func (w *Workers) admit(ctx context.Context, req worker.Request, key, dcField string) ([3]string, error) {
	var cmds [3]*goredis.StringCmd
	_, err := w.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		cmds[0] = p.HGet(ctx, w.registry, spaceField)
		cmds[1] = p.HGet(ctx, w.registry, dcField)
		cmds[2] = p.HGet(ctx, key, nsField)
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return [3]string{}, w.failed(fmt.Sprintf("reading the registry %s and the namespace record of %s", w.registry, key), err)
	}
	var seen [3]string
	var vals [3]string
	var has [3]bool
	for i, c := range cmds {
		v, err := c.Result()
		if err == nil {
			vals[i], has[i], seen[i] = v, true, "="+v
		}
	}
	r := worker.Recorded{
		Registry: "the registry " + w.registry, Namespace: w.prefix,
		Space: vals[0], HasSpace: has[0], Claimant: vals[1], HasClaim: has[1],
	}
	if has[2] {
		rec, err := parseRecord(vals[2])
		if err != nil {
			return seen, fmt.Errorf("%w: redis: %s: %w", worker.ErrUnavailable, key, err)
		}
		seen[2] = "=" + rec.contract
		r.Contract, r.Initialised, r.HasRecord = rec.contract, coord.MsTime(rec.initialised), true
	}
	return seen, worker.Admit(req, r)
}

// Claims implements worker.Registry: the registry hash, read whole.
func (w *Workers) Claims(ctx context.Context) (worker.Claims, error) {
	m, err := w.client.HGetAll(ctx, w.registry).Result()
	if err != nil {
		return worker.Claims{}, w.failed("reading the registry "+w.registry, err)
	}
	var c worker.Claims
	for field, v := range m {
		if field == spaceField {
			c.Space, c.HasSpace = v, true
			continue
		}
		dc, ok := coord.ParseID(field)
		if !ok {
			return worker.Claims{}, fmt.Errorf("%w: redis: the registry %s has the field %q, which is no datacenter id", worker.ErrUnavailable, w.registry, clip(field))
		}
		c.Datacenters = append(c.Datacenters, worker.DatacenterClaim{Datacenter: dc, Namespace: v})
	}
	slices.SortFunc(c.Datacenters, func(a, b worker.DatacenterClaim) int { return cmp.Compare(a.Datacenter, b.Datacenter) })
	return c, nil
}

// Unclaim implements worker.Registry: one script over the datacenter's hash
// and the registry checks the claim and every slot against Redis's clock
// and frees the claim, atomically.
func (w *Workers) Unclaim(ctx context.Context, dc int64) error {
	if dc < 0 {
		return fmt.Errorf("%w: datacenter %d", worker.ErrInvalidConfig, dc)
	}
	key := w.Key(dc)
	res, err := w.unclaim.Run(ctx, w.client, []string{key, w.registry}, strconv.FormatInt(dc, 10), w.prefix).Result()
	if err != nil {
		return w.failed(fmt.Sprintf("freeing datacenter %d in the registry %s", dc, w.registry), err)
	}
	vals, _ := res.([]any)
	switch {
	case len(vals) == 1 && vals[0] == "ok":
		return nil
	case len(vals) == 2 && vals[0] == "claimed":
		return fmt.Errorf("%w: datacenter %d is not claimed by %s in the registry %s (claimed by: %q)", worker.ErrContract, dc, w.prefix, w.registry, vals[1])
	case len(vals) >= 2 && vals[0] == "busy":
		now, _ := vals[1].(int64)
		var slots []worker.Info
		for i := 2; i+3 < len(vals); i += 4 {
			field, _ := vals[i].(string)
			id, _ := coord.ParseID(field)
			e, _ := vals[i+1].(int64)
			h, _ := vals[i+2].(int64)
			holder, _ := vals[i+3].(string)
			slots = append(slots, worker.Info{Datacenter: dc, Worker: id, Holder: holder, Expires: coord.MsTime(e), HighWater: coord.MsTime(h)})
		}
		if err := worker.CheckUnclaim(w.prefix, dc, slots, coord.MsTime(now)); err != nil {
			return err
		}
	}
	return unexpected("unclaim", key, res)
}

// LowerMark implements worker.MarkLowerer: one script checks the slot
// against Redis's clock and lowers the mark.
func (w *Workers) LowerMark(ctx context.Context, dc, id int64, to time.Time) (time.Time, error) {
	if dc < 0 || id < 0 {
		return time.Time{}, fmt.Errorf("%w: datacenter %d, worker %d", worker.ErrInvalidConfig, dc, id)
	}
	toMs, err := checkReserve(to)
	if err != nil {
		return time.Time{}, err
	}
	key := w.Key(dc)
	res, err := w.lower.Run(ctx, w.client, []string{key}, strconv.FormatInt(id, 10), toMs).Result()
	if err != nil {
		return time.Time{}, w.failed(fmt.Sprintf("lowering the mark of worker %d in %s", id, key), err)
	}
	vals, _ := res.([]any)
	switch {
	case len(vals) == 2 && vals[0] == "ok":
		if h, ok := vals[1].(int64); ok {
			return coord.MsTime(h), nil
		}
	case len(vals) == 5 && vals[0] == "refused":
		now, _ := vals[1].(int64)
		e, _ := vals[2].(int64)
		h, _ := vals[3].(int64)
		holder, _ := vals[4].(string)
		info := worker.Info{Datacenter: dc, Worker: id, Holder: holder, Expires: coord.MsTime(e), HighWater: coord.MsTime(h)}
		if err := worker.CheckLowerMark(info, coord.MsTime(toMs), coord.MsTime(now)); err != nil {
			return time.Time{}, err
		}
	}
	return time.Time{}, unexpected("lower", key, res)
}

// Clock implements worker.Coordinator: Redis's TIME, read without writing.
func (w *Workers) Clock(ctx context.Context, _ worker.Request) (time.Time, time.Duration, error) {
	t, err := w.client.Time(ctx).Result()
	if err != nil {
		return time.Time{}, 0, w.failed("reading the clock (TIME)", err)
	}
	return t.UTC(), 0, nil
}

// Namespace implements worker.Coordinator.
func (w *Workers) Namespace(ctx context.Context, datacenter int64) (worker.Namespace, bool, error) {
	if datacenter < 0 {
		return worker.Namespace{}, false, fmt.Errorf("%w: datacenter %d", worker.ErrInvalidConfig, datacenter)
	}
	key := w.Key(datacenter)
	if err := ctx.Err(); err != nil {
		return worker.Namespace{}, false, fmt.Errorf("%w: redis: reading the namespace record of %s: %w", worker.ErrUnavailable, key, err)
	}
	v, err := w.client.HGet(ctx, key, nsField).Result()
	if errors.Is(err, goredis.Nil) {
		return worker.Namespace{}, false, nil
	}
	if err != nil {
		return worker.Namespace{}, false, w.failed("reading the namespace record of "+key, err)
	}
	r, err := parseRecord(v)
	if err != nil {
		return worker.Namespace{}, false, fmt.Errorf("%w: redis: %s: %w", worker.ErrUnavailable, key, err)
	}
	return coord.Record{Incarnation: r.incarnation, Contract: r.contract, FloorMs: r.floor, InitialisedMs: r.initialised}.Namespace(), true, nil
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
		if field == nsField {
			continue
		}
		id, s, err := parseSlot(field, v)
		if err != nil {
			return nil, fmt.Errorf("%w: redis: %s: %w", worker.ErrUnavailable, key, err)
		}
		in := worker.Info{Datacenter: datacenter, Worker: id, HighWater: coord.MsTime(s.high)}
		if s.holder != "" {
			in.Holder, in.Expires = s.holder, coord.MsTime(s.expires)
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

// record is a decoded namespace record.
type record struct {
	initialised, floor    int64
	incarnation, contract string
}

// parseRecord decodes the namespace record field, as the scripts do.
func parseRecord(v string) (record, error) {
	bad := func(what string) error {
		return fmt.Errorf("corrupt field %q = %q: %s", nsField, clip(v), what)
	}
	parts := strings.SplitN(v, "|", 4)
	if len(parts) != 4 || parts[2] == "" {
		return record{}, bad("want <initialised_ms>|<floor_ms>|<incarnation>|<contract>")
	}
	init, ok1 := digits(parts[0])
	floor, ok2 := digits(parts[1])
	if !ok1 || !ok2 {
		return record{}, bad("want millisecond counts before the incarnation")
	}
	return record{initialised: init, floor: floor, incarnation: parts[2], contract: parts[3]}, nil
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

// claim is a held worker id. Its methods are called from one goroutine at a
// time (worker.Claim), so its mutable fields need no lock.
type claim struct {
	w      *Workers
	key    string
	dc, id int64
	owner  string
	prev   time.Time

	incarnation string // the namespace record's, when acquired
	initialised int64  // the record's initialisation, ms
	stored      int64  // the highest mark this claim stored, ms
	end         int64  // the lease end the last Acquire or Renew granted, ms (Redis's clock)
	contract    string
	quarantine  int64     // ms
	clock       time.Time // Redis's clock at the last Acquire or Renew
	bound       worker.MarkBound
}

func (c *claim) WorkerID() int64                   { return c.id }
func (c *claim) Previous() time.Time               { return c.prev }
func (c *claim) Clock() (time.Time, time.Duration) { return c.clock, 0 }

// Renew implements worker.Claim.
func (c *claim) Renew(ctx context.Context, ttl time.Duration, reserve time.Time) error {
	if ttl <= 0 || coord.CeilDurMs(ttl) > maxMs/2 {
		return fmt.Errorf("%w: TTL %v", worker.ErrInvalidConfig, ttl)
	}
	vals, err := c.change(ctx, "renewing", c.w.renew, coord.CeilDurMs(ttl), reserve, c.bound.Span())
	if err != nil {
		return err
	}
	exp, ok1 := vals[0].(int64)
	nowUs, ok2 := vals[1].(int64)
	var high int64
	ok3 := len(vals) == 3
	if ok3 {
		high, ok3 = vals[2].(int64)
	}
	if !ok1 || !ok2 || !ok3 || exp <= 0 || nowUs <= 0 {
		return unexpected("renewing", c.key, vals)
	}
	c.stored = max(c.stored, high)
	c.end = exp
	c.clock = time.UnixMicro(nowUs).UTC()
	return nil
}

// Release implements worker.Claim.
func (c *claim) Release(ctx context.Context, reserve time.Time) error {
	vals, err := c.change(ctx, "releasing", c.w.release, 0, reserve, -1)
	if err != nil {
		return err
	}
	if _, ok := vals[0].(int64); !ok || len(vals) != 2 {
		return unexpected("releasing", c.key, vals)
	}
	// The lease ended here, before the end it was granted: a later call of
	// this claim finds the slot free or another's, which is no rollback.
	c.end = 0
	return nil
}

// change runs the renew or release script and returns its reply, a
// non-empty table.
func (c *claim) change(ctx context.Context, verb string, s *goredis.Script, ttlMs int64, reserve time.Time, span int64) ([]any, error) {
	r, err := checkReserve(reserve)
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("%s worker %d in %s", verb, c.id, c.key)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: redis: %s: %w", worker.ErrUnavailable, what, err)
	}
	fresh := coord.NewIncarnation()
	res, err := s.Run(ctx, c.w.client, []string{c.key}, strconv.FormatInt(c.id, 10), c.owner, ttlMs, r,
		c.incarnation, c.initialised, c.stored, c.contract, c.quarantine, fresh, c.end, span).Result()
	if err != nil {
		if rest, ok := replyCode(err, codeSkew); ok {
			us, _ := strconv.ParseInt(rest, 10, 64)
			return nil, c.bound.Refused(what, reserve, time.UnixMicro(us).UTC())
		}
		if rest, ok := replyCode(err, codeNotHeld); ok {
			return nil, c.notHeld(rest)
		}
		if rest, ok := replyCode(err, codeReset); ok {
			return nil, c.reset(rest, fresh)
		}
		return nil, c.w.failed(what, err)
	}
	vals, ok := res.([]any)
	if !ok || len(vals) == 0 {
		return nil, unexpected(verb, c.key, res)
	}
	return vals, nil
}

// reset turns the reply "<kind> <floor_ms> <number> <incarnation>" into
// ErrReset, saying what was found; fresh is the incarnation the script
// recorded if it re-initialised the namespace.
func (c *claim) reset(rest, fresh string) error {
	parts := strings.SplitN(rest, " ", 4)
	for len(parts) < 4 {
		parts = append(parts, "")
	}
	kind, inc := parts[0], parts[3]
	floor, _ := strconv.ParseInt(parts[1], 10, 64)
	n, _ := strconv.ParseInt(parts[2], 10, 64)
	where := fmt.Sprintf("datacenter %d in %s (%s)", c.dc, c.w.prefix, c.key)
	mine := fmt.Sprintf("incarnation %s initialised at %s", c.incarnation, coord.FormatMs(c.initialised))
	var found string
	switch kind {
	case "gone":
		found = fmt.Sprintf("the namespace record of %s is gone (Redis restarted without its data, was flushed, "+
			"or the key was deleted or evicted); this holder acquired worker %d under %s", where, c.id, mine)
	case "older":
		found = fmt.Sprintf("the namespace record of %s is incarnation %s initialised at %s, before this holder's %s: "+
			"Redis went back to an older copy (a lagging replica or an older backup)", where, inc, coord.FormatMs(n), mine)
	case "slot":
		found = fmt.Sprintf("worker %d of %s is gone, though this holder's %s is still recorded: "+
			"Redis went back to an older copy or lost the field", c.id, where, mine)
	case "below":
		found = fmt.Sprintf("worker %d's high-water mark is %s, below the %s this holder stored (%s): "+
			"Redis went back to an older copy (a lagging replica or an older backup)", c.id, coord.FormatMs(n), coord.FormatMs(c.stored), where)
	case "taken":
		nowMs, holder, _ := strings.Cut(inc, " ")
		at, _ := strconv.ParseInt(nowMs, 10, 64)
		var slot string
		switch {
		case holder == "":
			slot = "free"
		case holder == c.owner || n <= at:
			slot = fmt.Sprintf("held by %q with a lease that lapsed at %s", holder, coord.FormatMs(n))
		default:
			slot = fmt.Sprintf("held by %q", holder)
		}
		found = fmt.Sprintf("worker %d of %s is %s at %s while this holder's lease runs until %s by the coordinator's clock: "+
			"Redis went back to an older copy (a lagging replica or an older backup)", c.id, where, slot, coord.FormatMs(at), coord.FormatMs(c.end))
	case "since":
		return fmt.Errorf("%w: the namespace record of %s is incarnation %s initialised at %s, not this holder's %s: "+
			"the state was lost and the namespace re-initialised since; worker %d is no longer this holder's",
			worker.ErrReset, where, inc, coord.FormatMs(n), mine, c.id)
	default:
		return fmt.Errorf("%w: %s of worker %d: the coordinator's state was lost or rolled back (%s)",
			worker.ErrReset, where, c.id, rest)
	}
	return fmt.Errorf("%w: %s; re-initialised the namespace as incarnation %s with floor %s", worker.ErrReset,
		found, fresh, coord.FormatMs(floor))
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
			holder, c.id, c.dc, coord.MsTime(expMs).Format(time.RFC3339Nano), c.key)
	default:
		return fmt.Errorf("%w: worker %d of datacenter %d is held by %q, its lease running until %s (%s)", worker.ErrNotHeld,
			c.id, c.dc, holder, coord.MsTime(expMs).Format(time.RFC3339Nano), c.key)
	}
}

// flakeid: the JavaScript client of the flakeid ID service, for Node.js 20
// or later and browsers (it needs only fetch). It asks one of several
// servers for IDs over the HTTP/JSON API, fails over between them
// (honouring Retry-After), and can keep a local buffer of prefetched IDs.
// IDs are decimal strings by default, bigints with {bigint: true}: never JS
// numbers, which lose digits past 2^53.

/** The most IDs the client asks for in one request. */
export const MAX_COUNT = 10_000_000;
/** The default per-attempt timeout, in milliseconds. */
export const DEFAULT_TIMEOUT = 2000;
/** The default buffer low water, a fraction of a batch. */
export const DEFAULT_LOW_WATER = 0.5;
/** The default bounds of an endpoint's backoff after a failure, in milliseconds. */
export const DEFAULT_BACKOFF_MIN = 100;
export const DEFAULT_BACKOFF_MAX = 5000;
/** The server's default address. */
export const DEFAULT_ENDPOINT = "http://127.0.0.1:8080";

const UUID_FORMATS = ["uuid7", "typeid", "ulid"];

/** The base class of the client's errors. */
export class FlakeidError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}
/** A Config field is out of range. */
export class InvalidConfig extends FlakeidError {}
/** No endpoint could serve the call within maxAttempts, or its timeout ended first. */
export class Unavailable extends FlakeidError {}
/** The server answered 404: an unknown segment tag, or segment mode off. */
export class NotFound extends FlakeidError {}
/** The request is malformed: found by the client, or answered 400. */
export class InvalidArgument extends FlakeidError {}
/** The server answered 401: a missing or unknown token. */
export class Unauthenticated extends FlakeidError {}
/** The server answered 403: the token may not do this. */
export class PermissionDenied extends FlakeidError {}
/** The client was closed. */
export class Closed extends FlakeidError {}

/**
 * Two endpoints of the client can issue the same Snowflake IDs: they hold
 * the same (datacenter, worker) pair at once, or use different layouts, so
 * they share no coordinator (two `flakeid serve` on their own file
 * coordinators behind one load balancer, say). The message names both; the
 * client hands out no Snowflake ID from then on.
 */
export class Overlap extends FlakeidError {}

/**
 * An error answer of a server. It is an instance of the kind its code or
 * status names as well (NotFound, InvalidArgument, …: see isAPIError), and
 * carries status, code, message, endpoint and retryAfter (milliseconds).
 */
function apiError(status, code, message, endpoint, retryAfter) {
  const codes = { 400: "invalid_argument", 401: "unauthenticated", 403: "permission_denied", 404: "not_found", 408: "request_timeout", 429: "resource_exhausted", 503: "unavailable" };
  code = code || codes[status] || (status >= 500 ? "unavailable" : "unknown");
  const kinds = { invalid_argument: InvalidArgument, unauthenticated: Unauthenticated, permission_denied: PermissionDenied, not_found: NotFound, unavailable: Unavailable };
  const Kind = status === 503 ? Unavailable : kinds[code] || FlakeidError;
  const err = new Kind(`${endpoint}: ${status} ${code}: ${message}`);
  Object.assign(err, { api: true, status, code, message, endpoint, retryAfter });
  return err;
}

/** Reports whether err is a server's error answer (with status, code, message, endpoint, retryAfter). */
export function isAPIError(err) {
  return err instanceof FlakeidError && err.api === true;
}

/** The recommended settings: the server's default address, a 2 s per-attempt timeout and a Snowflake buffer of 10,000 IDs. */
export function defaultConfig() {
  return { endpoints: [DEFAULT_ENDPOINT], timeout: DEFAULT_TIMEOUT, buffer: { snowflake: 10_000 } };
}

function validate(cfg) {
  const endpoints = cfg.endpoints ?? [];
  if (!Array.isArray(endpoints) || endpoints.length === 0) throw new InvalidConfig("endpoints: at least one is required");
  const seen = new Set();
  for (const e of endpoints) {
    let u;
    try {
      u = new URL(e);
    } catch {
      throw new InvalidConfig(`endpoint ${JSON.stringify(e)}: not a URL`);
    }
    if ((u.protocol !== "http:" && u.protocol !== "https:") || u.search || u.hash) {
      throw new InvalidConfig(`endpoint ${JSON.stringify(e)}: want an http:// or https:// base URL without query or fragment`);
    }
    const k = e.replace(/\/+$/, "");
    if (seen.has(k)) throw new InvalidConfig(`endpoint ${JSON.stringify(e)} is listed twice`);
    seen.add(k);
  }
  if (/[\x00-\x1f\x7f]/.test(cfg.token ?? "")) throw new InvalidConfig("token: contains a control character");
  if (cfg.fetch !== undefined && typeof cfg.fetch !== "function") throw new InvalidConfig(`fetch: want a function like fetch(url, init), not ${typeof cfg.fetch}`);
  const buffer = cfg.buffer ?? {};
  for (const [name, v, lo, hi] of [["timeout", cfg.timeout, 0, 300_000], ["maxAttempts", cfg.maxAttempts, 0, 1000], ["backoffMin", cfg.backoffMin, 0, Infinity],
    ["backoffMax", cfg.backoffMax, 0, Infinity], ["buffer.snowflake", buffer.snowflake, 0, MAX_COUNT], ["buffer.segment", buffer.segment, 0, MAX_COUNT],
    ["buffer.lowWater", buffer.lowWater, 0, 1]]) {
    if (v === undefined) continue;
    if (typeof v !== "number" || !(v >= lo && v <= hi)) throw new InvalidConfig(`${name} ${v}: want ${lo}–${hi}`);
  }
  if (cfg.backoffMin && cfg.backoffMax && cfg.backoffMin > cfg.backoffMax) throw new InvalidConfig(`backoffMin ${cfg.backoffMin} is above backoffMax ${cfg.backoffMax}`);
}

function checkCount(n) {
  if (!Number.isInteger(n) || n < 1 || n > MAX_COUNT) throw new InvalidArgument(`count ${n} is out of range: want 1 to ${MAX_COUNT}`);
}

function tagPath(tag) {
  if (typeof tag !== "string" || !/^[A-Za-z0-9\-_.:]{1,128}$/.test(tag) || tag === "." || tag === "..") {
    throw new InvalidArgument(`tag ${JSON.stringify(tag)}: want 1–128 characters of A–Z a–z 0–9 - _ . :, and not . or ..`);
  }
  return `/v1/segment/${tag}/next`;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const jitter = (d) => d / 2 + Math.random() * (d / 2);

/**
 * Prefetched runs of IDs (see BufferConfig), handed out in order: ranges of
 * IDs, or the texts a server wrote (nextText's buffers).
 */
class IDBuffer {
  constructor(fetch, batch, lowWater, pause) {
    this.fetch = fetch;
    this.pause = pause;
    this.low = Math.max(1, Math.floor(batch * lowWater));
    this.ranges = []; // {next: bigint, left: number, stride: bigint}, or {texts: string[], at: number, left: number}
    this.left = 0;
    this.refill = null; // the refill under way
    this.closed = false;
    this.failure = null;
  }

  async take(n, deadline) {
    while (this.left < n) {
      if (this.closed) throw new Closed("the client is closed");
      const refill = this.startRefill();
      const wait = deadline === undefined ? undefined : deadline - Date.now();
      if (wait !== undefined && wait <= 0) {
        throw new Unavailable(`the buffer is empty and its refill did not come within the call's timeout (last failure: ${this.failure?.message ?? "none"})`);
      }
      let timer;
      const outcome = await Promise.race([refill, ...(wait === undefined ? [] : [new Promise((r) => { timer = setTimeout(() => r("timeout"), wait); })])]);
      clearTimeout(timer);
      // The refill this caller waited for failed: without a deadline that
      // is its answer; with time left, the loop starts another.
      if (outcome instanceof Error && this.left < n && (deadline === undefined || !(outcome instanceof Unavailable))) throw outcome;
    }
    const out = [];
    while (out.length < n) {
      const r = this.ranges[0];
      const k = Math.min(n - out.length, r.left);
      if (r.texts) {
        for (let i = 0; i < k; i++) out.push(r.texts[r.at + i]);
        r.at += k;
      } else {
        for (let i = 0; i < k; i++) {
          out.push(r.next);
          r.next += r.stride;
        }
      }
      r.left -= k;
      if (r.left === 0) this.ranges.shift();
    }
    this.left -= n;
    if (this.left < this.low) this.startRefill();
    return out;
  }

  // startRefill starts a refill unless one is under way, and returns it: a
  // promise of nothing, or of the error it gave up with.
  startRefill() {
    if (!this.refill && !this.closed) {
      this.refill = this.run().finally(() => { this.refill = null; });
      this.refill.catch(() => {});
    }
    return this.refill ?? Promise.resolve(new Closed("the client is closed"));
  }

  async run() {
    for (;;) {
      try {
        const got = await this.fetch();
        if (!this.closed) {
          for (const r of got) if (r.left > 0) this.ranges.push(r), (this.left += r.left);
          this.failure = null;
        }
        return undefined;
      } catch (err) {
        this.failure = err;
        // Unavailable while the buffer holds IDs: ride the outage out.
        if (!(err instanceof Unavailable) || this.left === 0 || this.closed) return err;
        await sleep(this.pause());
      }
    }
  }

  close() {
    this.closed = true;
    this.ranges = [];
    this.left = 0;
  }
}

/**
 * Asks flakeid servers for IDs. A call goes to the endpoint that answered
 * last; a network error, a timeout, or an answer of 408, 429 or 5xx passes
 * that endpoint over for a backoff and moves the call on (endpoints passed
 * over come last, so a call still tries them when all are down); after a
 * full round the call pauses for a backoff, or until the soonest endpoint is
 * back by its Retry-After. After maxAttempts requests it throws Unavailable
 * with the last failure as its cause, and so it does at once when its
 * timeout would end before the next round. Any other 4xx is the caller's
 * fault and is thrown at once. Every call takes an optional {timeout} in
 * milliseconds for the whole call.
 *
 * Given several endpoints, the client checks them the first time each hands
 * it Snowflake IDs: it reads that endpoint's /v1/status and every other's,
 * and two that hold the same (datacenter, worker) pair at once, or use
 * different layouts, share no coordinator and can issue the same IDs — the
 * call then throws Overlap naming both, and so does every later Snowflake
 * call. An endpoint that cannot be asked is checked at its next answer; one
 * endpoint alone is never checked.
 */
export class Client {
  /** @param {object} [config] see index.d.ts; defaultConfig() when absent */
  constructor(config) {
    const cfg = { ...(config ?? defaultConfig()) };
    validate(cfg);
    this.timeout = cfg.timeout || DEFAULT_TIMEOUT;
    this.maxAttempts = cfg.maxAttempts || Math.max(3, 2 * cfg.endpoints.length);
    const lo = cfg.backoffMin || 0, hi = cfg.backoffMax || 0;
    this.backoffMin = lo || (hi ? Math.min(DEFAULT_BACKOFF_MIN, hi) : DEFAULT_BACKOFF_MIN);
    this.backoffMax = hi || Math.max(DEFAULT_BACKOFF_MAX, this.backoffMin);
    this.headers = { Accept: "application/json" };
    if (cfg.token) this.headers.Authorization = `Bearer ${cfg.token}`;
    this.endpoints = cfg.endpoints.map((e) => ({ base: e.replace(/\/+$/, ""), failures: 0, downUntil: 0 }));
    this.preferred = 0;
    this.closed = false;
    this.bigint = cfg.bigint === true;
    this.fetch = cfg.fetch ?? ((url, init) => fetch(url, init));
    this.bufferCfg = { snowflake: 0, segment: 0, lowWater: 0, ...(cfg.buffer ?? {}) };
    const low = this.bufferCfg.lowWater || DEFAULT_LOW_WATER;
    const batch = this.bufferCfg.snowflake;
    this.ids = batch ? new IDBuffer(() => this.ranges("/v1/snowflake/next", batch), batch, low, () => this.retryPause()) : null;
    this.texts = batch ? new IDBuffer(async () => [textRun(await this.textBatch("/v1/snowflake/next", "", batch))], batch, low, () => this.retryPause()) : null;
    this.segments = new Map(); // tag → its buffer of IDs
    this.segmentTexts = new Map(); // tag → its buffer of texts
    this.generators = new Set();
    this.vetQueue = Promise.resolve(); // the endpoint checks, one at a time
    this.vetted = new Set();
    this.overlap = null;
  }

  /** Stops the refills and closes the local generators (releasing their leases); later calls throw Closed. Idempotent. */
  close() {
    this.closed = true;
    this.ids?.close();
    this.texts?.close();
    for (const b of [...this.segments.values(), ...this.segmentTexts.values()]) b.close();
    for (const g of this.generators) g.close();
    this.generators.clear();
  }

  /**
   * A generator of Snowflake IDs in this process, under a worker-id lease
   * one of the endpoints holds for it (failing over as any call does,
   * within opts.timeout): see LocalGenerator. owner names this process in
   * the coordinator, 1–64 letters, digits and -_.:/@; "" means
   * "js/<pid or browser>". A server that masks its Snowflake IDs, or runs on
   * a static worker id, refuses (an API error with code
   * failed_precondition); one whose worker ids are all held throws
   * Unavailable.
   */
  async localGenerator(owner = "", opts) {
    this.checkOpen();
    if (owner && !/^[A-Za-z0-9\-_.:/@]{1,64}$/.test(owner)) throw new InvalidArgument(`owner ${JSON.stringify(owner)}: want 1–64 letters, digits and -_.:/@`);
    const g = new LocalGenerator(this, owner || defaultOwner());
    g.lease = await g.acquire(opts);
    if (this.closed) {
      g.close();
      throw new Closed("the client is closed");
    }
    this.generators.add(g);
    g.schedule(g.lease.renewEvery);
    return g;
  }

  /** One Snowflake ID: from the buffer when there is one, else a request. */
  async nextId(opts) {
    return (await this.nextIds(1, opts))[0];
  }

  /** n Snowflake IDs: from the buffer when n is at most half a batch, else one request. */
  async nextIds(n, opts) {
    checkCount(n);
    this.checkOpen();
    if (this.ids && n <= Math.floor(this.bufferCfg.snowflake / 2)) return this.out(await this.ids.take(n, deadline(opts)));
    return this.out((await this.get("/v1/snowflake/next", { count: n }, opts)).ids.map(BigInt));
  }

  /**
   * One Snowflake ID as the server writes it: a masked text from a server that masks Snowflake IDs, else the
   * decimal. Use it, not nextId, against a masking server, which refuses the ranges nextId's buffer reads. With
   * buffer.snowflake set it comes from a buffer of texts (apart from nextId's), else it is one request.
   */
  async nextText(opts) {
    return (await this.nextTexts(1, opts))[0];
  }

  /** n Snowflake IDs as nextText writes them: from the buffer of texts when n is at most half a batch, else one request. */
  async nextTexts(n, opts) {
    checkCount(n);
    this.checkOpen();
    if (this.texts && n <= Math.floor(this.bufferCfg.snowflake / 2)) return this.texts.take(n, deadline(opts));
    return this.textBatch("/v1/snowflake/next", "", n, opts);
  }

  /** n Snowflake IDs as "uuid7", "typeid" (with prefix) or "ulid" texts, in issue order. One request. */
  async nextUuids(n, format, prefix = "", opts) {
    checkCount(n);
    if (!UUID_FORMATS.includes(format)) throw new InvalidArgument(`format ${JSON.stringify(format)}: want one of ${UUID_FORMATS.join(", ")}`);
    if (prefix && format !== "typeid") throw new InvalidArgument(`prefix ${JSON.stringify(prefix)}: only a typeid has one`);
    const q = { count: n, format };
    if (prefix) q.prefix = prefix;
    return (await this.get("/v1/snowflake/next", q, opts)).ids;
  }

  /** The next ID of a segment tag: from its buffer when buffer.segment is set, else a request. */
  async nextSegment(tag, opts) {
    return (await this.nextSegmentIds(tag, 1, opts))[0];
  }

  /** n IDs of a segment tag: from its buffer when n is at most half a batch, else one request. */
  async nextSegmentIds(tag, n, opts) {
    checkCount(n);
    const path = tagPath(tag);
    this.checkOpen();
    if (this.bufferCfg.segment && n <= Math.floor(this.bufferCfg.segment / 2)) return this.out(await this.segmentBuffer(tag, path).take(n, deadline(opts)));
    const ans = await this.get(path, { count: n }, opts);
    if (ans.series) throw new InvalidArgument(`tag ${JSON.stringify(tag)} is a series: it hands out numbers (nextNumbers), not IDs`);
    return this.out(ans.ids.map(BigInt));
  }

  /** The next ID of a segment tag as the server writes it (a masked text when it masks the tag): from the tag's buffer of texts when buffer.segment is set, else one request. */
  async nextSegmentText(tag, opts) {
    return (await this.nextSegmentTexts(tag, 1, opts))[0];
  }

  /** n IDs of a segment tag as nextSegmentText writes them: from its buffer of texts when n is at most half a batch and buffer.segment is set, else one request. */
  async nextSegmentTexts(tag, n, opts) {
    checkCount(n);
    const path = tagPath(tag);
    this.checkOpen();
    if (this.bufferCfg.segment && n <= Math.floor(this.bufferCfg.segment / 2)) return this.segmentBuffer(tag, path, true).take(n, deadline(opts));
    return this.textBatch(path, tag, n, opts);
  }

  /**
   * A whole segment of tag for this client alone, as Didi Tinyid's client takes one (GET
   * /tinyid/id/nextSegmentId): the caller then hands out its IDs itself, with no request per ID. A segment is the
   * tag's configured step (its share of it, with several databases); the IDs the caller does not use are lost (a
   * gap, never a duplicate), and no other client or server ever hands them out. The token, when the server needs
   * one, is config.token (a flakeid token, or one of Tinyid's tiny_id_token). An unknown tag throws NotFound; a
   * store that is down moves the call to the next endpoint. It works against a Tinyid server too, whose codes 5
   * and 6 read as PermissionDenied and Unavailable.
   */
  async takeSegment(tag, opts) {
    tagPath(tag); // the same rule for a tag as everywhere
    const check = (e, headers, a) => {
      const failed = tinyidFailure(e, headers, a);
      if (failed) return failed;
      try {
        segmentOf(tag, a.data);
        return null;
      } catch (err) {
        return apiError(502, "unavailable", err.message, e.base, 0); // a bad answer: the next endpoint may give a good one
      }
    };
    const { answer } = await this.call("GET", "/tinyid/id/nextSegmentId", { bizType: tag }, undefined, opts, check);
    return segmentOf(tag, answer.data, this.bigint);
  }

  /** The next number of a series tag (ORD-20261128-000123): one request, never buffered. */
  async nextNumber(tag, opts) {
    return (await this.nextNumbers(tag, 1, opts))[0];
  }

  /** n numbers of a series tag, in the order the server issued them. */
  async nextNumbers(tag, n, opts) {
    checkCount(n);
    const ans = await this.get(tagPath(tag), { count: n }, opts);
    if (!ans.series) throw new InvalidArgument(`tag ${JSON.stringify(tag)} is not a series: it hands out IDs, not numbers`);
    return ans.ids;
  }

  /** The fields of an ID (decimal, a text form, or a masked text); as is "masked" or "plain" to settle a text that reads both ways. */
  async decode(id, as = "", opts) {
    if (!["", "masked", "plain"].includes(as)) throw new InvalidArgument(`as ${JSON.stringify(as)}: want "masked", "plain" or ""`);
    const text = String(id);
    if (!text) throw new InvalidArgument("decode: an empty ID");
    const a = await this.get(`/v1/decode/${encodeURIComponent(text)}`, as ? { as } : {}, opts);
    return {
      id: this.out([BigInt(a.id)])[0], time: new Date(a.time), tick: this.out([BigInt(a.tick)])[0], datacenter: a.datacenter, worker: a.worker,
      sequence: a.sequence, masked: a.masked ?? "", keyId: a.key_id ?? 0, form: a.form ?? "", uuid: a.uuid ?? "", prefix: a.prefix ?? "",
    };
  }

  /** The smallest and largest Snowflake IDs whose time lies in [start, end). */
  async bounds(start = "", end = "", opts) {
    const q = {};
    if (start) q.from = start;
    if (end) q.to = end;
    const a = await this.get("/v1/snowflake/bounds", q, opts);
    const [min, max] = this.out([BigInt(a.min), BigInt(a.max)]);
    return { min, max, start: new Date(a.from), end: new Date(a.to), layout: a.layout ?? "", note: a.note ?? "" };
  }

  // The machinery.

  out(ids) {
    return this.bigint ? ids : ids.map((i) => i.toString());
  }

  checkOpen() {
    if (this.closed) throw new Closed("the client is closed");
  }

  /** The tag's buffer of IDs, or of texts, created on first use. */
  segmentBuffer(tag, path, texts = false) {
    const home = texts ? this.segmentTexts : this.segments;
    let b = home.get(tag);
    if (!b) {
      const batch = this.bufferCfg.segment;
      const fetch = texts ? async () => [textRun(await this.textBatch(path, tag, batch))] : () => this.ranges(path, batch);
      b = new IDBuffer(fetch, batch, this.bufferCfg.lowWater || DEFAULT_LOW_WATER, () => this.retryPause());
      home.set(tag, b);
    }
    return b;
  }

  /** n IDs of tag (Snowflake IDs when tag is "") as the server wrote them, with one request; a series' numbers, or an answer of another count, are refused. */
  async textBatch(path, tag, n, opts) {
    const a = await this.get(path, { count: n }, opts);
    if (a.series) throw new InvalidArgument(`tag ${JSON.stringify(tag)} is a series: it hands out numbers (nextNumbers), not IDs`);
    const ids = (a.ids ?? []).map(String);
    if (ids.length !== n || ids.some((t) => !t)) throw new Unavailable(`an answer of ${ids.length} IDs, some maybe empty, to a request for ${n}`);
    return ids;
  }

  async ranges(path, count) {
    const a = await this.get(path, { count, format: "ranges" }, undefined);
    return a.ranges.map((r) => ({ next: BigInt(r.first), left: Number(r.count), stride: BigInt(r.stride ?? 1) }));
  }

  retryPause() {
    const soonest = Math.min(...this.endpoints.map((e) => e.downUntil)) - Date.now();
    return Math.min(this.backoffMax, Math.max(this.backoffMin, soonest));
  }

  order() {
    const now = Date.now(), n = this.endpoints.length;
    const ring = Array.from({ length: n }, (_, i) => this.endpoints[(this.preferred + i) % n]);
    return [...ring.filter((e) => e.downUntil <= now), ...ring.filter((e) => e.downUntil > now).sort((a, b) => a.downUntil - b.downUntil)];
  }

  failed(e, retryAfter) {
    const d = Math.min(this.backoffMax, this.backoffMin * 2 ** Math.min(e.failures, 30));
    e.failures++;
    e.downUntil = Date.now() + Math.max(jitter(d), retryAfter);
  }

  async get(path, query, opts) {
    const { e, answer } = await this.call("GET", path, query, undefined, opts);
    if (path === "/v1/snowflake/next") await this.vet(e);
    return answer;
  }

  /**
   * Checks endpoint e, which just handed out Snowflake IDs, against the
   * other endpoints, once (see Client); throws Overlap, and keeps throwing
   * it, when two can issue the same IDs.
   */
  vet(e) {
    if (this.endpoints.length < 2) return Promise.resolve();
    const run = this.vetQueue.then(() => this.vetOnce(e));
    this.vetQueue = run.catch(() => {});
    return run;
  }

  async vetOnce(e) {
    if (this.overlap) throw this.overlap;
    if (this.vetted.has(e)) return;
    const [mine, final] = await this.status(e);
    if (!mine) {
      if (final) this.vetted.add(e); // a server that does not tell (no /v1/status, or not to this token)
      return; // cannot tell now: check again at its next answer
    }
    for (const o of this.endpoints) {
      if (o === e) continue;
      let [theirs] = await this.status(o);
      if (!theirs || !overlaps(mine, theirs)) continue;
      // A lease may have moved between the two reads: look again.
      const [again] = await this.status(e);
      [theirs] = await this.status(o);
      if (again && theirs && overlaps(again, theirs)) {
        const why = again.layout !== theirs.layout ? "they use different layouts" : "both hold the same worker id";
        this.overlap = new Overlap(`endpoints can issue the same IDs: ${e.base} issues from ${space(again)}, and ${o.base} from ${space(theirs)}: ${why}, ` +
          "so they share no coordinator. Point both at one coordinator (--coordinator), or give each its own --datacenter");
        throw this.overlap;
      }
    }
    this.vetted.add(e);
  }

  /** Endpoint e's /v1/status, read once, or null: [status, whether asking again will not help (a 4xx other than 408 and 429)]. */
  async status(e) {
    try {
      const a = await this.once(e, "GET", "/v1/status");
      return [a && typeof a === "object" && a.layout ? a : null, false];
    } catch (err) {
      return [null, isAPIError(err) && err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 429];
    }
  }

  /** One request to endpoint e, no failover: the answer's JSON, or the error (Unavailable for a network error). */
  async once(e, method, path) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(new Error(`no answer within ${this.timeout} ms`)), this.timeout);
    let status, headers, body;
    try {
      const res = await this.fetch(e.base + path, { method, headers: this.headers, signal: ctl.signal });
      status = res.status;
      headers = res.headers;
      body = await res.text();
    } catch (err) {
      throw new Unavailable(`${e.base}: ${ctl.signal.aborted ? ctl.signal.reason.message : netMessage(err)}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
    if (status < 200 || status > 299) throw errorAnswer(e, status, headers, body);
    try {
      return JSON.parse(body);
    } catch (err) {
      throw new Unavailable(`${e.base}: an answer that is not JSON: ${body.slice(0, 200)}`, { cause: err });
    }
  }

  /**
   * Sends method path?query (with body, JSON) to one endpoint after another (see Client): {e, answer, sent}.
   * check, when given, reads a 2xx answer's headers and JSON for a failure told in them (Tinyid's paths answer
   * 200 with a code of their own): the API error it returns is taken as that status's answer.
   */
  async call(method, path, query, data, opts, check) {
    this.checkOpen();
    const end = deadline(opts);
    const qs = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)])).toString();
    const target = path + (qs ? `?${qs}` : "");
    let attempts = 0, rounds = 0, last = null;
    for (;;) {
      for (const e of this.order()) {
        const now = Date.now();
        if (attempts >= this.maxAttempts || (end !== undefined && now >= end)) {
          const why = attempts >= this.maxAttempts ? `${attempts} attempts` : "the call's timeout";
          throw new Unavailable(`no endpoint answered ${path} within ${why}: ${last?.message}`, { cause: last });
        }
        attempts++;
        const per = end === undefined ? this.timeout : Math.max(1, Math.min(this.timeout, end - now));
        const ctl = new AbortController();
        const timer = setTimeout(() => ctl.abort(new Error(`no answer within ${per} ms`)), per);
        let status, headers, body;
        const sent = monoUs();
        try {
          const init = { method, headers: this.headers, signal: ctl.signal };
          if (data !== undefined) Object.assign(init, { body: data, headers: { ...this.headers, "Content-Type": "application/json" } });
          const res = await this.fetch(e.base + target, init);
          status = res.status;
          headers = res.headers;
          body = await res.text();
        } catch (err) {
          this.failed(e, 0);
          last = new Unavailable(`${e.base}: ${ctl.signal.aborted ? ctl.signal.reason.message : netMessage(err)}`, { cause: err });
          continue;
        } finally {
          clearTimeout(timer);
        }
        let err;
        if (status >= 200 && status < 300) {
          let answer;
          try {
            answer = JSON.parse(body);
          } catch (err) {
            throw new Unavailable(`${e.base}: an answer that is not JSON: ${body.slice(0, 200)}`, { cause: err });
          }
          err = check?.(e, headers, answer);
          if (!err) {
            e.failures = 0;
            e.downUntil = 0;
            this.preferred = this.endpoints.indexOf(e);
            return { e, answer, sent };
          }
          status = err.status;
        } else {
          err = errorAnswer(e, status, headers, body);
        }
        if (status === 408 || status === 429 || status >= 500) {
          this.failed(e, err.retryAfter);
          last = err;
          continue;
        }
        throw err;
      }
      const d = Math.min(this.backoffMax, this.backoffMin * 2 ** Math.min(rounds, 30));
      rounds++;
      const pause = Math.min(this.backoffMax, Math.max(jitter(d), this.retryPause()));
      if (attempts >= this.maxAttempts || (end !== undefined && Date.now() + pause >= end)) {
        throw new Unavailable(`no endpoint answered ${path} (${attempts} attempts): ${last?.message}`, { cause: last });
      }
      await sleep(pause);
    }
  }
}

/** A buffer's run of texts. */
const textRun = (texts) => ({ texts, at: 0, left: texts.length });

/** The header in which flakeid gives, on a failed answer of Tinyid's paths, the code its own API would answer. */
const TINYID_CODE_HEADER = "X-Flakeid-Error-Code";
const CODE_STATUS = { invalid_argument: 400, unauthenticated: 401, permission_denied: 403, not_found: 404, unavailable: 503, resource_exhausted: 507, internal: 500 };

/**
 * The API error of a failed answer of Tinyid's paths (HTTP 200, code not 200), or null: by flakeid's code when
 * the server gave one, else by Tinyid's (5: the token is refused; anything else: the server failed).
 */
function tinyidFailure(e, headers, a) {
  if (a?.code === 200 && a?.data != null) return null;
  let code = headers.get(TINYID_CODE_HEADER) ?? "";
  let status = CODE_STATUS[code] ?? 0;
  if (!status) [status, code] = a?.code === 5 ? [403, "permission_denied"] : [503, "unavailable"];
  return apiError(status, code, `${a?.message ?? ""} (Tinyid code ${a?.code})`, e.base, 0);
}

/** The Segment of a Tinyid segment answer's data, checked to make a run of IDs (else Unavailable). */
function segmentOf(tag, d, bigint = false) {
  let cur, last, delta, rem;
  try {
    [cur, last, delta, rem] = ["currentId", "maxId", "delta", "remainder"].map((k) => BigInt(d[k]));
  } catch (err) {
    throw new Unavailable(`a segment of ${JSON.stringify(tag)} without currentId, maxId, delta and remainder: ${JSON.stringify(d)}`, { cause: err });
  }
  const first = cur + delta;
  if (delta < 1n || rem < 0n || rem >= delta || first > last || (last - first) % delta !== 0n || first % delta !== rem) {
    throw new Unavailable(`a segment of ${JSON.stringify(tag)}: currentId ${cur}, maxId ${last}, delta ${delta}, remainder ${rem} do not make a run of IDs`);
  }
  return new Segment(tag, first, last, delta, bigint);
}

/**
 * A whole segment of a tag for one client alone (Client.takeSegment): the IDs first, first + stride, …, last
 * (count of them), as decimal strings, or bigint when the client's config asks for it. stride is above 1 when
 * the tag is served from several databases, each with its share of the IDs.
 */
export class Segment {
  constructor(tag, first, last, stride, bigint = false) {
    const out = (v) => (bigint ? v : v.toString());
    this.tag = tag;
    this.first = out(first);
    this.last = out(last);
    this.stride = Number(stride);
    this.count = Number((last - first) / stride + 1n);
    this.bigint = bigint;
  }

  /** The segment's IDs in increasing order. */
  *[Symbol.iterator]() {
    const last = BigInt(this.last), stride = BigInt(this.stride);
    for (let id = BigInt(this.first); id <= last; id += stride) yield this.bigint ? id : id.toString();
  }
}

/** The error of a non-2xx answer. */
/** A network error's message with its cause's (fetch's own says only "fetch failed"). */
const netMessage = (err) => (err?.cause?.message ? `${err.message}: ${err.cause.message}` : String(err?.message ?? err));

/** Whether two servers issuing from the spaces a and b (their /v1/status) at the same time can issue the same IDs. */
function overlaps(a, b) {
  if (!a.lease_held || !b.lease_held) return false; // one issues nothing now
  return a.layout !== b.layout || (a.datacenter_id === b.datacenter_id && a.worker_id === b.worker_id);
}

const space = (s) => `datacenter ${s.datacenter_id}, worker ${s.worker_id} of the layout ${s.layout}`;

function errorAnswer(e, status, headers, body) {
  let code = "", message = body.slice(0, 500).trim();
  try {
    const j = JSON.parse(body).error;
    if (j) (code = String(j.code ?? "")), (message = String(j.message ?? ""));
  } catch {
    // not JSON: the status says it
  }
  const ra = Number(headers.get("Retry-After"));
  return apiError(status, code, message, e.base, Number.isFinite(ra) && ra > 0 ? ra * 1000 : 0);
}

function deadline(opts) {
  const t = opts?.timeout;
  if (t === undefined || t === null) return undefined;
  if (typeof t !== "number" || !(t > 0)) throw new InvalidArgument(`timeout ${t}: want a positive number of milliseconds`);
  return Date.now() + t;
}

/** "js/<pid>" in Node.js, "js/browser" elsewhere. */
function defaultOwner() {
  const pid = globalThis.process?.pid;
  return pid ? `js/${pid}` : "js/browser";
}

/** The monotonic clock, in microseconds (performance.now: Node.js and browsers). */
const monoUs = () => Math.floor(performance.now() * 1000);

/** One lease's answer, and the monotonic time its clock starts at. */
function readLease(a, e, baseUs) {
  const lay = a?.layout ?? {};
  const [tb, db, wb, sb, unit] = [lay.time_bits, lay.datacenter_bits, lay.worker_bits, lay.sequence_bits, lay.time_unit_us];
  const ints = [a?.datacenter, a?.worker, tb, db, wb, sb, unit, a?.first_tick, a?.end_tick, a?.now_us, a?.renew_every_ms, a?.ttl_ms];
  if (typeof a?.lease !== "string" || !(a.lease.length > 0 && a.lease.length <= 64) || !ints.every(Number.isSafeInteger)) {
    throw new Error(`a lease that is not one: ${JSON.stringify(a).slice(0, 300)}`);
  }
  if (tb < 1 || Math.min(db, wb, sb) < 0 || tb + db + wb + sb > 63) throw new Error(`a layout of ${tb}+${db}+${wb}+${sb} bits`);
  if (a.datacenter < 0 || a.datacenter >= 2 ** db || a.worker < 0 || a.worker >= 2 ** wb) throw new Error(`datacenter ${a.datacenter}, worker ${a.worker} outside the layout`);
  if (unit < 1 || a.first_tick < 0 || a.end_tick < a.first_tick || a.end_tick > 2 ** tb || a.now_us < 0) {
    throw new Error(`ticks [${a.first_tick}, ${a.end_tick}) of ${unit} µs at ${a.now_us} µs`);
  }
  if (a.renew_every_ms < 1 || a.ttl_ms < a.renew_every_ms) throw new Error(`renewals every ${a.renew_every_ms} ms with a TTL of ${a.ttl_ms} ms`);
  return {
    name: a.lease, e, datacenter: a.datacenter, worker: a.worker, unitUs: unit, first: a.first_tick, end: a.end_tick,
    nowUs: a.now_us, baseUs, renewEvery: a.renew_every_ms, ttl: a.ttl_ms,
    tShift: BigInt(db + wb + sb), node: (BigInt(a.datacenter) << BigInt(wb + sb)) | (BigInt(a.worker) << BigInt(sb)), maxSeq: 2 ** sb - 1,
  };
}

/**
 * Makes Snowflake IDs in this process under a worker-id lease a server
 * holds for it: no request per ID, and the guarantees of a server's own
 * generator. Create it with Client.localGenerator.
 *
 * The server leases the worker id from its coordinator on this process's
 * behalf, with the reservation, high-water mark and fencing of its own
 * lease, and renews it while this generator renews (every renew_every_ms,
 * on a timer that does not keep Node.js alive). IDs are issued only in the
 * ticks [first_tick, end_tick) of the last answer, the time read as the
 * server's clock in that answer (when the request arrived) plus the time
 * since the request was sent, by performance.now(),
 * before every ID: a process paused (SIGSTOP, a long GC, a frozen tab) or cut
 * off past its reservation issues nothing until a renewal comes, and a step
 * of the wall clock is not seen. Whoever holds the worker id next — after a
 * kill -9, a lost lease, a coordinator that lost its state — starts past
 * every end_tick a renewal reported, so none of these costs a duplicate. A
 * lease that ends (not renewed within its TTL, lost, its server gone) is
 * replaced by a new one from any endpoint while the old reservation lasts.
 * IDs increase within a lease; a new lease may bring another worker id.
 */
export class LocalGenerator {
  constructor(client, owner) {
    this.client = client;
    this.owner = owner;
    this.lease = null;
    this.last = -1; // the last tick issued under lease
    this.seq = 0;
    this.err = null; // why the last renewal or acquisition failed
    this.closed = false;
    this.timer = null;
    this.failures = 0;
    this.waiters = []; // resolved when the lease changes or grows
  }

  /** The [datacenter, worker] pair of the lease IDs are issued under. */
  get worker() {
    return [this.lease.datacenter, this.lease.worker];
  }

  /**
   * The next Snowflake ID (a decimal string, or a bigint with the client's
   * bigint option). It waits while the lease may not issue yet (its first
   * tick is ahead of the clock), while a tick's sequence is used up (for
   * the next tick), and while the reservation is used up (for a renewal or
   * a new lease) — as long as opts.timeout (milliseconds; absent: as long as
   * it takes) allows, then throws Unavailable with the reason. After close it
   * throws Closed.
   */
  async nextId(opts) {
    let end;
    for (;;) {
      if (this.closed) throw new Closed("the local generator is closed");
      const l = this.lease;
      const nowUs = l.nowUs + monoUs() - l.baseUs;
      const now = Math.floor(nowUs / l.unitUs);
      let tick = Math.max(now, l.first), seq = 0;
      if (tick <= this.last) {
        if (this.seq < l.maxSeq) (tick = this.last), (seq = this.seq + 1);
        else tick = this.last + 1;
      }
      if (tick < l.end && tick <= now) {
        this.last = tick;
        this.seq = seq;
        const id = (BigInt(tick) << l.tShift) | l.node | BigInt(seq);
        return this.client.bigint ? id : id.toString();
      }
      end ??= deadline(opts);
      const left = end === undefined ? undefined : end - Date.now();
      if (tick >= l.end) {
        if (left !== undefined && left <= 0) {
          const why = this.err ? this.err.message : "no renewal came in time";
          throw new Unavailable(`the lease of worker ${l.datacenter}/${l.worker} has issued its whole reservation (to tick ${l.end}), and ${why}`, { cause: this.err ?? undefined });
        }
        await new Promise((resolve) => {
          const t = left === undefined ? null : setTimeout(resolve, left);
          this.waiters.push(() => {
            if (t) clearTimeout(t);
            resolve();
          });
        });
        continue;
      }
      const waitMs = (tick * l.unitUs - nowUs) / 1000;
      if (left !== undefined && waitMs > left) throw new Unavailable(`the next tick the lease may issue in starts in ${waitMs} ms, after the timeout`);
      // A wait for the next tick, of a millisecond or less, yields to the
      // event loop (setImmediate) rather than sleep on a timer, whose
      // wake-up comes a millisecond late or more.
      if (waitMs <= 2 && typeof setImmediate === "function") await new Promise((r) => setImmediate(r));
      else await sleep(waitMs);
    }
  }

  /** Stops the renewals and releases the lease (its server stores the reservation). Later nextId calls throw Closed. Idempotent. */
  close() {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    this.wake();
    this.client.generators.delete(this);
    if (this.lease) this.release(this.lease);
  }

  // The machinery.

  wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  async acquire(opts) {
    const { e, answer, sent } = await this.client.call("POST", "/v1/leases", {}, JSON.stringify({ owner: this.owner }), opts);
    // The server reads its clock (now_us) when the request arrives, no
    // sooner than it was sent: from the sending, the lease's clock is never
    // behind the server's, however long the answer took — a process paused
    // before it read the answer finds its reservation run out, not a stale
    // clock.
    let lease;
    try {
      lease = readLease(answer, e, sent);
    } catch (err) {
      if (typeof answer?.lease === "string") this.release({ e, name: answer.lease });
      throw new Unavailable(`${e.base}: a bad lease: ${err.message}`, { cause: err });
    }
    try {
      await this.client.vet(e); // its endpoint's ID space against the others' (Overlap)
    } catch (err) {
      this.release(lease);
      throw err;
    }
    return lease;
  }

  swap(next) {
    if (next.name === this.lease.name) next.end = Math.max(next.end, this.lease.end);
    else (this.last = -1), (this.seq = 0);
    this.lease = next;
    this.err = null;
    this.wake();
  }

  schedule(ms) {
    if (this.closed) return;
    this.timer = setTimeout(() => this.renew(), ms);
    this.timer.unref?.();
  }

  async renew() {
    const l = this.lease;
    const sent = monoUs();
    let err;
    try {
      const a = await this.client.once(l.e, "POST", `/v1/leases/${encodeURIComponent(l.name)}/renew`);
      let next;
      try {
        next = readLease(a, l.e, sent);
      } catch (bad) {
        throw new Unavailable(`${l.e.base}: a bad lease: ${bad.message}`, { cause: bad });
      }
      if (next.name !== l.name || next.worker !== l.worker || next.datacenter !== l.datacenter) throw new Unavailable(`${l.e.base}: a renewal of lease ${l.name} answered for ${next.name}`);
      if (this.closed) return;
      this.swap(next);
      this.failures = 0;
      this.schedule(next.renewEvery);
      return;
    } catch (e) {
      err = e;
    }
    if (this.closed) return;
    this.failures++;
    this.err = err;
    // The lease is gone from its server, or its reservation runs out within
    // a renewal period while its server does not answer: take a new one from
    // any endpoint.
    const gone = err instanceof NotFound;
    const leftMs = (l.end * l.unitUs - (l.nowUs + monoUs() - l.baseUs)) / 1000;
    if (gone || leftMs <= l.renewEvery) {
      try {
        const next = await this.acquire(undefined);
        if (this.closed) {
          this.release(next);
          return;
        }
        this.swap(next);
        this.failures = 0;
        if (!gone && next.name !== l.name) this.release(l);
        this.schedule(next.renewEvery);
        return;
      } catch (aerr) {
        this.err = new Unavailable(`renewing: ${err.message}; a new lease: ${aerr.message}`, { cause: aerr });
      }
    }
    const b = Math.min(1000, 50 * 2 ** Math.min(this.failures - 1, 20));
    this.schedule(Math.min(l.renewEvery, jitter(b)));
  }

  /** Frees a lease on its server, best effort: one not released is closed there after its TTL. */
  release(l) {
    this.client.once(l.e, "DELETE", `/v1/leases/${encodeURIComponent(l.name)}`).catch(() => {});
  }
}

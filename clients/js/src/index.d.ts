// Types of the flakeid JavaScript client (src/index.js).

export declare const MAX_COUNT: number;
export declare const DEFAULT_TIMEOUT: number;
export declare const DEFAULT_LOW_WATER: number;
export declare const DEFAULT_BACKOFF_MIN: number;
export declare const DEFAULT_BACKOFF_MAX: number;
export declare const DEFAULT_ENDPOINT: string;

/** The local prefetch buffers. */
export interface BufferConfig {
  /** How many Snowflake IDs one prefetch asks for, 0–MAX_COUNT. Default 0: no buffer. */
  snowflake?: number;
  /** The same for each segment tag (a buffer per tag, on first use). Default 0: none. */
  segment?: number;
  /** The fraction of a batch below which a buffer is refilled, 0–1; 0 means 0.5. */
  lowWater?: number;
}

/** The settings of a Client; an absent or zero field means its default. */
export interface Config {
  /** The servers' base URLs, each once. Required. */
  endpoints: string[];
  /** Sent as "Authorization: Bearer <token>" when set. */
  token?: string;
  /** Milliseconds per attempt, 0–300,000; 0 means 2,000. */
  timeout?: number;
  /** Requests one call may make over all endpoints, 0–1000; 0 means 2 × endpoints, at least 3. */
  maxAttempts?: number;
  /** Milliseconds: an endpoint that failed is passed over for a jittered backoff in [backoffMin, backoffMax]; 0 means 100 and 5,000. */
  backoffMin?: number;
  backoffMax?: number;
  /** The prefetch buffers. Default: none. */
  buffer?: BufferConfig;
  /** IDs as bigint instead of decimal strings. Default false. */
  bigint?: boolean;
  /**
   * The fetch the client sends its requests with. Default: the global fetch. For https endpoints under a
   * private CA, either start Node.js with NODE_EXTRA_CA_CERTS=ca.pem, or give a fetch that trusts it (undici's
   * fetch with a dispatcher of new Agent({ connect: { ca } }), say).
   */
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
}

/** Options of one call. */
export interface CallOptions {
  /** Milliseconds for the whole call; absent: bounded by maxAttempts alone. */
  timeout?: number;
}

export type ID = string | bigint;

/** The fields of a decoded Snowflake ID. */
export interface Parts<T extends ID = ID> {
  id: T;
  time: Date;
  tick: T;
  datacenter: number;
  worker: number;
  sequence: number;
  masked: string;
  keyId: number;
  form: string;
  uuid: string;
  prefix: string;
}

/** The smallest and largest Snowflake IDs whose time lies in [start, end). */
export interface Bounds<T extends ID = ID> {
  min: T;
  max: T;
  start: Date;
  end: Date;
  layout: string;
  note: string;
}

export declare class FlakeidError extends Error {
  /** Set on a server's error answer (see isAPIError). */
  api?: true;
  status?: number;
  code?: string;
  endpoint?: string;
  /** Milliseconds: the answer's Retry-After, 0 when none. */
  retryAfter?: number;
}
export declare class InvalidConfig extends FlakeidError {}
export declare class Unavailable extends FlakeidError {}
export declare class NotFound extends FlakeidError {}
export declare class InvalidArgument extends FlakeidError {}
export declare class Unauthenticated extends FlakeidError {}
export declare class PermissionDenied extends FlakeidError {}
export declare class Closed extends FlakeidError {}
/** Two endpoints can issue the same Snowflake IDs (they share no coordinator); the message names both, and every later Snowflake call throws it too. */
export declare class Overlap extends FlakeidError {}

export declare function isAPIError(err: unknown): err is FlakeidError & { api: true; status: number; code: string; endpoint: string; retryAfter: number };
export declare function defaultConfig(): Config;

/**
 * A whole segment of a tag for one client alone: the IDs first, first + stride, …, last (count of them), as
 * decimal strings, or bigint when the client's config asks for it.
 */
export declare class Segment<T extends ID = ID> implements Iterable<T> {
  readonly tag: string;
  readonly first: T;
  readonly last: T;
  readonly stride: number;
  readonly count: number;
  [Symbol.iterator](): Iterator<T>;
}

export declare class Client {
  constructor(config?: Config);
  close(): void;
  nextId(opts?: CallOptions): Promise<ID>;
  nextIds(n: number, opts?: CallOptions): Promise<ID[]>;
  nextText(opts?: CallOptions): Promise<string>;
  nextTexts(n: number, opts?: CallOptions): Promise<string[]>;
  nextUuids(n: number, format: "uuid7" | "typeid" | "ulid", prefix?: string, opts?: CallOptions): Promise<string[]>;
  nextSegment(tag: string, opts?: CallOptions): Promise<ID>;
  nextSegmentIds(tag: string, n: number, opts?: CallOptions): Promise<ID[]>;
  nextSegmentText(tag: string, opts?: CallOptions): Promise<string>;
  nextSegmentTexts(tag: string, n: number, opts?: CallOptions): Promise<string[]>;
  /** A whole segment of tag for this client alone (Tinyid's nextSegmentId): it hands out the IDs itself. */
  takeSegment(tag: string, opts?: CallOptions): Promise<Segment>;
  nextNumber(tag: string, opts?: CallOptions): Promise<string>;
  nextNumbers(tag: string, n: number, opts?: CallOptions): Promise<string[]>;
  decode(id: ID, as?: "" | "masked" | "plain", opts?: CallOptions): Promise<Parts>;
  bounds(start?: string, end?: string, opts?: CallOptions): Promise<Bounds>;
  /** A generator of Snowflake IDs in this process under a worker-id lease a server holds for it. */
  localGenerator(owner?: string, opts?: CallOptions): Promise<LocalGenerator>;
}

/**
 * Makes Snowflake IDs in this process under a worker-id lease a server holds
 * for it, only inside the reservation it was last told, read by
 * performance.now() before every ID; renews in the background.
 */
export declare class LocalGenerator {
  /** The [datacenter, worker] pair of the lease IDs are issued under. */
  readonly worker: [number, number];
  /** The next Snowflake ID; waits (within opts.timeout) while it may not issue, then throws Unavailable. */
  nextId(opts?: CallOptions): Promise<ID>;
  /** Stops the renewals and releases the lease. Idempotent. */
  close(): void;
}

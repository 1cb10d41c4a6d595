// Tests of the JavaScript client's local generator: against live `flakeid
// serve` processes — with generators in child processes the test pauses
// (SIGSTOP) past their lease and kills (SIGKILL) — and, for the fence's
// arithmetic, against a lease server of the test's own.
// Run from clients/js: node --test test/

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { rmSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import * as flakeid from "../src/index.js";
import { flakeidBinary, serve } from "./server.js";

const src = join(dirname(fileURLToPath(import.meta.url)), "..", "src", "index.js");
let binary = "", buildDir = "";

before(() => {
  [binary, buildDir] = flakeidBinary();
});

after(() => {
  if (buildDir) rmSync(buildDir, { recursive: true, force: true });
});

// decode splits an ID (bigint) into [tick, datacenter, worker, sequence].
function decode(id, db = 5n, wb = 5n, sb = 12n) {
  const v = BigInt(id);
  return [Number(v >> (db + wb + sb)), Number((v >> (wb + sb)) & ((1n << db) - 1n)), Number((v >> sb) & ((1n << wb) - 1n)), Number(v & ((1n << sb) - 1n))];
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A child process: a local generator that prints its IDs, a line per 200,
// until it is killed.
const CHILD = `
const flakeid = await import(process.argv[1]);
const c = new flakeid.Client({ endpoints: [process.argv[2]], timeout: 2000 });
const g = await c.localGenerator(process.argv[3], { timeout: 30000 });
process.stdout.write("ready " + g.worker.join(" ") + "\\n");
for (;;) {
  const ids = [];
  try {
    for (let i = 0; i < 200; i++) ids.push(await g.nextId({ timeout: 200 }));
  } catch (e) {
    if (!(e instanceof flakeid.Unavailable)) throw e;
  }
  if (ids.length) process.stdout.write(ids.join(" ") + "\\n");
  await new Promise((r) => setImmediate(r));
}
`;

// child starts a generator in a process of its own; its IDs collect in ids.
async function child(url, owner) {
  const proc = spawn(process.execPath, ["--input-type=module", "-e", CHILD, src, url, owner], { stdio: ["ignore", "pipe", "inherit"] });
  const ch = { proc, ids: [], worker: null };
  let buf = "";
  await new Promise((resolve, reject) => {
    proc.on("exit", (code) => reject(new Error(`the child exited (${code})`)));
    proc.stdout.on("data", (chunk) => {
      buf += chunk;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).split(" ");
        buf = buf.slice(i + 1);
        if (line[0] === "ready") {
          ch.worker = [Number(line[1]), Number(line[2])];
          resolve();
        } else ch.ids.push(...line);
      }
    });
  });
  ch.kill = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.on("exit", r));
    proc.kill("SIGKILL");
    await exited;
  };
  return ch;
}

describe("local generator, live", () => {
  let server;
  before(async () => {
    server = await serve(binary);
  });
  after(async () => {
    await server?.stop();
  });

  test("IDs unique across generators and the server's own, increasing, near now", async () => {
    const c = new flakeid.Client({ endpoints: [server.url] });
    const gens = [await c.localGenerator("js-a"), await c.localGenerator("js-b")];
    assert.notDeepEqual(gens[0].worker, gens[1].worker);
    const all = [];
    for (const g of gens) {
      const ids = [];
      for (let i = 0; i < 20000; i++) ids.push(await g.nextId());
      for (let i = 1; i < ids.length; i++) assert.ok(BigInt(ids[i - 1]) < BigInt(ids[i]));
      all.push(...ids);
    }
    const served = await c.nextIds(5000);
    all.push(...served);
    assert.equal(new Set(all).size, all.length);
    const own = decode(served[0]).slice(1, 3);
    for (const g of gens) assert.notDeepEqual(g.worker, own);
    const epochMs = 1735689600000; // 2025-01-01, the default layout's epoch
    assert.ok(Math.abs(epochMs + decode(all[0])[0] - Date.now()) < 5000);
    gens[0].close();
    await assert.rejects(gens[0].nextId(), flakeid.Closed);
    c.close(); // closes the other
    await assert.rejects(gens[1].nextId(), flakeid.Closed);
  });

  test("refusals: a bad owner, a masking server", async () => {
    const c = new flakeid.Client({ endpoints: [server.url] });
    await assert.rejects(c.localGenerator("a b"), flakeid.InvalidArgument);
    c.close();
    const masked = await serve(binary, "--mask-key", "000102030405060708090a0b0c0d0e0f", "--mask-snowflake");
    try {
      const m = new flakeid.Client({ endpoints: [masked.url] });
      await assert.rejects(m.localGenerator(), (e) => flakeid.isAPIError(e) && e.code === "failed_precondition");
      m.close();
    } finally {
      await masked.stop();
    }
  });

  test("SIGSTOP past the TTL and kill -9 cost no duplicate", async () => {
    // Two worker ids (the server's own and one more), a 2 s TTL: a
    // generator paused for 4 s loses its lease, and the next process gets
    // the same worker id.
    const srv = await serve(binary, "--worker-bits", "1", "--time-bits", "45", "--lease-ttl", "2s");
    const kids = [];
    try {
      const c = new flakeid.Client({ endpoints: [srv.url] });
      const served = await c.nextIds(1000);
      const a = await child(srv.url, "js-a");
      kids.push(a);
      await sleep(1000);
      a.proc.kill("SIGSTOP");
      const stopped = a.ids.length;
      await sleep(4000);
      const b = await child(srv.url, "js-b");
      kids.push(b);
      assert.deepEqual(b.worker, a.worker);
      a.proc.kill("SIGCONT");
      await sleep(1500);
      await a.kill();
      await b.kill();
      const d = await child(srv.url, "js-c");
      kids.push(d);
      await sleep(3000); // it starts past b's reservation: up to 2 s ahead
      await d.kill();
      served.push(...(await c.nextIds(1000)));
      c.close();
      assert.ok(stopped > 0 && b.ids.length > 0 && d.ids.length > 0, `${stopped} ${b.ids.length} ${d.ids.length}`);
      const every = [...a.ids, ...b.ids, ...d.ids, ...served];
      assert.equal(new Set(every).size, every.length, "a duplicate ID");
      const span = (ids) => ids.reduce(([lo, hi], i) => {
        const t = decode(i, 5n, 1n, 12n)[0];
        return [Math.min(lo, t), Math.max(hi, t)];
      }, [Infinity, -Infinity]);
      assert.ok(span(a.ids)[1] < span(b.ids)[0], "a and b share ticks");
      assert.ok(span(b.ids)[1] < span(d.ids)[0], "b and c share ticks");
    } finally {
      for (const k of kids) {
        k.proc.kill("SIGCONT");
        await k.kill().catch(() => {});
      }
      await srv.stop();
    }
  });
});

// leaseServer speaks the lease protocol: answer(method, path, n) gives the status and JSON body of the n-th request, and optionally how many ms to wait before sending them.
async function leaseServer(answer) {
  const requests = [];
  const srv = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      requests.push([req.method, req.url]);
      const [status, body, delay] = answer(req.method, req.url, requests.length - 1);
      setTimeout(() => {
        res.writeHead(status, { "Content-Type": "application/json" });
        res.end(JSON.stringify(body));
      }, delay ?? 0);
    });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${srv.address().port}`, requests, stop: () => new Promise((r) => { srv.closeAllConnections(); srv.close(r); }) };
}

const lease = (name, worker, first, end, nowUs) => ({
  lease: name, datacenter: 1, worker, layout: { time_bits: 41, datacenter_bits: 5, worker_bits: 5, sequence_bits: 12, time_unit_us: 1000, name: "t" },
  first_tick: first, end_tick: end, now_us: nowUs, renew_every_ms: 50, ttl_ms: 1000,
});
const down = [503, { error: { code: "unavailable", message: "down" } }];

describe("local generator, fence", () => {
  test("nothing at or past end_tick; then a new lease from its first tick", async () => {
    const t0 = 1_000_000;
    let state = "fail";
    const srv = await leaseServer((method, path, n) => {
      if (method === "POST" && path === "/v1/leases") {
        if (n === 0) return [200, lease("a".repeat(32), 3, t0, t0 + 200, t0 * 1000)];
        return state === "fail" ? down : [200, lease("b".repeat(32), 4, t0 + 200, t0 + 100000, (t0 + 300) * 1000)];
      }
      if (method === "POST") return state === "fail" ? down : [404, { error: { code: "not_found", message: "lost" } }];
      return [200, { released: true }];
    });
    try {
      const c = new flakeid.Client({ endpoints: [srv.url], backoffMin: 10, backoffMax: 50, bigint: true });
      const g = await c.localGenerator("fence");
      const ids = [];
      for (;;) {
        try {
          ids.push(await g.nextId({ timeout: 300 }));
        } catch (e) {
          assert.ok(e instanceof flakeid.Unavailable && /whole reservation/.test(e.message), e.message);
          break;
        }
      }
      assert.ok(ids.length > 1000, `${ids.length}`);
      assert.equal(typeof ids[0], "bigint");
      const ticks = ids.map((i) => decode(i)[0]);
      assert.ok(ticks.every((t) => t >= t0 && t < t0 + 200));
      assert.ok(ids.every((i) => decode(i)[1] === 1 && decode(i)[2] === 3));
      assert.equal(new Set(ids).size, ids.length);
      state = "lost";
      const next = await g.nextId({ timeout: 5000 });
      assert.deepEqual(decode(next).slice(1, 3), [1, 4]);
      assert.ok(decode(next)[0] >= t0 + 200);
      g.close();
      c.close();
      await sleep(100);
      assert.ok(srv.requests.some(([m, p]) => m === "DELETE" && p === `/v1/leases/${"b".repeat(32)}`));
    } finally {
      await srv.stop();
    }
  });

  test("an answer read late is not a stale clock", async () => {
    // The server reads its clock (now_us) when the request arrives; its
    // answer comes 1.5 s later, as to a process paused before it read it.
    // The lease's 1 s of ticks has run out by then: the generator must
    // issue nothing on it (its clock starts at the sending, not at the
    // answer's arrival), and takes a new lease.
    const t0 = 1_000_000;
    const srv = await leaseServer((method, path, n) => {
      if (method === "POST" && path === "/v1/leases") {
        if (n === 0) return [200, lease("a".repeat(32), 3, t0, t0 + 1000, t0 * 1000), 1500];
        return [200, lease("b".repeat(32), 4, t0 + 3000, t0 + 100000, (t0 + 3000) * 1000)];
      }
      if (method === "POST") return [404, { error: { code: "not_found", message: "closed: not renewed within its TTL" } }];
      return [200, { released: true }];
    });
    try {
      const c = new flakeid.Client({ endpoints: [srv.url], timeout: 5000, backoffMin: 10, backoffMax: 50, bigint: true });
      const g = await c.localGenerator("late");
      const first = await g.nextId({ timeout: 5000 });
      assert.deepEqual(decode(first).slice(1, 3), [1, 4], "an ID on the lease whose reservation had run out");
      assert.ok(decode(first)[0] >= t0 + 3000);
      c.close();
    } finally {
      await srv.stop();
    }
  });

  test("a bad lease is refused", async () => {
    const srv = await leaseServer((m, p) => [200, p === "/v1/leases" ? lease("a".repeat(32), 40, 1, 2, 1000) : {}]);
    try {
      const c = new flakeid.Client({ endpoints: [srv.url] });
      await assert.rejects(c.localGenerator(), (e) => e instanceof flakeid.Unavailable && /outside the layout/.test(e.message));
      c.close();
    } finally {
      await srv.stop();
    }
  });
});

// Tests of the JavaScript client against a live `flakeid serve` (built from
// this repository, or $FLAKEID_TEST_BIN), and of its failover against small
// HTTP servers of the test's own that fail on purpose.
// Run from clients/js: node --test test/

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import * as flakeid from "../src/index.js";
import { flakeidBinary, serve } from "./server.js";

const TOKEN = "js-client-test-token-0123456789";

let binary = "";
let buildDir = "";
let server, authServer;

// fake is an HTTP server of the test's own: answer(n) gives the status, headers and body of its n-th request.
async function fake(answer) {
  const requests = [];
  const srv = createServer(async (req, res) => {
    requests.push(req.url);
    const [status, headers, body] = await answer(requests.length - 1);
    try {
      res.writeHead(status, { "Content-Type": "application/json", ...headers });
      res.end(body);
    } catch {
      // the client gave up on a slow answer, as it should
    }
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${srv.address().port}`, requests, stop: () => new Promise((r) => { srv.closeAllConnections(); srv.close(r); }) };
}

// idRequests are the requests a fake got for IDs: not the client's reads of
// /v1/status, which check its endpoints against each other.
const idRequests = (f) => f.requests.filter((p) => !p.startsWith("/v1/status"));
const unavailable = (retryAfter) => [503, retryAfter ? { "Retry-After": retryAfter } : {}, '{"error":{"code":"unavailable","message":"no worker-id lease yet"}}'];
const client = (endpoints, extra = {}) => new flakeid.Client({ endpoints: endpoints ?? [server.url], ...extra });

before(async () => {
  [binary, buildDir] = flakeidBinary();
  server = await serve(binary, "--auto-create-tags");
  const tokens = join(mkdtempSync(join(tmpdir(), "flakeid-js-tokens-")), "tokens.json");
  writeFileSync(tokens, JSON.stringify([{ name: "test", token: TOKEN, tags: ["*"], snowflake: true, admin: true }]));
  authServer = await serve(binary, "--tokens-file", tokens, "--auto-create-tags");
  rmSync(dirname(tokens), { recursive: true, force: true });
});

after(async () => {
  await server?.stop();
  await authServer?.stop();
  if (buildDir) rmSync(buildDir, { recursive: true, force: true });
});

describe("live server", () => {
  test("IDs are unique, increasing decimal strings, and decode", async () => {
    const c = client();
    const ids = [...(await c.nextIds(100))];
    for (let i = 0; i < 100; i++) ids.push(await c.nextId());
    assert.equal(new Set(ids).size, 200);
    assert.ok(ids.every((i) => typeof i === "string" && /^\d+$/.test(i)));
    const big = ids.map(BigInt);
    assert.ok(big.every((v, i) => i === 0 || big[i - 1] < v));
    const p = await c.decode(ids[0]);
    assert.equal(p.id, ids[0]);
    assert.ok(Math.abs(Date.now() - p.time.getTime()) < 60_000);
    c.close();
  });

  test("bigint on request", async () => {
    const c = client(undefined, { bigint: true });
    const id = await c.nextId();
    assert.equal(typeof id, "bigint");
    assert.ok(id > 2n ** 53n); // a JS number could not hold it
    assert.equal((await c.decode(id)).id, id);
    c.close();
  });

  test("the buffer hands out unique IDs across refills", async () => {
    const c = client(undefined, { buffer: { snowflake: 1000, lowWater: 0.5 } });
    const ids = [];
    for (let i = 0; i < 5000; i++) ids.push(await c.nextId());
    assert.equal(new Set(ids).size, 5000);
    const big = ids.map(BigInt);
    assert.ok(big.every((v, i) => i === 0 || big[i - 1] < v));
    const more = await c.nextIds(3000); // a request of its own
    assert.equal(new Set([...ids, ...more]).size, 8000);
    c.close();
  });

  test("segment IDs, buffered and not, and series numbers", async () => {
    const c = client(undefined, { buffer: { segment: 100 } });
    const plain = client();
    const a = [];
    for (let i = 0; i < 250; i++) a.push(await c.nextSegment("js-orders"));
    const b = await plain.nextSegmentIds("js-orders", 50);
    assert.equal(new Set([...a, ...b]).size, 300);
    await fetch(`${server.url}/v1/segment/tags`, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ tag: "js-ord", step: 100, period: "day", template: "ORD-{yyyyMMdd}-{seq:6}" }),
    });
    const nums = [...(await plain.nextNumbers("js-ord", 3)), await plain.nextNumber("js-ord")];
    assert.equal(new Set(nums).size, 4);
    assert.ok(nums.every((n) => /^ORD-\d{8}-\d{6}$/.test(n)), nums.join());
    await assert.rejects(plain.nextNumbers("js-not-a-series", 1), flakeid.InvalidArgument);
    await assert.rejects(plain.nextSegmentIds("js-ord", 1), flakeid.InvalidArgument);
    c.close();
    plain.close();
  });

  test("texts, buffered and not, from a masking server and a plain one", async () => {
    // next_id's buffer of ranges is refused by a server that masks its
    // Snowflake IDs; the buffers of texts are not. Every text is handed
    // out once, across refills, and reads back as an ID.
    const masked = await serve(binary, "--mask-key", "000102030405060708090a0b0c0d0e0f", "--mask-snowflake", "--mask-tags", "js-masked", "--auto-create-tags");
    try {
      const c = client([masked.url], { buffer: { snowflake: 100, segment: 50 } });
      const plain = client([masked.url]);
      const texts = [];
      for (let i = 0; i < 350; i++) texts.push(await c.nextText());
      texts.push(...(await c.nextTexts(50)), ...(await plain.nextTexts(20)));
      assert.equal(new Set(texts).size, 420);
      assert.ok(!texts.some((t) => /^\d+$/.test(t)), texts.slice(0, 5).join());
      const ids = [];
      for (const t of [...texts.slice(0, 3), ...texts.slice(340, 343)]) ids.push(BigInt((await c.decode(t, "masked")).id));
      assert.deepEqual(ids, [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      assert.equal((await c.nextTexts(1000)).length, 1000); // more than half a batch: a request of its own
      const refused = await c.nextId().catch((e) => e);
      assert.ok(flakeid.isAPIError(refused), String(refused)); // ranges of a masked space are refused
      const seg = [];
      for (let i = 0; i < 120; i++) seg.push(await c.nextSegmentText("js-masked"));
      seg.push(...(await plain.nextSegmentTexts("js-masked", 30)));
      assert.equal(new Set(seg).size, 150);
      assert.ok(!seg.some((t) => /^\d+$/.test(t)), seg.slice(0, 5).join());
      c.close();
      plain.close();
    } finally {
      await masked.stop();
    }
    const c = client(undefined, { buffer: { snowflake: 100, segment: 40 } });
    const ids = [];
    for (let i = 0; i < 250; i++) ids.push(BigInt(await c.nextText()));
    assert.deepEqual(ids, [...new Set(ids)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    const seg = [];
    for (let i = 0; i < 100; i++) seg.push(await c.nextSegmentText("js-texts"));
    seg.push(...(await c.nextSegmentIds("js-texts", 30)));
    assert.equal(new Set(seg).size, 130);
    await fetch(`${server.url}/v1/segment/tags`, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ tag: "js-text-series", step: 10, period: "day", template: "T-{yyyyMMdd}-{seq:4}" }),
    });
    await assert.rejects(c.nextSegmentText("js-text-series"), flakeid.InvalidArgument); // a series' numbers are not IDs, buffered or not
    await assert.rejects(c.nextSegmentTexts("js-text-series", 1000), flakeid.InvalidArgument);
    c.close();
  });

  test("takeSegment: a whole segment for this client alone", async () => {
    await fetch(`${server.url}/v1/segment/tags`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ tag: "js-take", step: 50 }),
    });
    const c = client(undefined, { buffer: { segment: 20 } });
    const seen = new Set();
    for (let round = 0; round < 10; round++) {
      const seg = await c.takeSegment("js-take");
      assert.deepEqual([seg.tag, seg.stride, seg.count], ["js-take", 1, 50]);
      const ids = [...seg];
      assert.equal(ids.length, 50);
      assert.deepEqual([ids[0], ids[49]], [seg.first, seg.last]);
      const more = [];
      for (let i = 0; i < 7; i++) more.push(await c.nextSegment("js-take"));
      more.push(...(await c.nextSegmentIds("js-take", 30)));
      for (const id of [...ids, ...more]) {
        assert.ok(!seen.has(id), `ID ${id} handed out twice`);
        seen.add(id);
      }
    }
    await assert.rejects(c.takeSegment("bad tag!"), flakeid.InvalidArgument);
    c.close();
    const big = await client(undefined, { bigint: true }).takeSegment("js-take");
    assert.equal(typeof big.first, "bigint");
    assert.equal(typeof [...big][0], "bigint");
    await assert.rejects(client([authServer.url]).takeSegment("js-take"), flakeid.PermissionDenied);
    assert.equal((await client([authServer.url], { token: TOKEN }).takeSegment("js-take-auth")).tag, "js-take-auth");
  });

  test("UUID-shaped texts and bounds", async () => {
    const c = client();
    for (const u of await c.nextUuids(3, "uuid7")) assert.match(u, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    for (const u of await c.nextUuids(2, "typeid", "order")) assert.match(u, /^order_[0-9a-hjkmnp-tv-z]{26}$/);
    const [ulid] = await c.nextUuids(1, "ulid");
    assert.equal((await c.decode(ulid)).form, "ulid");
    await assert.rejects(c.nextUuids(1, "uuid4"), flakeid.InvalidArgument);
    const id = BigInt(await c.nextId());
    const b = await c.bounds("-1h", "+1h");
    assert.ok(BigInt(b.min) <= id && id <= BigInt(b.max));
    const err = await c.bounds("2026-03-02", "2026-03-01").catch((e) => e);
    assert.ok(err instanceof flakeid.InvalidArgument && flakeid.isAPIError(err) && err.status === 400, String(err));
    c.close();
  });

  test("errors tell apart, and tokens", async () => {
    const c = client();
    await assert.rejects(c.nextIds(0), flakeid.InvalidArgument);
    await assert.rejects(c.nextSegment("bad tag!"), flakeid.InvalidArgument);
    const bad = await c.decode("not-an-id").catch((e) => e);
    assert.ok(bad instanceof flakeid.InvalidArgument && bad.endpoint === server.url, String(bad));
    c.close();
    const none = await client([authServer.url]).nextId().catch((e) => e);
    assert.ok(none instanceof flakeid.Unauthenticated && none.status === 401, String(none));
    await assert.rejects(client([authServer.url], { token: "wrong-token-0123456789" }).nextId(), flakeid.Unauthenticated);
    assert.match(await client([authServer.url], { token: TOKEN }).nextId(), /^\d+$/);
  });

  test("closed", async () => {
    const c = client(undefined, { buffer: { snowflake: 100 } });
    await c.nextId();
    c.close();
    c.close();
    await assert.rejects(c.nextId(), flakeid.Closed);
    await assert.rejects(c.nextIds(1000), flakeid.Closed);
  });
});

describe("TLS and a fetch of one's own", () => {
  test("a private CA: trusted with NODE_EXTRA_CA_CERTS, refused without, naming the certificate", async () => {
    const dir = mkdtempSync(join(tmpdir(), "flakeid-js-tls-"));
    const cert = join(dir, "cert.pem"), key = join(dir, "key.pem");
    execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
      "-days", "1", "-subj", "/CN=flakeid test", "-addext", "subjectAltName=IP:127.0.0.1"], { stdio: "ignore" });
    const srv = await serve(binary, "--tls-cert", cert, "--tls-key", key);
    try {
      const url = srv.url.replace(/^http:/, "https:");
      // A process of its own: Node.js reads NODE_EXTRA_CA_CERTS at start.
      const script = `const f = await import(process.argv[1]); const c = new f.Client({ endpoints: [process.argv[2]], maxAttempts: 50, backoffMax: 200 });
        try { console.log("id", await c.nextId({ timeout: 30000 })); } catch (e) { console.log(e.constructor.name, e.message); } finally { c.close(); }`;
      const run = (env) => execFileSync(process.execPath, ["--input-type=module", "-e", script, new URL("../src/index.js", import.meta.url).href, url],
        { env: { ...process.env, ...env }, encoding: "utf8" });
      assert.match(run({ NODE_EXTRA_CA_CERTS: cert }), /^id \d+/);
      const refused = run({ NODE_EXTRA_CA_CERTS: "" });
      assert.match(refused, /^Unavailable .*certificate/, refused);
    } finally {
      await srv.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the client sends through the fetch of its config", async () => {
    const seen = [];
    const c = client(undefined, { fetch: (url, init) => (seen.push(new URL(url).pathname), fetch(url, init)) });
    assert.ok(BigInt(await c.nextId()) > 0n);
    assert.deepEqual(seen, ["/v1/snowflake/next"]);
    c.close();
    assert.throws(() => client(undefined, { fetch: "yes" }), (e) => e instanceof flakeid.InvalidConfig && /fetch/.test(e.message));
  });
});

describe("overlaps", () => {
  test("endpoints that can issue the same IDs are refused", async () => {
    // Two servers on their own file coordinators both hold worker 0 of
    // datacenter 0: a client given both must refuse their Snowflake IDs
    // (plain, buffered, texts, a local generator's lease), naming both; one
    // on another datacenter is fine.
    const [a, b, other] = await Promise.all([serve(binary), serve(binary), serve(binary, "--datacenter", "1")]);
    try {
      for (const snowflake of [0, 1000]) {
        const c = client([a.url, b.url], { buffer: { snowflake } });
        await assert.rejects(c.nextId({ timeout: 10000 }), (e) => {
          assert.ok(e instanceof flakeid.Overlap, e.message);
          assert.ok(e.message.includes(a.url) && e.message.includes(b.url) && e.message.includes("both hold the same worker id"), e.message);
          return true;
        });
        await assert.rejects(c.nextTexts(2), flakeid.Overlap); // and every later Snowflake call
        c.close();
      }
      const c = client([b.url, a.url]);
      await assert.rejects(c.localGenerator("overlap"), flakeid.Overlap);
      c.close();
      const ok = client([a.url, other.url]);
      const ids = [...(await ok.nextIds(10)), ...(await ok.nextIds(10))];
      assert.equal(new Set(ids).size, 20);
      const g = await ok.localGenerator("apart");
      assert.ok(BigInt(await g.nextId({ timeout: 10000 })) > 0n);
      ok.close();
    } finally {
      await Promise.all([a.stop(), b.stop(), other.stop()]);
    }
  });
});

describe("failover", () => {
  test("a hanging endpoint is passed over for its backoff", async () => {
    const f = await fake(async () => {
      await new Promise((r) => setTimeout(r, 2000));
      return [200, {}, '{"ids":["1"]}'];
    });
    const c = client([f.url, server.url], { timeout: 500, backoffMin: 5000, backoffMax: 10_000 });
    const start = Date.now();
    assert.ok(BigInt(await c.nextId()) > 1n);
    assert.ok(Date.now() - start >= 450);
    for (let i = 0; i < 20; i++) await c.nextId();
    assert.equal(idRequests(f).length, 1, "the hanging endpoint was asked again within its backoff");
    c.close();
    await f.stop();
  });

  test("a 503 moves on, and its Retry-After is honoured", async () => {
    const f = await fake(() => unavailable("1"));
    const c = client([f.url, server.url], { backoffMin: 10, backoffMax: 50 });
    await c.nextId();
    await c.nextId();
    assert.equal(idRequests(f).length, 1);
    await f.stop();
    const g = await fake((n) => (n === 0 ? unavailable("1") : [200, {}, '{"ids":["42"]}']));
    const one = client([g.url], { backoffMin: 10, backoffMax: 2000 });
    const start = Date.now();
    assert.equal(await one.nextId(), "42");
    assert.ok(Date.now() - start >= 900, `waited ${Date.now() - start} ms for a Retry-After of 1 s`);
    await g.stop();
  });

  test("gives up after maxAttempts and at its timeout; client errors are not retried", async () => {
    const f = await fake(() => unavailable());
    const err = await client([f.url], { maxAttempts: 3, backoffMin: 10, backoffMax: 20 }).nextId().catch((e) => e);
    assert.ok(err instanceof flakeid.Unavailable && flakeid.isAPIError(err.cause), String(err));
    assert.equal(f.requests.length, 3);
    const start = Date.now();
    await assert.rejects(client([f.url], { maxAttempts: 1000, backoffMin: 10, backoffMax: 50 }).nextId({ timeout: 300 }), flakeid.Unavailable);
    assert.ok(Date.now() - start < 3000); // 300 ms, and a pause of at most 50 ms
    await f.stop();
    const g = await fake(() => [404, {}, '{"error":{"code":"not_found","message":"no tag x"}}']);
    const nf = await client([g.url, server.url]).nextSegment("x").catch((e) => e);
    assert.ok(nf instanceof flakeid.NotFound && nf.code === "not_found" && nf.message === "no tag x", String(nf));
    assert.equal(g.requests.length, 1);
    // Through a buffer too, at once despite its timeout.
    await assert.rejects(client([g.url], { buffer: { segment: 10 } }).nextSegment("x", { timeout: 30_000 }), flakeid.NotFound);
    await g.stop();
  });

  test("the buffer of texts asks for a batch at a time", async () => {
    const f = await fake((n) => [200, {}, JSON.stringify({ ids: Array.from({ length: 100 }, (_, i) => `t${n}-${i}`) })]);
    const c = client([f.url], { buffer: { snowflake: 100 } });
    const got = [];
    for (let i = 0; i < 250; i++) got.push(await c.nextText());
    assert.deepEqual(got, Array.from({ length: 250 }, (_, k) => `t${Math.floor(k / 100)}-${k % 100}`));
    assert.ok(idRequests(f).length <= 4 && idRequests(f).every((p) => p.includes("count=100")), idRequests(f).join());
    c.close();
    await f.stop();
  });

  test("takeSegment reads Tinyid's answers", async () => {
    // HTTP 200 and codes of Tinyid's own, and flakeid's header on them:
    // code 6 moves to the next endpoint, code 5 is PermissionDenied at
    // once, not_found NotFound at once, and a segment that is not a run of
    // IDs is not taken.
    const tinyid = (body, headers = {}) => fake(() => [200, headers, body]);
    const good = await tinyid('{"data":{"currentId":100,"loadingId":120,"maxId":200,"delta":2,"remainder":0,"bizType":"test"},"code":200,"message":""}');
    const down = await tinyid('{"data":null,"code":6,"message":"sys error"}');
    const refused = await tinyid('{"data":null,"code":5,"message":"token is error"}');
    const missing = await tinyid('{"data":null,"code":6,"message":"no such tag"}', { "X-Flakeid-Error-Code": "not_found" });
    const broken = await tinyid('{"data":{"currentId":100,"loadingId":120,"maxId":201,"delta":2,"remainder":0},"code":200,"message":""}');
    try {
      const seg = await client([down.url, good.url]).takeSegment("test");
      assert.deepEqual([seg.first, seg.last, seg.stride, seg.count], ["102", "200", 2, 50]);
      assert.deepEqual([...seg].slice(0, 3), ["102", "104", "106"]);
      assert.deepEqual(idRequests(down), ["/tinyid/id/nextSegmentId?bizType=test"]);
      for (const [f, Kind] of [[refused, flakeid.PermissionDenied], [missing, flakeid.NotFound]]) {
        const err = await client([f.url, good.url]).takeSegment("test").catch((e) => e);
        assert.ok(err instanceof Kind && err.endpoint === f.url, String(err));
        assert.equal(idRequests(f).length, 1);
      }
      const err = await client([broken.url], { maxAttempts: 3, backoffMin: 10, backoffMax: 20 }).takeSegment("test").catch((e) => e);
      assert.ok(err instanceof flakeid.Unavailable && /do not make a run of IDs/.test(err.message), String(err));
    } finally {
      for (const f of [good, down, refused, missing, broken]) await f.stop();
    }
  });

  test("the buffer rides out an outage", async () => {
    let up = true;
    const f = await fake((n) => (up ? [200, {}, JSON.stringify({ count: 100, ranges: [{ first: String(1000 * n + 1), count: 100, stride: 1 }] })] : unavailable()));
    const c = client([f.url], { buffer: { snowflake: 100, lowWater: 0.5 }, backoffMin: 10, backoffMax: 50 });
    assert.equal(await c.nextId(), "1");
    up = false;
    const got = [];
    for (let i = 0; i < 99; i++) got.push(await c.nextId());
    assert.deepEqual(got, Array.from({ length: 99 }, (_, i) => String(i + 2)));
    await assert.rejects(c.nextId({ timeout: 200 }), flakeid.Unavailable);
    up = true;
    assert.ok(BigInt(await c.nextId({ timeout: 5000 })) > 100n);
    c.close();
    await f.stop();
  });
});

test("config is validated", () => {
  for (const bad of [{}, { endpoints: ["ftp://x"] }, { endpoints: ["http://a", "http://a/"] }, { endpoints: ["http://a"], timeout: -1 },
    { endpoints: ["http://a"], maxAttempts: 1001 }, { endpoints: ["http://a"], backoffMin: 2, backoffMax: 1 }, { endpoints: ["http://a"], token: "a\nb" },
    { endpoints: ["http://a"], buffer: { lowWater: 2 } }]) {
    assert.throws(() => new flakeid.Client(bad), flakeid.InvalidConfig, JSON.stringify(bad));
  }
  assert.deepEqual(flakeid.defaultConfig().endpoints, [flakeid.DEFAULT_ENDPOINT]);
});

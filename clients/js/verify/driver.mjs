// The driver `flakeid verify --languages js` runs (see
// cmd/flakeid/internal/verify/langs.go); not part of the package.
//
//   driver.mjs caller ATTEMPT_MS CALL_MS BUFFER ENDPOINT...
//       the client with a Snowflake buffer of BUFFER IDs; each line "SEQ" on
//       stdin is one nextId call with a CALL_MS timeout ("SEQ MS": with an MS
//       one), answered on stdout
//       as "SEQ ID" or "SEQ ! CLASS MESSAGE" (CLASS: timeout, unavailable,
//       other).
//   driver.mjs local OWNER RATE ENDPOINT...
//       a local generator leased as OWNER making RATE IDs a second, a batch
//       every 10 ms printed as "UNIX_NS ID ID ..." (the wall clock before the
//       batch), or "! UNIX_NS MESSAGE" for a batch that failed.
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import * as flakeid from "../src/index.js";

const oneLine = (e) => String(e?.message ?? e).replace(/\n/g, " ");

async function caller(attemptMs, callMs, buffer, ...endpoints) {
  const client = new flakeid.Client({ endpoints, timeout: Number(attemptMs), buffer: { snowflake: Number(buffer) } });
  const timeout = Number(callMs);
  const lines = createInterface({ input: process.stdin });
  const pending = new Set();
  for await (const line of lines) {
    const [seq, ms] = line.trim().split(" ");
    if (!seq) continue;
    const p = client.nextId({ timeout: ms ? Number(ms) : timeout }).then(
      (id) => process.stdout.write(`${seq} ${id}\n`),
      (e) => {
        const msg = oneLine(e);
        const cls = e instanceof flakeid.Unavailable ? (/timeout|timed out/.test(msg) ? "timeout" : "unavailable") : "other";
        process.stdout.write(`${seq} ! ${cls} ${msg}\n`);
      },
    );
    pending.add(p);
    p.finally(() => pending.delete(p));
  }
  await Promise.all(pending);
  client.close();
}

// The wall clock in ns, truncated to whole ms: never later than the time.
const wallNs = () => BigInt(Date.now()) * 1000000n;

async function local(owner, rate, ...endpoints) {
  const client = new flakeid.Client({ endpoints, timeout: 5000 });
  let gen;
  while (!gen) {
    // Every worker id may be held for a while: the driver waits, as a service would.
    try {
      gen = await client.localGenerator(owner, { timeout: 60000 });
    } catch (e) {
      if (!(e instanceof flakeid.Unavailable)) throw e;
      process.stdout.write(`! ${wallNs()} ${oneLine(e)}\n`);
      await sleep(500);
    }
  }
  const perBatch = Math.max(1, Math.floor(Number(rate) / 100));
  let next = performance.now();
  for (;;) {
    const ts = wallNs();
    const ids = [];
    let failed = "";
    try {
      for (let i = 0; i < perBatch; i++) ids.push(await gen.nextId({ timeout: 1000 }));
    } catch (e) {
      failed = oneLine(e);
    }
    let out = "";
    if (ids.length) out += `${ts} ${ids.join(" ")}\n`;
    if (failed) out += `! ${ts} ${failed}\n`;
    if (out) process.stdout.write(out);
    next += 10;
    await sleep(Math.max(0, next - performance.now()));
    next = Math.max(next, performance.now() - 10);
  }
}

const [mode, ...args] = process.argv.slice(2);
await { caller, local }[mode](...args);

// IDs per second from one event loop: the local generator's nextId beside
// the uuid package's v7() (a UUIDv7 library, the usual in-process choice in
// JavaScript) and crypto.randomUUID(), interleaved rounds in one run.
//
//   node clients/js/bench/local.mjs http://127.0.0.1:8080 /path/to/node_modules/uuid [seconds per round] [rounds]
//   (uuid from npm: npm install --prefix DIR uuid@11.1.0)

import { Client } from "../src/index.js";
import { createRequire } from "node:module";
import { randomUUID } from "node:crypto";

const [url, uuidDir, secs = "3", rounds = "3"] = process.argv.slice(2);
const { v7 } = createRequire(import.meta.url)(uuidDir);

async function rate(f, seconds) {
  let n = 0;
  const end = performance.now() + seconds * 1000;
  while (performance.now() < end) {
    for (let i = 0; i < 1000; i++) await f();
    n += 1000;
  }
  return n / seconds;
}

const c = new Client({ endpoints: [url] });
const g = await c.localGenerator("bench");
const bigint = new Client({ endpoints: [url], bigint: true });
const gb = await bigint.localGenerator("bench-bigint");
const results = { "localGenerator.nextId (string)": [], "localGenerator.nextId (bigint)": [], "uuid v7()": [], "crypto.randomUUID()": [] };
for (let r = 0; r < Number(rounds); r++) {
  results["localGenerator.nextId (string)"].push(await rate(() => g.nextId(), Number(secs)));
  results["localGenerator.nextId (bigint)"].push(await rate(() => gb.nextId(), Number(secs)));
  results["uuid v7()"].push(await rate(() => v7(), Number(secs)));
  results["crypto.randomUUID()"].push(await rate(() => randomUUID(), Number(secs)));
}
const med = {};
for (const [k, v] of Object.entries(results)) {
  v.sort((a, b) => a - b);
  med[k] = v[Math.floor(v.length / 2)];
  console.log(`${k.padEnd(32)} median ${(med[k] / 1e6).toFixed(3)} M/s  (min ${(v[0] / 1e6).toFixed(3)}, max ${(v[v.length - 1] / 1e6).toFixed(3)})`);
}
console.log(`ratio local (string) / uuid v7: ${(med["localGenerator.nextId (string)"] / med["uuid v7()"]).toFixed(2)}`);
c.close();
bigint.close();

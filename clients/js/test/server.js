// The tests' flakeid servers: a binary built from this repository (or
// $FLAKEID_TEST_BIN), and `flakeid serve` processes on ports the OS picks.

import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

export const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

// flakeidBinary returns [$FLAKEID_TEST_BIN, ""], or [a binary built into a
// temporary directory, that directory].
export function flakeidBinary() {
  if (process.env.FLAKEID_TEST_BIN) return [process.env.FLAKEID_TEST_BIN, ""];
  const dir = mkdtempSync(join(tmpdir(), "flakeid-js-bin-"));
  const binary = join(dir, "flakeid");
  execFileSync("go", ["build", "-o", binary, "./cmd/flakeid"], { cwd: repo, stdio: "inherit" });
  return [binary, dir];
}

// serve starts `flakeid serve` on a port the OS picks, with its own data
// directory, and waits until it is ready — unless it serves HTTPS
// (--tls-cert), whose certificate this process may not trust: its url is
// then https://, and the caller waits.
export async function serve(binary, ...args) {
  const tls = args.includes("--tls-cert");
  const dir = mkdtempSync(join(tmpdir(), "flakeid-js-"));
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("FLAKEID_")));
  const proc = spawn(binary, ["serve", "--listen", "127.0.0.1:0", "--data-dir", dir, ...args], { env, stdio: ["ignore", "ignore", "pipe"] });
  const url = await new Promise((resolve, reject) => {
    let log = "";
    const timer = setTimeout(() => reject(new Error(`flakeid serve did not say where it listens: ${log}`)), 60_000);
    proc.stderr.on("data", (chunk) => {
      log += chunk;
      const m = /msg="flakeid: listening; not ready until a worker id is leased" addr=(\S+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(`${tls ? "https" : "http"}://${m[1]}`);
      }
    });
    proc.on("exit", (code) => reject(new Error(`flakeid serve exited (${code}): ${log}`)));
  });
  for (const end = Date.now() + 60_000; !tls && Date.now() < end; ) {
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) break;
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    stop: async () => {
      const exited = new Promise((r) => proc.on("exit", r));
      proc.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}


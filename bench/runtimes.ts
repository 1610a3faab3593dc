/**
 * Ed25519 inside workerd (the Workers runtime, no node:crypto): `Keys.noble` beside Web Crypto's own Ed25519, sign
 * and verify per second. workerd's clock stands still while code runs, so each figure is timed from outside: the
 * time of a request running `n` operations less that of one running none, median of rounds. Also prints Web
 * Crypto's verdicts on the ed25519-speccheck cases, beside the strict rule `Keys` applies (docs/protocol.md §2).
 */
import { median, report, type Measurement } from "./harness.js"
import { bundle, freePort, startWorkerd } from "../test/runtimes/support.js"

const ROUNDS = 5
const ROUND_MS = 300

/** Median ops/s of `impl`'s `op` inside the worker at `url`. */
const measure = async (url: string, impl: string, op: string): Promise<Measurement> => {
  const timed = async (n: number): Promise<number> => {
    const t0 = performance.now()
    const res = await fetch(`${url}/bench?impl=${impl}&op=${op}&n=${n}`)
    await res.json()
    return performance.now() - t0
  }
  await timed(20)
  // Calibrate n to about ROUND_MS of work.
  let n = 20
  while ((await timed(n)) - (await timed(0)) < ROUND_MS / 4) n *= 4
  const perOp = ((await timed(n)) - (await timed(0))) / n
  n = Math.max(1, Math.round(ROUND_MS / perOp))
  const rates: Array<number> = []
  for (let i = 0; i < ROUNDS; i++) {
    const empty = await timed(0)
    const full = await timed(n)
    rates.push(n / (Math.max(full - empty, 0.001) / 1000))
  }
  return { name: `workerd ${impl === "noble" ? "Keys.noble" : "Web Crypto Ed25519"} ${op}`, opsPerSecond: median(rates) }
}

/** Runs the suite. */
export const run = async (): Promise<void> => {
  const runner = await bundle("test/runtimes/workerd/vectors-worker.ts")
  const port = await freePort()
  const workerd = await startWorkerd(port, [["vectors.js", runner.code]], {}, [])
  try {
    const checks = (await (await fetch(`${workerd.url}/`)).json()) as { webCrypto: { speccheck: ReadonlyArray<unknown> } }
    console.log(`Web Crypto Ed25519 on ed25519-speccheck cases 0–9 in workerd: ${JSON.stringify(checks.webCrypto.speccheck)}`)
    console.log("Keys (strict rule):                                          [false,false,true,true,false,false,false,false,false,false]")
    const webSign = await measure(workerd.url, "webcrypto", "sign")
    const nobleSign = await measure(workerd.url, "noble", "sign")
    const webVerify = await measure(workerd.url, "webcrypto", "verify")
    const nobleVerify = await measure(workerd.url, "noble", "verify")
    report("runtimes", [
      { figure: nobleSign, baseline: webSign },
      { figure: nobleVerify, baseline: webVerify }
    ])
  } finally {
    await workerd.stop()
  }
}

/**
 * HTTP load for the serving benchmarks (bench/http.ts, bench/agent.ts): servers in child processes, a raw-socket
 * keep-alive load generator in this process, and interleaved rounds.
 *
 * - Servers: `spawnServer` forks a module (the suite's own file, usually) with an env that tells it which server to
 *   start; that module calls `serveChild(start)`, which listens, reports its port over IPC and answers "cpu" (its
 *   own CPU time) and "stop". `spawnCommand` starts a program as its users do instead (`node dist/bin/mesh.js agent
 *   …`), waits for the line it prints once it listens, reads its CPU time from /proc and stops it with SIGTERM. On
 *   this 2-core machine the server then has one core and the load generator the other.
 * - Load: `runLoad` is a minimal HTTP/1.1 client on raw sockets (cheaper than node's http client, so it does not
 *   bottleneck before the server): N keep-alive connections to 127.0.0.1, one request in flight on each. Requests
 *   are pre-built Buffers (any method, headers and body), given as an array cycled through or as a function called
 *   once per request sent (for requests that must never repeat, such as signed ones with nonces). It counts 200s
 *   and non-200s, keeps the first non-200 response, and records each request's latency (write to full response).
 * - `measureAll`: every server up at once, a warm-up each, then rounds interleaved (a, b, c, a, b, c, …) so a slow
 *   stretch of a shared machine hits all figures alike. Per server: the median over rounds of requests/s (wall
 *   clock), of requests per second of the server's own CPU time, and of each round's p50 and p99 latency. Any
 *   non-200 fails the run with the first error response printed.
 * - Pinning: where `taskset` exists and there are at least 2 CPUs, this process (the load generator) runs on CPU 0
 *   and every server on CPU 1, so neither steals the other's core; `BENCH_PIN=0` turns it off. What was used is
 *   printed and written with the results.
 * - Truth checks: per server, the CPU time the server spent per request (µs) and how busy it was, and the same for
 *   the generator. A round in which the generator was busier than the server (at ≥ 90% of its core) measured the
 *   generator, not the server: the table says `generator-bound` and the figure is a floor. `bench/wrk.ts` (`npm run
 *   bench -- wrk`) cross-checks the generator against wrk where wrk is installed.
 */
import { fork, spawn, spawnSync, type ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { median, note, saveResult, type Measurement } from "./harness.js"

// Forked servers load TypeScript as the benches do: compiled without kept names, as the package ships (loader.mjs).
const LOADER = new URL("./loader.mjs", import.meta.url).href

// ---------------------------------------------------------------------------------------------------------------
// Pinning.

/** How the generator and the servers were placed on CPUs. */
export interface Pinning {
  readonly mode: "taskset" | "none"
  readonly generatorCpu?: number
  readonly serverCpu?: number
  /** Why there is no pinning, when there is none. */
  readonly reason?: string
}

const hasTaskset = (): boolean => {
  const r = spawnSync("taskset", ["-V"], { stdio: "ignore" })
  return r.error === undefined && r.status === 0
}

/** Pins every thread of `pid` to `cpu`; false when taskset refused. */
const pin = (pid: number, cpu: number): boolean =>
  spawnSync("taskset", ["-a", "-p", "-c", String(cpu), String(pid)], { stdio: "ignore" }).status === 0

let decided: Pinning | undefined

/** Decides the pinning once per process (and pins this process, the generator, to CPU 0), and prints it. */
export const pinning = (): Pinning => {
  if (decided !== undefined) return decided
  const cpus = os.availableParallelism()
  decided = process.env["BENCH_PIN"] === "0"
    ? { mode: "none", reason: "BENCH_PIN=0" }
    : cpus < 2
      ? { mode: "none", reason: `${cpus} CPU` }
      : !hasTaskset()
        ? { mode: "none", reason: "taskset not found" }
        : pin(process.pid, 0)
          ? { mode: "taskset", generatorCpu: 0, serverCpu: 1 }
          : { mode: "none", reason: "taskset -p failed" }
  console.log(
    decided.mode === "taskset"
      ? `(pinning: load generator on CPU ${decided.generatorCpu}, each server on CPU ${decided.serverCpu}, by taskset; nproc ${cpus})`
      : `(pinning: none, ${decided.reason}; nproc ${cpus})`
  )
  note("pinning", decided)
  return decided
}

/** Pre-built requests: cycled through when an array; a function is called once per request sent (its index). */
export type RequestSource = ReadonlyArray<Buffer> | ((i: number) => Buffer)

/** What one `runLoad` saw. */
export interface LoadResult {
  readonly ok: number
  readonly failed: number
  /** The first non-200 response (head and body, truncated), if any. */
  readonly firstError: string | undefined
  /** Per completed request: ms from writing the request to reading the whole response. */
  readonly latenciesMs: Array<number>
}

/** How long and how hard to load. */
export interface LoadOptions {
  /** Stop sending after this many ms (requests in flight are still read). */
  readonly ms: number
  /** Send at most this many requests. */
  readonly cap: number
  /** Keep-alive connections, one request in flight on each; default 32. */
  readonly connections?: number
}

const CRLF2 = Buffer.from("\r\n\r\n")

/**
 * The byte length of the first complete response in `buffer` (head and body), or -1 if more bytes are needed.
 * Bodies are framed by Content-Length or chunked transfer coding (without trailers); neither means no body.
 */
const responseLength = (buffer: Buffer): { readonly total: number; readonly headEnd: number } | undefined => {
  const end = buffer.indexOf(CRLF2)
  if (end < 0) return undefined
  const head = buffer.subarray(0, end).toString("latin1")
  const length = /\r\ncontent-length: *(\d+)/i.exec(head)
  if (length !== null) {
    const total = end + 4 + Number(length[1])
    return buffer.length < total ? undefined : { total, headEnd: end }
  }
  if (!/\r\ntransfer-encoding: *chunked/i.test(head)) return { total: end + 4, headEnd: end }
  let pos = end + 4
  for (;;) {
    const line = buffer.indexOf("\r\n", pos)
    if (line < 0) return undefined
    const size = parseInt(buffer.subarray(pos, line).toString("latin1"), 16)
    if (Number.isNaN(size)) throw new Error(`bad chunk size in response: ${head}`)
    pos = line + 2 + size + 2
    if (buffer.length < pos) return undefined
    if (size === 0) return { total: pos, headEnd: end }
  }
}

/** Loads the server on `port` with `requests` for `options.ms` (or `options.cap` requests), whichever ends first. */
export const runLoad = (port: number, requests: RequestSource, options: LoadOptions): Promise<LoadResult> =>
  new Promise((resolve, reject) => {
    let ok = 0
    let failed = 0
    let firstError: string | undefined = undefined
    const latenciesMs: Array<number> = []
    const nextRequest = typeof requests === "function" ? requests : (i: number) => requests[i % requests.length]!
    let sent = 0
    let open = 0
    let stopping = false
    let settled = false
    const timer = setTimeout(() => (stopping = true), options.ms)
    const fail = (e: unknown) => {
      if (settled) return
      settled = true
      stopping = true
      clearTimeout(timer)
      reject(e)
    }
    const connect = (): void => {
      const socket = net.connect(port, "127.0.0.1")
      socket.setNoDelay(true)
      open++
      let buffer: Buffer = Buffer.alloc(0)
      let sentAt = 0
      const send = () => {
        if (stopping || sent >= options.cap) {
          stopping = true
          return void socket.end()
        }
        let request: Buffer
        try {
          request = nextRequest(sent++)
        } catch (e) {
          socket.destroy()
          return fail(e)
        }
        sentAt = performance.now()
        socket.write(request)
      }
      socket.on("connect", send)
      socket.on("data", (chunk: Buffer) => {
        buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk])
        for (;;) {
          let framed
          try {
            framed = responseLength(buffer)
          } catch (e) {
            socket.destroy()
            return fail(e)
          }
          if (framed === undefined) return
          latenciesMs.push(performance.now() - sentAt)
          if (buffer.subarray(0, 13).toString("latin1") === "HTTP/1.1 200 ") ok++
          else {
            failed++
            firstError ??= buffer.subarray(0, Math.min(framed.total, 2_000)).toString("utf8")
          }
          buffer = buffer.subarray(framed.total)
          send()
        }
      })
      socket.on("error", fail)
      socket.on("close", () => {
        if (--open === 0 && !settled) {
          settled = true
          clearTimeout(timer)
          resolve({ ok, failed, firstError, latenciesMs })
        }
      })
    }
    for (let i = 0; i < (options.connections ?? 32); i++) connect()
  })

/** The q-quantile (0..1) of a list sorted ascending, nearest rank. */
export const quantile = (sorted: ReadonlyArray<number>, q: number): number =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!

// ---------------------------------------------------------------------------------------------------------------
// Servers in child processes.

/** A server running in a child process. */
export interface Spawned {
  readonly child: ChildProcess
  readonly port: number
  /** The server's own CPU time so far (user + system, µs). */
  readonly cpu: () => Promise<number>
  /** Stops the server and waits for it to exit. */
  readonly stop: () => Promise<void>
}

/** How to fork a server. */
export interface SpawnOptions {
  /** The module to fork (run with bench/loader.mjs, as the benches are); it must call `serveChild` when it sees `env`. */
  readonly module: string
  /** Added to this process's environment. */
  readonly env: Readonly<Record<string, string>>
  /**
   * Run the child with `--cpu-prof` into `scratchpad/prof/` (or its subfolder `profileName`), with node's default
   * file names: one profile per thread, and the main thread's is the larger (the smaller is the loader's hooks thread).
   */
  readonly profile?: boolean
  readonly profileName?: string
}

/** Forks a server and resolves with its port once it listens. */
export const spawnServer = (options: SpawnOptions): Promise<Spawned> =>
  new Promise((resolve, reject) => {
    const prof = options.profile === true
      ? ["--cpu-prof", `--cpu-prof-dir=${path.resolve("scratchpad/prof", options.profileName ?? "")}`]
      : []
    const placed = pinning()
    const child = fork(options.module, [], { execArgv: ["--import", LOADER, ...prof], env: { ...process.env, ...options.env } })
    // Pinned at once and again once it listens: threads it started in between are caught by the second pass.
    const pinChild = () => placed.mode === "taskset" && child.pid !== undefined && pin(child.pid, placed.serverCpu!)
    pinChild()
    child.once("message", (m: { port: number }) => {
      pinChild()
      resolve({ child, port: m.port, cpu: () => serverCpu(child), stop: () => stopServer(child) })
    })
    child.once("error", reject)
    child.once("exit", (code) => reject(new Error(`server ${JSON.stringify(options.env)} exited with ${code}`)))
  })

/** Stops a forked server and waits for it to exit (so a profile is written). */
export const stopServer = (child: ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.removeAllListeners("exit")
    child.once("exit", () => resolve())
    child.send("stop")
  })

/** The server's own CPU time (user + system, µs), asked over IPC so it works wherever fork does. */
export const serverCpu = (child: ChildProcess): Promise<number> =>
  new Promise((resolve) => {
    const onMessage = (m: { cpu?: number }) => {
      if (m.cpu === undefined) return
      child.off("message", onMessage)
      resolve(m.cpu)
    }
    child.on("message", onMessage)
    child.send("cpu")
  })

/** The child side: starts the server, reports its port, then answers "cpu" and "stop" from the parent. */
export const serveChild = async (start: () => Promise<number>): Promise<void> => {
  const port = await start()
  process.on("message", (m) => {
    if (m === "stop") process.exit(0)
    if (m === "cpu") {
      const { user, system } = process.cpuUsage()
      process.send?.({ cpu: user + system })
    }
  })
  process.send?.({ port })
}

// ---------------------------------------------------------------------------------------------------------------
// Servers started as commands.

/** How to start a server as its users start it: `node <args>` in `cwd`. */
export interface CommandOptions {
  /** The arguments after `node`, e.g. `["dist/bin/mesh.js", "hub", "--port", "7700"]`. */
  readonly args: ReadonlyArray<string>
  readonly cwd: string
  /** Reads what the process printed on stdout so far: the port it listens on once it is ready, else undefined. */
  readonly ready: (stdout: string) => number | undefined
  /** A file its stderr (its log lines) is written to, as a service manager would; default: discarded. */
  readonly stderrFile?: string
  /** Added to this process's environment. */
  readonly env?: Readonly<Record<string, string>>
  /** How long it may take to be ready; default 30 s. */
  readonly timeoutMs?: number
}

let clockTicks: number | undefined

/** CPU time (user + system, µs) of every thread of `pid` from /proc (Linux); NaN where there is no /proc. */
export const procCpu = (pid: number): number => {
  clockTicks ??= Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout?.trim()) || 100
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / clockTicks
  } catch {
    return NaN
  }
}

/**
 * Starts `node <args>` in `cwd` (under `taskset -c <server CPU>` when pinning, so every thread it starts is placed)
 * and resolves once `ready` finds its port in what it printed. Its stdout is read (and dropped) for as long as it
 * runs, so it never blocks on a full pipe. Stopped with SIGTERM (a graceful stop, which flushes its logs), SIGKILL
 * after 15 s.
 */
export const spawnCommand = (options: CommandOptions): Promise<Spawned & { readonly stdout: () => string }> =>
  new Promise((resolve, reject) => {
    const placed = pinning()
    const [command, args] = placed.mode === "taskset"
      ? ["taskset", ["-c", String(placed.serverCpu), process.execPath, ...options.args]] as const
      : [process.execPath, options.args] as const
    const stderr = options.stderrFile === undefined ? "ignore" : fs.openSync(options.stderrFile, "a")
    const child = spawn(command, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, stdio: ["ignore", "pipe", stderr] })
    if (typeof stderr === "number") fs.closeSync(stderr)
    let out = ""
    let done = false
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      fail(new Error(`${options.args.join(" ")} was not ready within ${(options.timeoutMs ?? 30_000) / 1000} s:\n${out}`))
    }, options.timeoutMs ?? 30_000)
    const fail = (e: Error) => {
      if (done) return
      done = true
      clearTimeout(timer)
      reject(e)
    }
    const stop = (): Promise<void> =>
      new Promise((stopped) => {
        if (child.exitCode !== null || child.signalCode !== null) return stopped()
        const kill = setTimeout(() => child.kill("SIGKILL"), 15_000)
        child.once("exit", () => {
          clearTimeout(kill)
          stopped()
        })
        child.kill("SIGTERM")
      })
    child.stdout!.on("data", (d: Buffer) => {
      if (done) return
      out += d.toString()
      const port = options.ready(out)
      if (port === undefined) return
      done = true
      clearTimeout(timer)
      resolve({ child, port, cpu: () => Promise.resolve(procCpu(child.pid!)), stop, stdout: () => out })
    })
    child.once("error", fail)
    child.once("exit", (code, signal) => fail(new Error(`${options.args.join(" ")} exited with ${code ?? signal}:\n${out}`)))
  })

// ---------------------------------------------------------------------------------------------------------------
// Interleaved rounds.

/** One server of a comparison. */
export interface BenchServer {
  readonly name: string
  readonly spawn: () => Promise<Spawned>
  /** Its requests, built once it listens (they may depend on the port). */
  readonly requests: (port: number) => RequestSource | Promise<RequestSource>
  /** Requests per round (and per warm-up) at most; default `MeasureOptions.cap`. */
  readonly cap?: number
}

/** The usual rounds: 1 s warm-up, 7 rounds of 1 s, 32 connections, a generous cap per round. */
export const DEFAULT_ROUNDS: MeasureOptions = { warmupMs: 1_000, rounds: 7, roundMs: 1_000, cap: 500_000, connections: 32 }

/** Rounds and their length. */
export interface MeasureOptions {
  readonly warmupMs: number
  readonly rounds: number
  readonly roundMs: number
  readonly cap: number
  readonly connections?: number
}

/** Median latencies of one server, ms. */
export interface Latency {
  readonly name: string
  readonly p50Ms: number
  readonly p99Ms: number
}

/** What one server cost and who was the bottleneck, medians over rounds. */
export interface LoadDetail extends Latency {
  readonly requestsPerSecond: number
  /** The server's CPU time per request, µs. */
  readonly serverCpuUsPerRequest: number
  /** The server's CPU time over the round's wall time (1 = one core busy). */
  readonly serverBusy: number
  /** This process's (the generator's) CPU time per request, µs. */
  readonly generatorCpuUsPerRequest: number
  readonly generatorBusy: number
  /** "generator" when the generator, not the server, was the busier at ≥ 90% of a core. */
  readonly boundBy: "server" | "generator" | "neither"
}

/** Prints the load table: req/s, p50/p99, CPU per request of server and generator, and who was the bottleneck. */
export const printLoad = (details: ReadonlyArray<LoadDetail>): void => {
  console.log("\n## load (medians over rounds; CPU µs per request and busy share of one core, server and generator)")
  for (const d of details) {
    console.log(
      `${d.name.padEnd(48)} ${Math.round(d.requestsPerSecond).toLocaleString("en-US").padStart(8)} req/s  p50 ${d.p50Ms.toFixed(2).padStart(6)} ms  p99 ${d.p99Ms.toFixed(2).padStart(6)} ms  ` +
        `server ${d.serverCpuUsPerRequest.toFixed(1).padStart(6)} µs/req (${(100 * d.serverBusy).toFixed(0)}%)  generator ${d.generatorCpuUsPerRequest.toFixed(1).padStart(5)} µs/req (${(100 * d.generatorBusy).toFixed(0)}%)` +
        (d.boundBy === "generator" ? "  GENERATOR-BOUND: a floor, not the server's rate" : "")
    )
  }
}

const boundBy = (serverBusy: number, generatorBusy: number): LoadDetail["boundBy"] =>
  generatorBusy >= 0.9 && generatorBusy > serverBusy ? "generator" : serverBusy >= 0.9 ? "server" : "neither"

const check = (name: string, phase: string, result: LoadResult): void => {
  if (result.failed > 0) {
    throw new Error(`${name}: ${result.failed} of ${result.ok + result.failed} requests failed in ${phase}; the first answer:\n${result.firstError}`)
  }
  if (result.ok === 0) throw new Error(`${name}: no request completed in ${phase}`)
}

/**
 * Runs every server at once, warms each up, then interleaves the rounds. Wall-clock requests/s, requests per
 * CPU-second of the server (what it costs, whatever else the machine was doing) and p50/p99 latency, medians.
 */
export const measureAll = async (
  servers: ReadonlyArray<BenchServer>,
  options: MeasureOptions
): Promise<{ wall: Array<Measurement>; cpu: Array<Measurement>; latency: Array<Latency>; details: Array<LoadDetail> }> => {
  const running: Array<Spawned> = []
  try {
    for (const server of servers) running.push(await server.spawn())
    const sources: Array<RequestSource> = []
    for (const [i, server] of servers.entries()) sources.push(await server.requests(running[i]!.port))
    const load = (i: number, ms: number) =>
      runLoad(running[i]!.port, sources[i]!, { ms, cap: servers[i]!.cap ?? options.cap, ...(options.connections === undefined ? {} : { connections: options.connections }) })
    for (const i of servers.keys()) check(servers[i]!.name, "warm-up", await load(i, options.warmupMs))
    const wall: Array<Array<number>> = servers.map(() => [])
    const cpu: Array<Array<number>> = servers.map(() => [])
    const p50: Array<Array<number>> = servers.map(() => [])
    const p99: Array<Array<number>> = servers.map(() => [])
    const serverUs: Array<Array<number>> = servers.map(() => [])
    const serverBusy: Array<Array<number>> = servers.map(() => [])
    const generatorUs: Array<Array<number>> = servers.map(() => [])
    const generatorBusy: Array<Array<number>> = servers.map(() => [])
    for (let r = 0; r < options.rounds; r++) {
      for (const [i, spawned] of running.entries()) {
        const c0 = await spawned.cpu()
        const g0 = process.cpuUsage()
        const t0 = performance.now()
        const result = await load(i, options.roundMs)
        const elapsed = performance.now() - t0
        const g = process.cpuUsage(g0)
        const used = (await spawned.cpu()) - c0
        check(servers[i]!.name, `round ${r + 1}`, result)
        wall[i]!.push((result.ok * 1000) / elapsed)
        cpu[i]!.push((result.ok * 1e6) / used)
        serverUs[i]!.push(used / result.ok)
        serverBusy[i]!.push(used / (elapsed * 1000))
        generatorUs[i]!.push((g.user + g.system) / result.ok)
        generatorBusy[i]!.push((g.user + g.system) / (elapsed * 1000))
        const sorted = result.latenciesMs.sort((a, b) => a - b)
        p50[i]!.push(quantile(sorted, 0.5))
        p99[i]!.push(quantile(sorted, 0.99))
      }
    }
    const details = servers.map(({ name }, i): LoadDetail => {
      const busy = median(serverBusy[i]!)
      const genBusy = median(generatorBusy[i]!)
      return {
        name,
        requestsPerSecond: median(wall[i]!),
        p50Ms: median(p50[i]!),
        p99Ms: median(p99[i]!),
        serverCpuUsPerRequest: median(serverUs[i]!),
        serverBusy: busy,
        generatorCpuUsPerRequest: median(generatorUs[i]!),
        generatorBusy: genBusy,
        boundBy: boundBy(busy, genBusy)
      }
    })
    printLoad(details)
    note("load", details)
    return {
      wall: servers.map(({ name }, i) => ({ name, opsPerSecond: median(wall[i]!) })),
      cpu: servers.map(({ name }, i) => ({ name: `${name} (per CPU-s)`, opsPerSecond: median(cpu[i]!) })),
      latency: servers.map(({ name }, i) => ({ name, p50Ms: median(p50[i]!), p99Ms: median(p99[i]!) })),
      details
    }
  } finally {
    for (const { stop } of running) await stop()
  }
}

/**
 * Prints p50/p99 latency per server and adds them, as `latency`, to the suite's results (call after harness's
 * `report` for the same suite).
 */
export const reportLatency = (suite: string, latency: ReadonlyArray<Latency>): void => {
  console.log(`\n## ${suite} latency (median over rounds of each round's quantile)`)
  for (const { name, p50Ms, p99Ms } of latency) {
    console.log(`${name.padEnd(44)} p50 ${p50Ms.toFixed(2).padStart(8)} ms  p99 ${p99Ms.toFixed(2).padStart(8)} ms`)
  }
  saveResult(suite, { latency: latency.map(({ name, p50Ms, p99Ms }) => ({ server: name, p50Ms, p99Ms })) })
}

/**
 * Shared set-up for the runtime tests: bundling an entry with esbuild for workerd or the Edge VM, and running
 * workerd (the Workers runtime, from its npm package) in a child process on 127.0.0.1.
 */
import * as esbuild from "esbuild"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

/** The workerd binary the npm package installs. */
export const WORKERD = path.join(ROOT, "node_modules", ".bin", "workerd")


/** The Workers compatibility date the tests (and examples/worker/wrangler.toml) run under. */
export const COMPATIBILITY_DATE = "2025-09-01"

/** Modules the bundles leave out: MCP's SDK is loaded only by `input.mcp(…)`, which these runtimes do not offer. */
const EXTERNAL = ["@modelcontextprotocol/sdk", "@modelcontextprotocol/sdk/*"]

/** A bundle: its code and every input and import it has, to check what it pulled in. */
export interface Bundle {
  readonly code: string
  readonly inputs: ReadonlyArray<string>
  readonly imports: ReadonlyArray<string>
}

/**
 * Bundles `entry` (relative to the repository) as one ES module for the neutral platform. For workerd, node:* stays
 * external (the `nodejs_compat` flag provides what is named); for the Edge VM, `shims` alias Node modules to files.
 */
export const bundle = async (
  entry: string,
  options: { readonly format?: "esm" | "iife"; readonly globalName?: string; readonly alias?: Record<string, string>; readonly inject?: ReadonlyArray<string> } = {}
): Promise<Bundle> => {
  const result = await esbuild.build({
    entryPoints: [path.join(ROOT, entry)],
    bundle: true,
    write: false,
    outdir: path.join(os.tmpdir(), "mesh-bundle"),
    format: options.format ?? "esm",
    ...(options.globalName === undefined ? {} : { globalName: options.globalName }),
    platform: "neutral",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    mainFields: ["browser", "module", "main"],
    external: [...EXTERNAL, ...(options.alias === undefined ? ["node:*"] : [])],
    ...(options.alias === undefined ? {} : { alias: options.alias }),
    ...(options.inject === undefined ? {} : { inject: [...options.inject] }),
    metafile: true,
    logLevel: "error"
  })
  const output = Object.values(result.metafile.outputs)[0]!
  return {
    code: result.outputFiles[0]!.text,
    inputs: Object.entries(output.inputs).filter(([, v]) => v.bytesInOutput > 0).map(([f]) => f),
    imports: output.imports.map((i) => i.path)
  }
}

/** A running workerd. */
export interface Workerd {
  readonly url: string
  readonly output: () => string
  readonly stop: () => Promise<void>
}

const capnpString = (s: string): string => JSON.stringify(s)

/** A port free on 127.0.0.1 now (a Worker's public URL must be known before it starts, so the port is chosen first). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })

/**
 * Writes `modules` (name → code; the first is the main module) and a config serving them into a temp folder, and
 * starts workerd on 127.0.0.1 at `port`; resolves once it listens (it says so on a control fd).
 */
export const startWorkerd = (
  port: number,
  modules: ReadonlyArray<readonly [string, string]>,
  bindings: Readonly<Record<string, string>> = {},
  compatibilityFlags: ReadonlyArray<string> = ["nodejs_compat"],
  /** Addresses the Worker's `fetch` may reach (workerd's default is the public internet only); `local` is loopback. */
  outbound: ReadonlyArray<"public" | "private" | "local"> = ["public"]
): Promise<Workerd> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-workerd-"))
  for (const [name, code] of modules) fs.writeFileSync(path.join(dir, name), code)
  const config = `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    (name = "internet", network = (allow = [ ${outbound.map(capnpString).join(", ")} ]))
  ],
  sockets = [ (name = "http", address = "127.0.0.1:${port}", http = (), service = "main") ]
);

const worker :Workerd.Worker = (
  modules = [ ${modules.map(([name]) => `(name = ${capnpString(name)}, esModule = embed ${capnpString(name)})`).join(", ")} ],
  bindings = [ ${Object.entries(bindings).map(([k, v]) => `(name = ${capnpString(k)}, text = ${capnpString(v)})`).join(", ")} ],
  compatibilityDate = ${capnpString(COMPATIBILITY_DATE)},
  compatibilityFlags = [ ${compatibilityFlags.map(capnpString).join(", ")} ],
  globalOutbound = "internet"
);
`
  fs.writeFileSync(path.join(dir, "config.capnp"), config)
  // workerd is a devDependency: without its binary the runtime tests fail, never skip.
  if (!fs.existsSync(WORKERD)) return Promise.reject(new Error(`${WORKERD} is missing: npm ci installs workerd (a devDependency)`))
  const child: ChildProcess = spawn(WORKERD, ["serve", "config.capnp", "--control-fd=3"], { cwd: dir, stdio: ["ignore", "pipe", "pipe", "pipe"] })
  let output = ""
  child.stdout!.on("data", (d) => void (output += String(d)))
  child.stderr!.on("data", (d) => void (output += String(d)))
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve(fs.rmSync(dir, { recursive: true, force: true }))
      child.once("exit", () => resolve(fs.rmSync(dir, { recursive: true, force: true })))
      child.kill("SIGTERM")
    })
  return new Promise<Workerd>((resolve, reject) => {
    let control = ""
    child.once("error", reject)
    child.once("exit", (code) => reject(new Error(`workerd exited (${code}) before listening:\n${output}`)))
    ;(child.stdio[3] as NodeJS.ReadableStream).on("data", (d) => {
      control += String(d)
      for (const line of control.split("\n")) {
        if (line.trim() === "") continue
        try {
          const event = JSON.parse(line) as { event?: string; socket?: string; port?: number }
          if (event.event === "listen" && event.socket === "http" && typeof event.port === "number") {
            child.removeAllListeners("exit")
            resolve({ url: `http://127.0.0.1:${event.port}`, output: () => output, stop })
          }
        } catch {
          // A partial line: the rest comes with the next chunk.
        }
      }
    })
  })
}

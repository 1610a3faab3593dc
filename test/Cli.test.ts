import { assert, describe, it } from "@effect/vitest"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { keygen } from "../src/cli/Cli.js"
import { extractPublicKey } from "../src/core/Did.js"
import { Keys } from "../src/core/Keys.js"
import * as KeysNative from "../src/node/KeysNative.js"
import { VERSION } from "../src/core/Version.js"
import pkg from "../package.json" with { type: "json" }

const env = Layer.merge(NodeContext.layer, KeysNative.layer)
const none = Option.none<string>()

describe("mesh CLI", () => {
  it("VERSION matches package.json", () => {
    assert.strictEqual(VERSION, pkg.version)
  })

  it.effect("keygen writes a private identity file whose key imports and matches its document", () =>
    Effect.gen(function* () {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-cli-"))
      const out = path.join(dir, "alice.json")
      const written = yield* keygen({ name: "alice", namespace: Option.some("acme"), endpoint: Option.some("http://127.0.0.1:9"), out: Option.some(out), force: false })
      assert.strictEqual(written.did, "did:mesh:acme.alice")
      assert.strictEqual(fs.statSync(out).mode & 0o777, 0o600)
      const file = JSON.parse(fs.readFileSync(out, "utf8"))
      const keys = yield* Keys
      const key = yield* keys.importPrivateKey(file.privateKeyPkcs8B64)
      assert.strictEqual(key.publicKeyB64, file.publicKeyB64)
      assert.deepStrictEqual(yield* extractPublicKey(file.document), key.publicKey)
      const again = yield* Effect.flip(keygen({ name: "alice", namespace: none, endpoint: none, out: Option.some(out), force: false }))
      assert.strictEqual(again.code, "FILE_EXISTS")
      const forced = yield* keygen({ name: "bob", namespace: none, endpoint: none, out: Option.some(out), force: true })
      assert.strictEqual(JSON.parse(fs.readFileSync(out, "utf8")).did, forced.did)
    }).pipe(Effect.provide(env)))

  it.effect("keygen refuses a dangling symbolic link at the path and never creates its target; --force replaces the link", () =>
    Effect.gen(function* () {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-cli-link-"))
      const target = path.join(dir, "elsewhere", "stolen.json")
      fs.mkdirSync(path.dirname(target))
      const link = path.join(dir, "alice.json")
      fs.symlinkSync(target, link)
      const e = yield* Effect.flip(keygen({ name: "alice", namespace: none, endpoint: none, out: Option.some(link), force: false }))
      assert.strictEqual(e.code, "FILE_EXISTS")
      assert.isFalse(fs.existsSync(target))
      assert.isTrue(fs.lstatSync(link).isSymbolicLink())

      const forced = yield* keygen({ name: "alice", namespace: none, endpoint: none, out: Option.some(link), force: true })
      assert.isFalse(fs.existsSync(target))
      const st = fs.lstatSync(link)
      assert.isTrue(st.isFile())
      assert.strictEqual(st.mode & 0o777, 0o600)
      assert.strictEqual(JSON.parse(fs.readFileSync(link, "utf8")).did, forced.did)
      // Nothing is left beside it.
      assert.deepStrictEqual(fs.readdirSync(dir).sort(), ["alice.json", "elsewhere"])

      // A link to an existing file: --force replaces the link, the file it pointed at is untouched.
      fs.writeFileSync(target, "keep me")
      fs.rmSync(link)
      fs.symlinkSync(target, link)
      yield* keygen({ name: "alice", namespace: none, endpoint: none, out: Option.some(link), force: true })
      assert.strictEqual(fs.readFileSync(target, "utf8"), "keep me")
      assert.isTrue(fs.lstatSync(link).isFile())
    }).pipe(Effect.provide(env)))

  it("the built `mesh` binary refuses a dangling link at --out with FILE_EXISTS and exit code 1", () => {
    const bin = path.resolve("dist/bin/mesh.js")
    if (!fs.existsSync(bin)) execFileSync("npm", ["run", "build"], { stdio: "ignore" })
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-bin-link-"))
    const target = path.join(dir, "target.json")
    fs.symlinkSync(target, path.join(dir, "c.json"))
    let status: number | null = null
    try {
      execFileSync(process.execPath, [bin, "keygen", "carol", "--out", path.join(dir, "c.json")], { stdio: "pipe" })
    } catch (e) {
      status = (e as { status: number | null }).status
      assert.include(String((e as { stderr: Buffer }).stderr), "FILE_EXISTS")
    }
    assert.strictEqual(status, 1)
    assert.isFalse(fs.existsSync(target))
  })

  it("the built `mesh` binary answers --version and keygen (after npm run build)", () => {
    const bin = path.resolve("dist/bin/mesh.js")
    // `npm ci` runs the build (prepare); on a tree without it, build first.
    if (!fs.existsSync(bin)) execFileSync("npm", ["run", "build"], { stdio: "ignore" })
    assert.strictEqual(execFileSync(process.execPath, [bin, "--version"]).toString().trim(), VERSION)
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mesh-bin-"))
    const out = execFileSync(process.execPath, [bin, "keygen", "carol", "--out", path.join(dir, "c.json")]).toString()
    assert.include(out, "did:mesh:carol")
    let failed = false
    try {
      execFileSync(process.execPath, [bin, "keygen", "carol", "--out", path.join(dir, "c.json")], { stdio: "pipe" })
    } catch (e) {
      failed = true
      assert.include(String((e as { stderr: Buffer }).stderr), "FILE_EXISTS")
    }
    assert.isTrue(failed)
  })
})

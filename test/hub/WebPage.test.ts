/**
 * The hub's page: its routes and headers, the same script from the bundled `mesh hub`, and — in a real browser
 * (Debian's chromium driven by playwright-core) — the registry explorer, a streamed chat with an agent the page calls
 * directly (CORS) that survives a dropped connection, the approval prompt at a human gate, and the message shown when an agent does not allow the
 * page's origin. Screenshots are kept under test/artifacts/.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import * as vm from "node:vm"
import * as AgentServer from "../../src/agent/AgentServer.js"
import { agentManifest } from "../../src/cli/Cli.js"
import { signApproval } from "../../src/core/Approval.js"
import { generateDid } from "../../src/core/Did.js"
import { issueTaskMandate } from "../../src/core/Mandate.js"
import { CONTENT_SECURITY_POLICY } from "../../src/hub/WebPage.js"
import { script } from "../../src/hub/WebClient.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { ensureBin } from "../support/bin.js"
import { browserPage, CHROMIUM, chromiumMissing, register, screenshot } from "./browser.js"
import { startHub, tempDatabase } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** GET as text, with the headers the page is judged by. */
const fetchText = (url: string) =>
  Effect.promise(async () => {
    const res = await fetch(url)
    return { status: res.status, type: res.headers.get("content-type") ?? "", csp: res.headers.get("content-security-policy"), text: await res.text() }
  })

/** An HTTP proxy in front of `target` that writes down each request (`METHOD path`) as it passes. */
const countingProxy = (target: string, seen: Array<string>) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly server: http.Server }>((resume) => {
      const server = http.createServer((req, res) => {
        seen.push(`${req.method} ${req.url}`)
        const upstream = http.request(`${target}${req.url ?? "/"}`, { method: req.method ?? "GET", headers: req.headers }, (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers)
          answer.pipe(res)
        })
        upstream.on("error", () => res.destroy())
        req.pipe(upstream)
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, server })))
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

/**
 * A TCP proxy in front of `target` whose `cut()` drops every connection that is carrying an event stream at that
 * moment, as a network that goes away would; connections made after it pass through.
 */
const cuttingProxy = (target: string) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly cut: () => number; readonly server: net.Server }>((resume) => {
      const { hostname, port } = new URL(target)
      const streaming = new Set<net.Socket>()
      const server = net.createServer((client) => {
        const upstream = net.connect(Number(port), hostname)
        client.pipe(upstream)
        upstream.on("data", (d: Buffer) => {
          if (/content-type: text\/event-stream/i.test(d.toString("latin1"))) streaming.add(client)
          client.write(d)
        })
        const close = () => {
          streaming.delete(client)
          client.destroy()
          upstream.destroy()
        }
        upstream.on("end", () => client.end())
        upstream.on("error", close)
        client.on("error", close)
        client.on("close", close)
      })
      server.listen(0, "127.0.0.1", () => {
        const cut = () => {
          const n = streaming.size
          for (const socket of streaming) socket.destroy()
          streaming.clear()
          return n
        }
        resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, cut, server }))
      })
    }),
    ({ server }) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
  )

describe("the hub's page", () => {
  it.live("serves the explorer and the chat shell, its script and style, under a policy that loads from the hub only", () =>
    provide(
      Effect.gen(function* () {
        const { hub } = yield* startHub()
        const home = yield* fetchText(`${hub.url}/`)
        assert.strictEqual(home.status, 200)
        assert.include(home.type, "text/html")
        assert.strictEqual(home.csp, CONTENT_SECURITY_POLICY)
        assert.include(home.text, `<script type="module" src="/ui/app.js"></script>`)
        // The chat shell is the same page whatever the path says: nothing of the request is written into it.
        const chat = yield* fetchText(`${hub.url}/chat/%3Cscript%3Ealert(1)%3C%2Fscript%3E`)
        assert.strictEqual(chat.status, 200)
        assert.strictEqual(chat.text, home.text)
        const js = yield* fetchText(`${hub.url}/ui/app.js`)
        assert.strictEqual(js.status, 200)
        assert.include(js.type, "text/javascript")
        assert.strictEqual(js.text, script)
        // It parses as a script on its own (no imports, nothing from outside the function).
        assert.doesNotThrow(() => new vm.Script(js.text))
        const css = yield* fetchText(`${hub.url}/ui/app.css`)
        assert.include(css.type, "text/css")
        assert.include(css.text, ".msg")
        const doc = yield* Effect.promise(() => fetch(`${hub.url}/openapi.json`).then((r) => r.json() as Promise<{ paths: Record<string, unknown> }>))
        for (const p of ["/", "/chat/{didHash}", "/ui/app.js", "/ui/app.css"]) assert.include(Object.keys(doc.paths), p)
      })
    ))

  it.live("the bundled mesh binary serves the page, and its script runs", () =>
    Effect.gen(function* () {
      const proc = yield* Effect.acquireRelease(
        Effect.sync(() => spawn(process.execPath, [ensureBin(), "hub", "--db", tempDatabase(), "--port", "0", "--log-level", "warning"], { stdio: ["ignore", "pipe", "pipe"] })),
        (p) => Effect.sync(() => p.kill("SIGKILL"))
      )
      const url = yield* Effect.async<string, Error>((resume) => {
        let out = ""
        proc.stdout!.on("data", (d: Buffer) => {
          out += d.toString()
          const m = /listening on (http:\/\/\S+)/.exec(out)
          if (m !== null) resume(Effect.succeed(m[1]!))
        })
        proc.on("exit", (code) => resume(Effect.fail(new Error(`mesh hub exited with ${code}: ${out}`))))
      })
      // The bundler may rename the function's locals, so the text is not byte for byte the same: it must parse,
      // and (with a browser) run.
      const js = yield* fetchText(`${url}/ui/app.js`)
      assert.strictEqual(js.status, 200)
      assert.include(js.text, "Waiting for a human's approval")
      assert.doesNotThrow(() => new vm.Script(js.text))
      const home = yield* fetchText(`${url}/`)
      assert.include(home.text, "/ui/app.js")
      if (chromiumMissing) return
      const { page, errors } = yield* browserPage
      const status = yield* Effect.promise(async () => {
        await page.goto(`${url}/`)
        await page.waitForFunction(() => document.querySelector("#status")?.textContent === "No agents registered.")
        return page.evaluate(() => document.querySelector("#status")?.textContent)
      })
      assert.strictEqual(status, "No agents registered.")
      assert.deepStrictEqual(errors, [])
    }).pipe(Effect.scoped))

  // CI sets MESH_REQUIRE_CHROMIUM=1 (after installing it): there a missing browser fails these tests, never skips them.
  if (chromiumMissing) {
    it.skip(`in a browser: SKIPPED, ${CHROMIUM} is missing (apt-get install -y chromium; .ci/run installs it)`, () => {})
    return
  }

  it.live("in a browser: find an agent in the explorer, open its chat, and watch the reply stream in, across a dropped connection", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const identity = yield* generateDid("streamer")
        // The second chunk waits until the test has seen the first one on the page, so what the page shows before
        // the run ends is the stream, whatever the timing.
        let release = () => {}
        const firstSeen = new Promise<void>((resolve) => (release = resolve))
        const agent = yield* AgentServer.make({
          name: "streamer",
          did: identity.did,
          privateKey: identity.privateKey,
          database: ":memory:",
          capabilities: ["chat"],
          serving: { allowedOrigins: [hub.url], maxEventLoopLagMs: Infinity },
          handler: async function* ({ message }) {
            yield "first "
            await firstSeen
            yield "second "
            yield `you said: ${message}`
          }
        })
        // The browser reaches the agent through a proxy that can drop the stream's connection.
        const proxy = yield* cuttingProxy(agent.url)
        const record = yield* register(client, identity, proxy.url, { name: "streamer", description: "streams its answers chunk by chunk", capabilities: ["chat"] })
        const mcp = yield* client.registerMcp({ name: "Files", endpointUrl: "http://127.0.0.1:9/mcp", tools: ["read_file", { name: "write_file", inputSchema: { type: "object" } }] })
        const skill = yield* client.registerSkill({ name: "Web lookup", skillType: "web-search" })
        const { page, errors } = yield* browserPage
        const item = `#results .item[data-did-hash="${record.didHash}"]`

        // The MCP servers' and skills' tabs list them; an MCP server's detail names its tools.
        const listed = yield* Effect.promise(async () => {
          await page.goto(`${hub.url}/#mcp`)
          await page.click(`#results .item[data-did-hash="${mcp.didHash}"] a.name`)
          await page.waitForSelector("#detail .tools")
          const tools = await page.evaluate(() => Array.from(document.querySelectorAll("#detail .tools li code")).map((c) => c.textContent))
          await page.click('.tabs a[data-tab="skills"]')
          await page.click(`#results .item[data-did-hash="${skill.didHash}"] a.name`)
          await page.waitForFunction(() => document.querySelector("#detail h2")?.textContent === "Web lookup")
          return { tools, skill: await page.evaluate(() => document.querySelector("#detail")?.textContent ?? "") }
        })
        assert.deepStrictEqual(listed.tools, ["read_file", "write_file"])
        assert.include(listed.skill, "web-search")
        assert.include(listed.skill, skill.did)

        yield* Effect.promise(async () => {
          await page.click('.tabs a[data-tab="agents"]')
          // The list shows every agent; search narrows it.
          await page.waitForSelector(item)
          await page.fill("#q", "streamer")
          await page.press("#q", "Enter")
          await page.waitForFunction(() => document.querySelector("#status")?.textContent === "1 found.")
          await page.click(`${item} a.name`)
          await page.waitForSelector("#manifest pre")
          await page.waitForSelector("#did-document pre")
        })
        const detail = yield* Effect.promise(() =>
          page.evaluate(() => ({
            text: document.querySelector("#detail")?.textContent ?? "",
            manifest: JSON.parse(document.querySelector("#manifest pre")?.textContent ?? "null") as { name?: string; description?: string },
            document: JSON.parse(document.querySelector("#did-document pre")?.textContent ?? "null") as { id?: string }
          }))
        )
        assert.include(detail.text, record.didHash)
        assert.include(detail.text, proxy.url)
        assert.strictEqual(detail.manifest.name, "streamer")
        assert.strictEqual(detail.manifest.description, "streams its answers chunk by chunk")
        assert.strictEqual(detail.document.id, identity.did)
        yield* screenshot(page, "hub-page-explorer.png")

        const during = yield* Effect.promise(async () => {
          await page.click("#open-chat")
          await page.waitForURL(`${hub.url}/chat/${record.didHash}`)
          await page.waitForSelector("#message")
          await page.fill("#message", "hello mesh")
          await page.click("#send")
          await page.waitForSelector('.msg.agent[data-chunks="1"]')
          return page.evaluate(() => {
            const reply = document.querySelector(".msg.agent")
            return { state: reply?.getAttribute("data-state"), text: reply?.querySelector(".text")?.textContent, name: document.querySelector("#agent-name")?.textContent }
          })
        })
        // One chunk on the page while the run is still going.
        assert.deepStrictEqual(during, { state: "streaming", text: "first ", name: "streamer" })
        // The connection drops mid-run; the page follows the run again from the last event it saw.
        assert.strictEqual(proxy.cut(), 1)
        yield* Effect.promise(() => page.waitForSelector('.msg.agent[data-reconnects="1"]'))
        release()
        const after = yield* Effect.promise(async () => {
          await page.waitForSelector('.msg.agent[data-state="done"]')
          return page.evaluate(() => {
            const reply = document.querySelector(".msg.agent")
            return {
              chunks: Number(reply?.getAttribute("data-chunks")),
              reconnects: reply?.getAttribute("data-reconnects"),
              text: reply?.querySelector(".text")?.textContent,
              user: document.querySelector(".msg.user .text")?.textContent
            }
          })
        })
        // Every chunk once: none lost to the cut, none repeated by the reconnect.
        assert.deepStrictEqual(after, { chunks: 3, reconnects: "1", text: "first second you said: hello mesh", user: "hello mesh" })
        const file = yield* screenshot(page, "hub-page-chat.png")
        assert.isTrue(fs.statSync(file).size > 0)
        assert.deepStrictEqual(errors, [])
      })
    ))

  it.live("in a browser: a run paused at a human gate shows who must approve; a pasted approval signed by the grantor resumes it", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const user = yield* generateDid("user")
        const mallory = yield* generateDid("mallory")
        const assistant = yield* generateDid("assistant")
        const sent: Array<string> = []
        const agent = yield* AgentServer.make({
          name: "assistant",
          did: assistant.did,
          privateKey: assistant.privateKey,
          database: ":memory:",
          serving: { allowedOrigins: [hub.url], maxEventLoopLagMs: Infinity },
          resolveCallerKey: (did) => (did === user.did ? user.publicKey : did === mallory.did ? mallory.publicKey : null),
          handler: async function* ({ guard, message }) {
            yield "drafted. "
            await guard("send_email", { description: `send ${JSON.stringify(message)} to bob`, dataScopes: ["contacts"] })
            sent.push(message)
            yield "sent."
          }
        })
        const record = yield* register(client, assistant, agent.url, { name: "assistant" })
        const mandate = yield* issueTaskMandate({
          grantorDid: user.did,
          granteeDid: assistant.did,
          privateKey: user.privateKey,
          constraints: { allowed: ["send_email"], humanGates: ["send_email"], dataAccess: ["contacts"], maxDelegationDepth: 0 }
        })
        const { page, errors } = yield* browserPage

        const asked = yield* Effect.promise(async () => {
          await page.goto(`${hub.url}/chat/${record.didHash}`)
          await page.waitForSelector("#message")
          await page.click(".options summary")
          await page.fill("#mandate", mandate.token)
          await page.fill("#message", "lunch at noon?")
          await page.click("#send")
          await page.waitForSelector(".approval")
          return page.evaluate(() => ({
            taskId: document.querySelector(".approval")?.getAttribute("data-task-id") ?? "",
            grantor: document.querySelector(".approval .grantor")?.textContent,
            text: document.querySelector(".approval")?.textContent ?? "",
            state: document.querySelector(".msg.agent")?.getAttribute("data-state"),
            reply: document.querySelector(".msg.agent .text")?.textContent
          }))
        })
        assert.strictEqual(asked.state, "paused")
        assert.strictEqual(asked.reply, "drafted. ")
        assert.strictEqual(asked.grantor, user.did)
        assert.include(asked.text, 'send "lunch at noon?" to bob')
        assert.include(asked.text, "contacts")
        assert.include(asked.text, "This page holds no keys and cannot sign it")
        assert.match(asked.taskId, /^task_/)
        assert.deepStrictEqual(sent, [])
        yield* screenshot(page, "hub-page-approval.png")

        // The tab keeps the conversation: after a reload the prompt is back, and the approval is pasted into it.
        const reloaded = yield* Effect.promise(async () => {
          await page.reload()
          // The form and the kept conversation are put up in one go.
          await page.waitForSelector("#message")
          return page.evaluate(() => ({
            taskId: document.querySelector(".approval")?.getAttribute("data-task-id") ?? null,
            state: document.querySelector(".msg.agent")?.getAttribute("data-state"),
            reply: document.querySelector(".msg.agent .text")?.textContent,
            user: document.querySelector(".msg.user .text")?.textContent
          }))
        })
        assert.deepStrictEqual(reloaded, { taskId: asked.taskId, state: "paused", reply: "drafted. ", user: "lunch at noon?" })

        // An approval signed by someone else is refused by the agent; the page says so and the task still waits.
        const wrong = yield* signApproval({ taskId: asked.taskId, capability: "send_email" }, mallory.did, mallory.privateKey)
        const refused = yield* Effect.promise(async () => {
          await page.fill(".approval-input", JSON.stringify(wrong))
          await page.click(".approval .resume")
          await page.waitForSelector(".msg.agent .failure")
          await page.waitForFunction(() => !(document.querySelector(".approval .resume") as HTMLButtonElement | null)?.disabled)
          return page.evaluate(() => document.querySelector(".msg.agent .failure")?.textContent ?? "")
        })
        assert.include(refused, "APPROVAL_WRONG_SIGNER")
        assert.deepStrictEqual(sent, [])

        const approval = yield* signApproval({ taskId: asked.taskId, capability: "send_email" }, user.did, user.privateKey)
        const done = yield* Effect.promise(async () => {
          await page.fill(".approval-input", JSON.stringify(approval))
          await page.click(".approval .resume")
          await page.waitForSelector('.msg.agent[data-state="done"]')
          return page.evaluate(() => ({ reply: document.querySelector(".msg.agent .text")?.textContent, card: document.querySelector(".approval") === null }))
        })
        assert.deepStrictEqual(done, { reply: "drafted. sent.", card: true })
        assert.deepStrictEqual(sent, ["lunch at noon?"])
        yield* screenshot(page, "hub-page-approved.png")
        assert.deepStrictEqual(errors, [])
      })
    ))

  it.live("in a browser: an agent that does not allow the hub's origin is named with the flag that would", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const identity = yield* generateDid("closed")
        const agent = yield* AgentServer.make({ name: "closed", did: identity.did, privateKey: identity.privateKey, database: ":memory:", handler: () => "unreachable from the page" })
        const record = yield* register(client, identity, agent.url, { name: "closed" })
        const { page } = yield* browserPage
        const status = yield* Effect.promise(async () => {
          await page.goto(`${hub.url}/chat/${record.didHash}`)
          await page.waitForSelector("#status.error")
          return page.evaluate(() => ({ text: document.querySelector("#status")?.textContent ?? "", form: document.querySelector("#message") !== null }))
        })
        assert.include(status.text, `--allowed-origin ${hub.url}`)
        assert.isFalse(status.form)
      })
    ))
  it.live("in a browser: a bearer agent is called with the token typed into the page; a mesh-sig agent is not called at all", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const serving = { allowedOrigins: [hub.url], maxEventLoopLagMs: Infinity }
        const guarded = yield* generateDid("guarded")
        const bearer = yield* AgentServer.make({
          name: "guarded", did: guarded.did, privateKey: guarded.privateKey, database: ":memory:", serving,
          auth: "bearer", bearerTokens: ["s3cret"], handler: ({ caller }) => `hello ${caller.principal.slice(0, 7)}`
        })
        const guardedRecord = yield* register(client, guarded, bearer.url, { name: "guarded" })
        const signed = yield* generateDid("signed")
        const meshSig = yield* AgentServer.make({
          name: "signed", did: signed.did, privateKey: signed.privateKey, database: ":memory:", serving,
          auth: "mesh-sig", hubUrl: hub.url, handler: () => "only for signed callers"
        })
        const signedRecord = yield* register(client, signed, meshSig.url, { name: "signed" })
        const { page, errors } = yield* browserPage

        const replies = yield* Effect.promise(async () => {
          await page.goto(`${hub.url}/chat/${guardedRecord.didHash}`)
          await page.waitForSelector("#bearer")
          await page.fill("#message", "without a token")
          await page.click("#send")
          await page.waitForSelector('.msg.agent[data-state="error"]')
          await page.fill("#bearer", "s3cret")
          await page.fill("#message", "with the token")
          await page.click("#send")
          await page.waitForSelector('.msg.agent[data-state="done"]')
          return page.evaluate(() => Array.from(document.querySelectorAll(".msg.agent")).map((m) => m.textContent ?? ""))
        })
        assert.include(replies[0], "AUTH_REQUIRED")
        assert.include(replies[1], "hello bearer:")

        const refused = yield* Effect.promise(async () => {
          await page.goto(`${hub.url}/chat/${signedRecord.didHash}`)
          await page.waitForSelector("#status.error")
          return page.evaluate(() => ({ text: document.querySelector("#status")?.textContent ?? "", form: document.querySelector("#message") !== null }))
        })
        assert.include(refused.text, "this page holds no keys")
        assert.include(refused.text, `mesh call ${signedRecord.didHash}`)
        assert.isFalse(refused.form)
        assert.deepStrictEqual(errors, [])
      })
    ))

  it.live("in a browser: a mesh-sig agent that does not allow the hub's origin is said to need signed calls, not to refuse the origin", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const identity = yield* generateDid("signer")
        const requests: Array<string> = []
        const options: AgentServer.AgentServerOptions = {
          name: "Signed Only", did: identity.did, privateKey: identity.privateKey, database: ":memory:",
          auth: "mesh-sig", hubUrl: hub.url, handler: () => "only for signed callers"
        }
        const agent = yield* AgentServer.make(options)
        // Every request the page makes of the agent is counted on its way there.
        const proxy = yield* countingProxy(agent.url, requests)
        // Registered as `mesh agent` registers it: the manifest says the agent's auth.
        const record = yield* register(client, identity, proxy.url, agentManifest(options))
        const { page, errors } = yield* browserPage
        const shown = yield* Effect.promise(async () => {
          await page.goto(`${hub.url}/chat/${record.didHash}`)
          await page.waitForSelector("#status.error")
          return page.evaluate(() => ({
            text: document.querySelector("#status")?.textContent ?? "",
            name: document.querySelector("#agent-name")?.textContent,
            card: document.querySelector(".agent-card")?.textContent ?? "",
            form: document.querySelector("#message") !== null
          }))
        })
        assert.include(shown.text, "This agent needs signed calls")
        assert.include(shown.text, "this page holds no keys")
        assert.include(shown.text, `mesh call ${record.didHash}`)
        assert.notInclude(shown.text, "--allowed-origin")
        assert.notInclude(shown.text, "cannot reach")
        assert.strictEqual(shown.name, "Signed Only")
        assert.include(shown.card, "mesh-sig")
        assert.isFalse(shown.form)
        assert.deepStrictEqual(requests, [])
        yield* screenshot(page, "hub-page-signed-only.png")
        assert.deepStrictEqual(errors, [])
      })
    ))

  it.live("in a browser: each agent's chat is kept in the tab's sessionStorage and comes back on a reload or a later visit, and goes on from there; the bearer token is not kept", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const serving = { allowedOrigins: [hub.url], maxEventLoopLagMs: Infinity }
        const token = "t0ken-never-kept"
        const keeper = yield* generateDid("keeper")
        // No memory of its own: what it was told before comes in the history the page sends.
        const agent = yield* AgentServer.make({
          name: "keeper", did: keeper.did, privateKey: keeper.privateKey, database: ":memory:", serving,
          auth: "bearer", bearerTokens: [token], handler: ({ message, history }) => `${history.length} before; you said: ${message}`
        })
        const record = yield* register(client, keeper, agent.url, { name: "keeper" })
        const otherId = yield* generateDid("other")
        const other = yield* AgentServer.make({ name: "other", did: otherId.did, privateKey: otherId.privateKey, database: ":memory:", serving, handler: ({ message }) => `other: ${message}` })
        const otherRecord = yield* register(client, otherId, other.url, { name: "other" })
        const { page, errors } = yield* browserPage
        const chatUrl = `${hub.url}/chat/${record.didHash}`

        const say = async (text: string) => {
          const done = await page.evaluate(() => document.querySelectorAll('.msg.agent[data-state="done"]').length)
          await page.fill("#message", text)
          await page.click("#send")
          await page.waitForFunction((n) => document.querySelectorAll('.msg.agent[data-state="done"]').length === n, done + 1)
        }
        // The form is put up and the kept conversation shown in one go, so once the form is there the log is complete.
        const open = async (url: string) => {
          await page.goto(url)
          await page.waitForSelector("#message")
        }
        const transcript = () =>
          page.evaluate(() =>
            Array.from(document.querySelectorAll("#log .msg"), (m) => ({
              who: m.classList.contains("user") ? "you" : "agent",
              text: m.querySelector(".text")?.textContent,
              state: m.getAttribute("data-state")
            }))
          )
        const kept = () => page.evaluate(() => Object.keys(sessionStorage).map((k) => `${k}=${sessionStorage.getItem(k)}`).join("\n"))

        const before = yield* Effect.promise(async () => {
          await open(chatUrl)
          await page.fill("#bearer", token)
          await say("one")
          await say("two")
          return transcript()
        })
        assert.deepStrictEqual(before, [
          { who: "you", text: "one", state: "sent" },
          { who: "agent", text: "0 before; you said: one", state: "done" },
          { who: "you", text: "two", state: "sent" },
          { who: "agent", text: "2 before; you said: two", state: "done" }
        ])

        const reloaded = yield* Effect.promise(async () => {
          await page.reload()
          await page.waitForSelector("#message")
          return { log: await transcript(), token: await page.inputValue("#bearer"), kept: await kept() }
        })
        assert.deepStrictEqual(reloaded.log, before)
        assert.strictEqual(reloaded.token, "")
        assert.include(reloaded.kept, record.didHash)
        assert.notInclude(reloaded.kept, token)

        // It goes on from the kept conversation: the agent is sent all four messages before the next.
        const next = yield* Effect.promise(async () => {
          await page.fill("#bearer", token)
          await say("three")
          return transcript()
        })
        assert.deepStrictEqual(next.slice(4), [
          { who: "you", text: "three", state: "sent" },
          { who: "agent", text: "4 before; you said: three", state: "done" }
        ])

        // Each agent has its own: another agent's chat starts empty, and coming back finds this one as it was.
        const elsewhere = yield* Effect.promise(async () => {
          await open(`${hub.url}/chat/${otherRecord.didHash}`)
          const empty = await transcript()
          await say("hi")
          const own = await transcript()
          await open(chatUrl)
          return { empty, own, back: await transcript() }
        })
        assert.deepStrictEqual(elsewhere.empty, [])
        assert.deepStrictEqual(elsewhere.own, [{ who: "you", text: "hi", state: "sent" }, { who: "agent", text: "other: hi", state: "done" }])
        assert.deepStrictEqual(elsewhere.back, next)
        yield* screenshot(page, "hub-page-chat-kept.png")
        assert.deepStrictEqual(errors, [])
      })
    ))

  it.live("in a browser: a reply cut off by a reload is kept as far as it came, marked as ended early", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const identity = yield* generateDid("slow")
        let finish = () => {}
        const finished = new Promise<void>((resolve) => (finish = resolve))
        const agent = yield* AgentServer.make({
          name: "slow", did: identity.did, privateKey: identity.privateKey, database: ":memory:",
          serving: { allowedOrigins: [hub.url], maxEventLoopLagMs: Infinity },
          handler: async function* () {
            yield "partial "
            await finished
            yield "rest"
          }
        })
        // The run is let go when the test ends, so the agent's shutdown does not wait on it.
        yield* Effect.addFinalizer(() => Effect.sync(finish))
        const record = yield* register(client, identity, agent.url, { name: "slow" })
        const { page, errors } = yield* browserPage
        const reply = yield* Effect.promise(async () => {
          await page.goto(`${hub.url}/chat/${record.didHash}`)
          await page.waitForSelector("#message")
          await page.fill("#message", "take your time")
          await page.click("#send")
          await page.waitForSelector('.msg.agent[data-chunks="1"]')
          await page.reload()
          await page.waitForSelector("#message")
          return page.evaluate(() => {
            const m = document.querySelector(".msg.agent")
            return { state: m?.getAttribute("data-state"), text: m?.querySelector(".text")?.textContent, failure: m?.querySelector(".failure")?.textContent }
          })
        })
        assert.deepStrictEqual(reply, { state: "error", text: "partial ", failure: "STREAM_ENDED: this page was left before the run ended" })
        assert.deepStrictEqual(errors, [])
      })
    ))
})

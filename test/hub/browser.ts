/**
 * Shared set-up for the hub page's browser tests: Debian's chromium driven by playwright-core, agents registered
 * under keys of their own, and screenshots kept under test/artifacts/.
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { type Browser, chromium, type Page } from "playwright-core"
import type { MeshIdentity } from "../../src/core/Did.js"
import type * as MeshClient from "../../src/hub/MeshClient.js"

/** Where Debian's chromium is. */
export const CHROMIUM = "/usr/bin/chromium"
const ARTIFACTS = path.resolve("test/artifacts")

/** True when the browser tests cannot run here; CI sets MESH_REQUIRE_CHROMIUM=1, so there a missing browser fails them. */
export const chromiumMissing = !fs.existsSync(CHROMIUM) && process.env.MESH_REQUIRE_CHROMIUM !== "1"

/** Registers `identity` as an agent at `endpointUrl` under an API key of its own. */
export const register = (client: MeshClient.MeshClientApi, identity: MeshIdentity, endpointUrl: string, manifest: Record<string, unknown>) =>
  Effect.gen(function* () {
    const key = yield* client.createApiKey({ owner: identity.did })
    return yield* client.registerAgent({ manifest: { meshProtocolVersion: "1.0", ...manifest }, endpointUrl, identity, apiKey: key.apiKey })
  })

/** A headless chromium for the scope, with every uncaught page error collected. */
export const browserPage = Effect.acquireRelease(
  Effect.promise(async () => {
    const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] })
    const page: Page = await browser.newPage({ viewport: { width: 1280, height: 860 } })
    // Well inside the test's own timeout, so a page that never gets there fails naming what it waited for.
    page.setDefaultTimeout(10_000)
    const errors: Array<string> = []
    page.on("pageerror", (e) => errors.push(String(e)))
    return { browser, page, errors }
  }),
  ({ browser }) => Effect.promise(() => browser.close())
)

/** A full-page screenshot under test/artifacts/; the file's path. */
export const screenshot = (page: Page, name: string) =>
  Effect.promise(async () => {
    fs.mkdirSync(ARTIFACTS, { recursive: true })
    const file = path.join(ARTIFACTS, name)
    await page.screenshot({ path: file, fullPage: true })
    return file
  })

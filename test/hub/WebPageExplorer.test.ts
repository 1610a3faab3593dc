/**
 * The hub page's registry explorer in a real browser (Debian's chromium driven by playwright-core): the More button
 * shows only while there is a next page, agents are listed by the names their manifests give them, and the detail
 * pane says what to click and goes back to saying it when a new search starts.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { Page } from "playwright-core"
import { generateDid } from "../../src/core/Did.js"
import type * as MeshClient from "../../src/hub/MeshClient.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { browserPage, CHROMIUM, chromiumMissing, register, screenshot } from "./browser.js"
import { startHub } from "./support.js"

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

/** Nobody answers there: the explorer only reads the registry. */
const NOWHERE = "http://127.0.0.1:9/agent"

/**
 * Registers agents `did:mesh:<prefix>-<i>` for i in [from, to), each with a manifest naming it `<PREFIX> <i>`, under
 * the admin key (a key of their own each would make the test mostly key issuing).
 */
const registerMany = (client: MeshClient.MeshClientApi, prefix: string, from: number, to: number) =>
  Effect.forEach(
    Array.from({ length: to - from }, (_, i) => from + i),
    (i) =>
      Effect.flatMap(generateDid(`${prefix}-${i}`), (identity) =>
        client.registerAgent({ manifest: { meshProtocolVersion: "1.0", name: `${prefix.toUpperCase()} ${i}` }, endpointUrl: NOWHERE, identity })
      ),
    { concurrency: 4 }
  )

/** Whether the More button takes up room on the page (a `display` rule over `hidden` would make it). */
const moreShown = (page: Page) => page.evaluate(() => (document.querySelector("#more") as HTMLElement | null)?.offsetParent !== null)

/** What the detail pane shows, and whether it holds a card. */
const detailPane = (page: Page) => page.evaluate(() => ({ text: document.querySelector("#detail")?.textContent ?? "", card: document.querySelector("#detail h2") !== null }))

const EMPTY_STATE = "Pick an agent from the list to see its card and chat with it"

describe("the hub's registry explorer", () => {
  if (chromiumMissing) {
    it.skip(`in a browser: SKIPPED, ${CHROMIUM} is missing (apt-get install -y chromium; .ci/run installs it)`, () => {})
    return
  }

  it.live("in a browser: More shows only while the registry has a next page, and goes once the last page is in", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        yield* registerMany(client, "few", 0, 2)
        const { page, errors } = yield* browserPage
        const few = yield* Effect.promise(async () => {
          await page.goto(`${hub.url}/#agents`)
          await page.waitForFunction(() => document.querySelectorAll("#results .item").length === 2 && document.querySelector("#status")?.textContent === "")
          return { shown: await moreShown(page), visible: await page.isVisible("#more") }
        })
        assert.deepStrictEqual(few, { shown: false, visible: false })

        // The page asks for 50 at a time: 51 agents make a second page of one.
        yield* registerMany(client, "many", 2, 51)
        const paged = yield* Effect.promise(async () => {
          await page.reload()
          await page.waitForFunction(() => document.querySelectorAll("#results .item").length === 50 && document.querySelector("#status")?.textContent === "")
          const first = { shown: await moreShown(page), visible: await page.isVisible("#more") }
          await page.click("#more")
          await page.waitForFunction(() => document.querySelectorAll("#results .item").length === 51 && document.querySelector("#status")?.textContent === "")
          return { first, last: { shown: await moreShown(page), visible: await page.isVisible("#more") } }
        })
        assert.deepStrictEqual(paged, { first: { shown: true, visible: true }, last: { shown: false, visible: false } })
        assert.deepStrictEqual(errors, [])
      })
    ))

  it.live("in a browser: agents are listed and shown by their manifests' names, with the didHash beside; the DID only when the name is blank", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const alpha = yield* generateDid("alpha-01")
        const alphaRecord = yield* register(client, alpha, NOWHERE, { name: "Alpha Helper", description: "answers in haiku" })
        const blank = yield* generateDid("blank-02")
        const blankRecord = yield* register(client, blank, NOWHERE, { name: "   " })
        const { page, errors } = yield* browserPage
        const row = (didHash: string) => `#results .item[data-did-hash="${didHash}"]`
        const rowOf = (didHash: string) =>
          page.evaluate((selector) => {
            const li = document.querySelector(selector)
            return { name: li?.querySelector("a.name")?.textContent, title: li?.querySelector("a.name")?.getAttribute("title"), hash: li?.querySelector(".hash")?.textContent }
          }, row(didHash))

        const listed = yield* Effect.promise(async () => {
          await page.goto(`${hub.url}/#agents`)
          await page.waitForSelector(row(blankRecord.didHash))
          return { alpha: await rowOf(alphaRecord.didHash), blank: await rowOf(blankRecord.didHash) }
        })
        assert.deepStrictEqual(listed.alpha, { name: "Alpha Helper", title: alpha.did, hash: alphaRecord.didHash })
        assert.deepStrictEqual(listed.blank, { name: blank.did, title: blank.did, hash: blankRecord.didHash })

        // A search hit names no manifest; the page still shows the agent's name.
        const found = yield* Effect.promise(async () => {
          await page.fill("#q", "haiku")
          await page.press("#q", "Enter")
          await page.waitForFunction(() => document.querySelector("#status")?.textContent === "1 found.")
          const hit = await rowOf(alphaRecord.didHash)
          await page.click(`${row(alphaRecord.didHash)} a.name`)
          await page.waitForSelector("#did-document pre")
          return { hit, heading: await page.evaluate(() => document.querySelector("#detail h2")?.textContent) }
        })
        assert.deepStrictEqual(found, { hit: { name: "Alpha Helper", title: alpha.did, hash: alphaRecord.didHash }, heading: "Alpha Helper" })
        yield* screenshot(page, "hub-page-names.png")
        assert.deepStrictEqual(errors, [])
      })
    ))

  it.live("in a browser: the empty detail pane says what to pick, on the list and when opened at a search", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        yield* registerMany(client, "helper", 0, 2)
        const { page, errors } = yield* browserPage
        const onList = yield* Effect.promise(async () => {
          await page.goto(`${hub.url}/`)
          await page.waitForSelector("#results .item")
          return detailPane(page)
        })
        assert.include(onList.text, EMPTY_STATE)
        assert.isFalse(onList.card)
        const onSearch = yield* Effect.promise(async () => {
          // A fresh load, not a hash change on the page already open.
          await page.goto("about:blank")
          await page.goto(`${hub.url}/#search/HELPER`)
          await page.waitForFunction(() => document.querySelector("#status")?.textContent === "2 found.")
          return detailPane(page)
        })
        assert.deepStrictEqual(onSearch, onList)
        yield* screenshot(page, "hub-page-empty-detail.png")
        assert.deepStrictEqual(errors, [])
      })
    ))

  it.live("in a browser: a new search takes the card off the detail pane, back to its empty state", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* startHub()
        const [alpha] = yield* registerMany(client, "alpha", 0, 1)
        yield* registerMany(client, "beta", 0, 1)
        const { page, errors } = yield* browserPage
        const open = (didHash: string) =>
          Effect.promise(async () => {
            await page.click(`#results .item[data-did-hash="${didHash}"] a.name`)
            await page.waitForSelector("#did-document pre")
            return detailPane(page)
          })
        // The list before the search is marked, so what is waited for is the new search's answer, not the last one's.
        const search = (text: string) =>
          Effect.promise(async () => {
            await page.evaluate(() => document.querySelectorAll("#results .item").forEach((li) => li.setAttribute("data-before", "")))
            await page.fill("#q", text)
            await page.press("#q", "Enter")
            await page.waitForSelector("#results .item:not([data-before])")
            return detailPane(page)
          })
        yield* Effect.promise(async () => {
          await page.goto(`${hub.url}/#search/ALPHA`)
          await page.waitForSelector("#results .item")
        })
        const card = yield* open(alpha!.didHash)
        assert.isTrue(card.card)
        assert.include(card.text, "ALPHA 0")
        const other = yield* search("BETA")
        assert.isFalse(other.card)
        assert.include(other.text, EMPTY_STATE)
        // The search the card was opened from, run again, clears it too.
        yield* search("ALPHA")
        yield* open(alpha!.didHash)
        const again = yield* search("ALPHA")
        assert.deepStrictEqual(again, other)
        assert.deepStrictEqual(errors, [])
      })
    ))
})

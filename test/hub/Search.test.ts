/**
 * Registry search: the `q` caps, the per-address rate limit, the FTS5 index (what it finds, that query syntax in
 * `q` is text, that writes keep it in step, that migration 0010 backfills it) and the size caps at registration.
 * What search finds is checked on Postgres too, where the query is answered by a pg_trgm index (EXPLAIN) that
 * migration 0025 builds and backfills.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import * as Reactivity from "@effect/experimental/Reactivity"
import { PgClient } from "@effect/sql-pg"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Layer from "effect/Layer"
import * as Database from "../../src/sql/Database.js"
import { didHash, generateDid } from "../../src/core/Did.js"
import * as KeysNative from "../../src/node/KeysNative.js"
import { migrations } from "../../src/sql/migrations/index.js"
import { DEFAULT_LIMITS } from "../../src/hub/Registry.js"
import * as RegistryStore from "../../src/sql/RegistryStore.js"
import { describePostgres, probeNow, scopedDatabase } from "../support/postgres.js"
import { registeredAgent, request, startHub } from "./support.js"

await probeNow()

const provide = <A, E, R>(e: Effect.Effect<A, E, R>) => e.pipe(Effect.scoped, Effect.provide(KeysNative.layer))

const search = (url: string, q: string, limit?: number) =>
  request(`${url}/v1/search?q=${encodeURIComponent(q)}${limit === undefined ? "" : `&limit=${limit}`}`, "GET")

const hitsOf = (r: { body: Record<string, unknown> }) => (r.body.items as ReadonlyArray<{ kind: string; didHash: string }>).map((i) => `${i.kind}:${i.didHash}`)

// Enough burst that the tests other than the rate-limit one never meet it.
const roomy = { limits: { searchRateLimit: { capacity: 1000, perMinute: 1000 } } }

/** What search finds, on the database `start` gives its hub: the same on both dialects. */
const results = (start: typeof startHub) => {
  it.live("finds by names, manifest name, description and capabilities, tool names and skill types, case-insensitively", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* start(roomy)
        const alice = yield* generateDid("alice")
        yield* client.registerAgent({
          manifest: { name: "Polyglot", description: "Turns Māori text into English", capabilities: ["translate", { name: "summarize" }], tags: ["language"], meshProtocolVersion: "1.0" },
          endpointUrl: "http://127.0.0.1:9/alice",
          identity: alice
        })
        const agent = `agent:${didHash(alice.did)}`
        const mcp = yield* client.registerMcp({ name: "Files", endpointUrl: "http://127.0.0.1:9/mcp", tools: ["read_file", { name: "write_file", inputSchema: { type: "object" } }, "convert_markdown_to_html"] })
        const skill = yield* client.registerSkill({ name: "Web search", skillType: "web-search" })
        const expect = (q: string, hit: string) =>
          Effect.map(search(hub.url, q), (r) => {
            assert.strictEqual(r.status, 200, JSON.stringify(r.body))
            assert.include(hitsOf(r), hit, q)
          })
        yield* expect("did:mesh:alice", agent)
        yield* expect("polyGLOT", agent)
        yield* expect("māori", agent)
        yield* expect("translat", agent)
        yield* expect("summarize", agent)
        yield* expect("language", agent)
        yield* expect("rite_fi", `mcp:${mcp.didHash}`)
        yield* expect("FILES", `mcp:${mcp.didHash}`)
        yield* expect("web-search", `skill:${skill.didHash}`)
        yield* expect("web sea", `skill:${skill.didHash}`)
        // Every term must match; a term under 3 characters is ignored.
        yield* expect("translate english", agent)
        yield* expect("to translate", agent)
        assert.deepStrictEqual(hitsOf(yield* search(hub.url, "translate nowhere")), [])
        assert.deepStrictEqual(hitsOf(yield* search(hub.url, "100%_match")), [])
        // A long term is matched by its pieces: still found whole.
        yield* expect("markdown_to_html", `mcp:${mcp.didHash}`)
        assert.deepStrictEqual(hitsOf(yield* search(hub.url, "markdown_to_pdf")), [])
        const r = yield* search(hub.url, "read_file")
        assert.deepStrictEqual(r.body.items, [{ kind: "mcp", did: mcp.did, didHash: mcp.didHash, name: "Files" }])
      })
    ))

  it.live("FTS query syntax in q is text: never a 500, and found literally", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* start(roomy)
        const odd = yield* client.registerMcp({ name: `NEAR(a b) OR "quoted"* -minus ^caret col:on`, endpointUrl: "http://127.0.0.1:9/mcp", tools: [] })
        const plain = yield* client.registerMcp({ name: "plain files", endpointUrl: "http://127.0.0.1:9/mcp2", tools: [] })
        for (const q of [`"`, `"""`, `"unterminated`, `files*`, `*`, `NEAR(plain files)`, `NEAR`, `plain OR nothing`, `OR AND NOT`, `-plain`, `(plain)`, `((`, `name:plain`, `^plain`, `plain\u0000files`, `{name}: plain`, `'; DROP TABLE mesh_entries; --`, `%_\\`]) {
          const r = yield* search(hub.url, q)
          assert.include([200, 400], r.status, `${JSON.stringify(q)}: ${JSON.stringify(r.body)}`)
          if (r.status === 400) assert.strictEqual(r.body.code, "INVALID_REQUEST")
        }
        // Operators are not operators: "OR" does not widen, "-" does not exclude, NUL separates terms.
        assert.deepStrictEqual(hitsOf(yield* search(hub.url, "plain OR nothing")), [])
        assert.deepStrictEqual(hitsOf(yield* search(hub.url, "-plain")), [])
        assert.deepStrictEqual(hitsOf(yield* search(hub.url, "plain\u0000files")), [`mcp:${plain.didHash}`])
        for (const q of [`NEAR(a`, `"quoted"*`, `-minus`, `^caret`, `col:on`, `OR "quoted"`]) {
          assert.deepStrictEqual(hitsOf(yield* search(hub.url, q)), [`mcp:${odd.didHash}`], q)
        }
        // The table is still there.
        assert.strictEqual((yield* request(`${hub.url}/v1/mcp/${plain.didHash}`, "GET")).status, 200)
      })
    ))

  it.live("the index follows updates and deletes", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* start(roomy)
        const { apiKey, identity, record } = yield* registeredAgent(client, "mover")
        const hit = `agent:${record.didHash}`
        assert.include(hitsOf(yield* search(hub.url, "echo")), hit)
        const { cid } = yield* client.pinManifest({ name: "mover", meshProtocolVersion: "1.0", capabilities: ["juggling"] })
        yield* client.updateAgent(record.didHash, { manifestCID: cid }, { apiKey, identity })
        assert.notInclude(hitsOf(yield* search(hub.url, "echo")), hit)
        assert.include(hitsOf(yield* search(hub.url, "juggling")), hit)
        // An update that does not touch indexed fields keeps the entry found, in its place.
        const other = yield* registeredAgent(client, "stayer")
        const order = () => Effect.map(search(hub.url, "did:mesh:"), hitsOf)
        const before = yield* order()
        assert.deepStrictEqual(before, [hit, `agent:${other.record.didHash}`])
        yield* client.updateAgent(record.didHash, { endpointUrl: "http://127.0.0.1:10/mover" }, { apiKey, identity })
        assert.include(hitsOf(yield* search(hub.url, "juggling")), hit)
        assert.deepStrictEqual(yield* order(), before)
        yield* client.deleteAgent(record.didHash, { apiKey, identity })
        assert.deepStrictEqual(hitsOf(yield* search(hub.url, "juggling")), [])
        assert.deepStrictEqual(hitsOf(yield* search(hub.url, "did:mesh:mover")), [])
      })
    ))

  it.live("an answer has at most maxSearchResults hits, whatever limit asks", () =>
    provide(
      Effect.gen(function* () {
        const { hub, client } = yield* start({ limits: { ...roomy.limits, maxSearchResults: 5 } })
        for (let i = 0; i < 7; i++) yield* client.registerSkill({ name: `bulk skill ${i}` })
        assert.strictEqual(hitsOf(yield* search(hub.url, "bulk", 1000)).length, 5)
        assert.strictEqual(hitsOf(yield* search(hub.url, "bulk", 2)).length, 2)
      })
    ))
}

describe("registry search", () => {
  it.live("q longer than the cap, with too many terms, or without a term of 3 characters is 400 INVALID_REQUEST", () =>
    provide(
      Effect.gen(function* () {
        const { hub } = yield* startHub(roomy)
        const max = DEFAULT_LIMITS.maxQueryLength
        const atCap = yield* search(hub.url, "x".repeat(max))
        assert.strictEqual(atCap.status, 200, JSON.stringify(atCap.body))
        for (const q of ["x".repeat(max + 1), "a".repeat(8 * 1024), Array.from({ length: DEFAULT_LIMITS.maxQueryTerms + 1 }, () => "abc").join(" "), "ab", "", "  a b  "]) {
          const r = yield* search(hub.url, q)
          assert.strictEqual(r.status, 400, `${q.slice(0, 20)}: ${JSON.stringify(r.body)}`)
          assert.strictEqual(r.body.code, "INVALID_REQUEST")
          assert.strictEqual(r.body._tag, "BadRequest")
        }
      })
    ))

  results(startHub)

  it.live("search is rate limited per address: 429 RATE_LIMITED with Retry-After after the burst", () =>
    provide(
      Effect.gen(function* () {
        const { hub } = yield* startHub({ limits: { searchRateLimit: { capacity: 3, perMinute: 1 } } })
        for (let i = 0; i < 3; i++) assert.strictEqual((yield* search(hub.url, "anything")).status, 200)
        const r = yield* search(hub.url, "anything")
        assert.strictEqual(r.status, 429, JSON.stringify(r.body))
        assert.strictEqual(r.body.code, "RATE_LIMITED")
        assert.isAbove(Number(r.body.retryAfterSeconds), 0)
        assert.strictEqual(r.headers.get("retry-after"), String(r.body.retryAfterSeconds))
        // Over-long queries spend tokens too.
        assert.strictEqual((yield* search(hub.url, "x".repeat(10_000))).status, 429)
        // Other endpoints are not limited by it.
        assert.strictEqual((yield* request(`${hub.url}/api/status`, "GET")).status, 200)
      })
    ))

  it.live("registration refuses records over each size cap with 413 PAYLOAD_TOO_LARGE", () =>
    provide(
      Effect.gen(function* () {
        const { hub, adminKey } = yield* startHub(roomy)
        const L = DEFAULT_LIMITS
        const refused = (path: string, body: unknown) =>
          Effect.map(request(`${hub.url}${path}`, "POST", body, adminKey), (r) => {
            assert.strictEqual(r.status, 413, `${path}: ${JSON.stringify(r.body).slice(0, 200)}`)
            assert.strictEqual(r.body.code, "PAYLOAD_TOO_LARGE")
          })
        const accepted = (path: string, body: unknown) =>
          Effect.map(request(`${hub.url}${path}`, "POST", body, adminKey), (r) => assert.strictEqual(r.status, 201, `${path}: ${JSON.stringify(r.body).slice(0, 200)}`))
        // The JCS form has its keys in this order; the manifest of n bytes has a description of n minus the rest.
        const around = JSON.stringify({ description: "", meshProtocolVersion: "1.0", name: "m" }).length
        const manifest = (n: number) => ({ name: "m", meshProtocolVersion: "1.0", description: "d".repeat(n - around) })
        yield* accepted("/v1/manifests", manifest(L.maxManifestBytes))
        yield* refused("/v1/manifests", manifest(L.maxManifestBytes + 1))
        yield* refused("/v1/manifests", manifest(1_000_000))
        let n = 0
        const mcp = (tools: ReadonlyArray<unknown>, name = "tools") => ({ name, endpointUrl: "http://127.0.0.1:9/mcp", tools, did: `did:mesh:mcp.caps-${n++}` })
        yield* accepted("/v1/mcp", mcp(Array.from({ length: L.maxTools }, (_, i) => `t${i}`)))
        yield* refused("/v1/mcp", mcp(Array.from({ length: L.maxTools + 1 }, (_, i) => `t${i}`)))
        yield* refused("/v1/mcp", mcp([{ name: "big", inputSchema: { description: "x".repeat(L.maxToolBytes) } }]))
        yield* refused("/v1/mcp", mcp(["n".repeat(L.maxToolNameLength + 1)]))
        // Each tool under its cap, the list over its own.
        const third = Math.floor(L.maxToolBytes / 3)
        yield* refused("/v1/mcp", mcp(Array.from({ length: Math.ceil(L.maxToolListBytes / third) + 1 }, (_, i) => ({ name: `t${i}`, inputSchema: { d: "x".repeat(third) } }))))
        yield* refused("/v1/mcp", mcp([], "n".repeat(L.maxNameLength + 1)))
        yield* refused("/v1/skills", { name: "n".repeat(L.maxNameLength + 1), did: "did:mesh:skill.caps-1" })
        yield* accepted("/v1/skills", { name: "n".repeat(L.maxNameLength), did: "did:mesh:skill.caps-2" })
      })
    ))

  it.effect("migration 0010 backfills the index from entries registered before it", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const before = Object.fromEntries(Object.entries(migrations).filter(([k]) => k < "0010"))
      yield* Migrator.make({})({ loader: Migrator.fromRecord(before), table: Database.MIGRATIONS_TABLE })
      yield* sql`INSERT INTO mesh_manifests (cid, body, created_at) VALUES ('c1', ${JSON.stringify({ name: "Old", capabilities: ["archaeology"], meshProtocolVersion: "1.0" })}, 1)`
      yield* sql`INSERT INTO mesh_entries ${sql.insert({ did: "did:mesh:old", did_hash: "h1", kind: "agent", name: "did:mesh:old", key_version: 1, manifest_cid: "c1", owner_key_id: "k", created_at: 1, updated_at: 1 })}`
      yield* sql`INSERT INTO mesh_entries ${sql.insert({ did: "did:mesh:mcp.old", did_hash: "h2", kind: "mcp", name: "Old tools", key_version: 1, tools: JSON.stringify([{ name: "dig_site" }]), owner_key_id: "k", created_at: 2, updated_at: 2 })}`
      yield* Database.migrate
      const store = yield* RegistryStore.make
      const found = (terms: ReadonlyArray<string>) => Effect.map(Effect.orDie(store.search(terms, 10)), (rows) => rows.map((r) => r.did))
      assert.deepStrictEqual(yield* found(["archaeo"]), ["did:mesh:old"])
      assert.deepStrictEqual(yield* found(["dig_s"]), ["did:mesh:mcp.old"])
      assert.deepStrictEqual(yield* found(["old"]), ["did:mesh:old", "did:mesh:mcp.old"])
    }).pipe(Effect.provide(SqliteClient.layer({ filename: ":memory:" }).pipe(Layer.orDie)))
  )
})

/** A hub on a fresh Postgres database of its own. */
const startOnPostgres: typeof startHub = (options = {}) => Effect.flatMap(scopedDatabase, (db) => startHub({ ...options, database: db.url }))

describePostgres("registry search on Postgres", () => {
  results(startOnPostgres)

  const onPostgres = <A, E>(body: Effect.Effect<A, E, SqlClient.SqlClient>) =>
    Effect.scoped(Effect.flatMap(scopedDatabase, (db) => Effect.provide(body, Database.layer(db.url).pipe(Layer.orDie))))

  it.live("the search query is answered from the pg_trgm index (EXPLAIN), and finds what it found before", () =>
    onPostgres(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* RegistryStore.make
        const body = (i: number) => JSON.stringify({ name: `Agent ${i}`, description: i % 50 === 0 ? "Sailors read the tide" : `plain agent ${i}`, meshProtocolVersion: "1.0" })
        for (let i = 0; i < 300; i++) {
          yield* Effect.orDie(store.pinManifest(`c${i}`, body(i), i))
          yield* Effect.orDie(store.insertEntry({
            did: `did:mesh:a${i}`, did_hash: `h${i}`, kind: "agent", name: `did:mesh:a${i}`, endpoint_url: null, public_key_b64: null, key_version: 1,
            manifest_cid: `c${i}`, skill_type: null, tools: null, owner_key_id: "k", created_at: i, updated_at: i
          }))
        }
        yield* sql`ANALYZE mesh_search_text`
        // A table this small is cheapest read whole, so reading it whole is priced out: sequential scans, and full
        // scans of another index filtered row by row. What remains is an index that answers the condition itself, or
        // (the query not being indexable) the priced-out scan anyway. With realistic docs, tens of thousands of rows
        // and a selective term the planner picks the trigram index unprompted.
        const plan = yield* sql.withTransaction(
          Effect.zipRight(
            sql`SET LOCAL enable_seqscan = off`.pipe(Effect.zipRight(sql`SET LOCAL enable_indexscan = off`)),
            sql<Record<string, string>>`EXPLAIN ${RegistryStore.pgSearchStatement(sql, ["sailors", "tide"], 10)}`
          )
        )
        const text = plan.map((r) => Object.values(r).join("")).join("\n")
        assert.match(text, /Bitmap Index Scan on mesh_search_text_trgm[^\n]*\n\s+Index Cond: \(\(doc ~~ '%sailors%'::text\) AND \(doc ~~ '%tide%'::text\)\)/, text)
        assert.notInclude(text, "Seq Scan", text)
        assert.deepStrictEqual((yield* Effect.orDie(store.search(["sailors", "TIDE"], 10))).map((r) => r.did), [0, 50, 100, 150, 200, 250].map((i) => `did:mesh:a${i}`))
        // LIKE's wildcards in a term are characters to find.
        assert.deepStrictEqual(yield* Effect.orDie(store.search(["a%t", "a_e"], 10)), [])
      })
    ))

  it.live("migration 0025 backfills the search text from entries registered before it", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const db = yield* scopedDatabase
        const before = Object.fromEntries(Object.entries(migrations).filter(([k]) => k < "0025"))
        yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          yield* Migrator.make({})({ loader: Migrator.fromRecord(before), table: Database.MIGRATIONS_TABLE })
          yield* sql`INSERT INTO mesh_manifests (cid, body, created_at) VALUES ('c1', ${JSON.stringify({ name: "Old", capabilities: ["archaeology"], meshProtocolVersion: "1.0" })}, 1)`
          yield* sql`INSERT INTO mesh_entries ${sql.insert({ did: "did:mesh:old", did_hash: "h1", kind: "agent", name: "did:mesh:old", key_version: 1, manifest_cid: "c1", owner_key_id: "k", created_at: 1, updated_at: 1 })}`
          yield* sql`INSERT INTO mesh_entries ${sql.insert({ did: "did:mesh:mcp.old", did_hash: "h2", kind: "mcp", name: "Old tools", key_version: 1, tools: JSON.stringify([{ name: "dig_site" }]), owner_key_id: "k", created_at: 2, updated_at: 2 })}`
        }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(db.url) }).pipe(Layer.provide(Reactivity.layer), Layer.orDie)))
        yield* Effect.gen(function* () {
          const store = yield* RegistryStore.make
          const found = (terms: ReadonlyArray<string>) => Effect.map(Effect.orDie(store.search(terms, 10)), (rows) => rows.map((r) => r.did))
          assert.deepStrictEqual(yield* found(["archaeo"]), ["did:mesh:old"])
          assert.deepStrictEqual(yield* found(["dig_s"]), ["did:mesh:mcp.old"])
          assert.deepStrictEqual(yield* found(["old"]), ["did:mesh:old", "did:mesh:mcp.old"])
        }).pipe(Effect.provide(Database.layer(db.url).pipe(Layer.orDie)))
      })
    ))
})

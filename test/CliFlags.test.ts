/**
 * Every repeatable and every redacted flag of every `mesh` command, parsed with one value and with two: a repeatable
 * flag keeps each value, a single redacted flag takes one and refuses a second. The table below is checked against
 * the flags the command tree declares, so a new such flag without a case here fails.
 */
import * as CliConfig from "@effect/cli/CliConfig"
import * as Command from "@effect/cli/Command"
import * as CommandDescriptor from "@effect/cli/CommandDescriptor"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as ValidationError from "@effect/cli/ValidationError"
import { assert, describe, it } from "@effect/vitest"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import { mesh } from "../src/bin/mesh.js"

interface Case {
  readonly command: ReadonlyArray<string>
  /** What the command needs besides the flag under test. */
  readonly base: ReadonlyArray<string>
  readonly flag: string
  /** The field of the command's arguments the flag fills. */
  readonly field: string
  readonly repeatable: boolean
}

const cases: ReadonlyArray<Case> = [
  ...(["hub", "platform"] as const).flatMap((c) => {
    const base = c === "platform" ? ["--registry", "http://127.0.0.1:7700", "--registry-key", "mk_x"] : []
    return [
      { command: [c], base, flag: "allowed-host", field: "allowedHosts", repeatable: true },
      { command: [c], base, flag: "allowed-origin", field: "allowedOrigins", repeatable: true }
    ]
  }),
  { command: ["platform"], base: ["--registry", "http://127.0.0.1:7700"], flag: "registry-key", field: "registryKey", repeatable: false },
  ...[["bearer-token", "bearerTokens"], ["allowed-caller", "allowedCallers"], ["allowed-host", "allowedHosts"], ["allowed-origin", "allowedOrigins"]].map(([flag, field]) => ({
    command: ["agent"], base: ["examples/echo-agent.ts"], flag: flag!, field: field!, repeatable: true
  })),
  { command: ["agent"], base: ["examples/echo-agent.ts"], flag: "api-key", field: "apiKey", repeatable: false },
  { command: ["keys", "create"], base: ["--owner", "alice"], flag: "admin-key", field: "adminKey", repeatable: false },
  { command: ["call"], base: ["3f2a", "hi"], flag: "bearer-token", field: "bearerToken", repeatable: false },
  { command: ["agents", "rm"], base: ["3f2a"], flag: "api-key", field: "apiKey", repeatable: false },
  { command: ["call"], base: ["3f2a", "hi"], flag: "api-key", field: "apiKey", repeatable: false },
  ...["pools", "pool", "reconcile"].map((c) => ({
    command: ["ledger", c], base: [...(c === "pools" ? [] : ["pool_x"]), "--identity", "examples/echo-agent.ts"], flag: "api-key", field: "apiKey", repeatable: false
  })),
  { command: ["register"], base: ["--identity", "examples/echo-agent.ts"], flag: "api-key", field: "apiKey", repeatable: false }
]

/** The arguments of the innermost subcommand a parsed command line reached. */
const leaf = (value: unknown): Record<string, unknown> => {
  let at = value as Record<string, unknown>
  for (;;) {
    const sub = at.subcommand as { readonly _tag?: string; readonly value?: ReadonlyArray<unknown> } | undefined
    if (sub === undefined || sub._tag !== "Some" || !Array.isArray(sub.value)) return at
    at = sub.value[1] as Record<string, unknown>
  }
}

const plain = (v: unknown): unknown => {
  if (Redacted.isRedacted(v)) return Redacted.value(v)
  if (Array.isArray(v)) return v.map(plain)
  if (typeof v === "object" && v !== null && (v as { _tag?: string })._tag === "Some") return plain((v as unknown as { value: unknown }).value)
  return v
}

/** Parses `mesh <args>` without running it, with no settings from the environment. */
const parse = (args: ReadonlyArray<string>) =>
  CommandDescriptor.parse(mesh.descriptor, ["mesh", ...args], CliConfig.defaultConfig).pipe(
    Effect.map((d) => (d._tag === "UserDefined" ? leaf(d.value) : {})),
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map())),
    Effect.provide(NodeContext.layer),
    Effect.either
  )

/** `--flag <type>...` (repeatable) and `--flag redacted` in every usage line the tree's help shows. */
const declared = (): ReadonlySet<string> => {
  const text = HelpDoc.toAnsiText(Command.getHelp(mesh, CliConfig.defaultConfig))
  const found = new Set<string>()
  for (const line of text.split("\n")) {
    const m = /^ {2}- ((?:[a-z]+ )*?)(?=[[<-]|$)(.*)$/.exec(line)
    if (m === null) continue
    const words = m[1]!.trim()
    for (const f of m[2]!.matchAll(/--([a-z-]+) (\S+?)(\.\.\.)?(?=[\s\]]|$)/g)) {
      if (f[3] !== undefined || f[2] === "redacted") found.add(`${words} --${f[1]}`)
    }
  }
  return found
}

describe("mesh flags with one and two values", () => {
  it("the cases cover every repeatable and redacted flag the commands declare", () => {
    const covered = new Set(cases.map((c) => `${c.command.join(" ")} --${c.flag}`))
    const found = declared()
    assert.isAbove(found.size, 5)
    assert.deepStrictEqual([...found].filter((f) => !covered.has(f)).sort(), [])
  })

  for (const c of cases) {
    const name = `${c.command.join(" ")} --${c.flag}`
    it.effect(`${name} with one value`, () =>
      Effect.gen(function* () {
        const r = yield* parse([...c.command, ...c.base, `--${c.flag}`, "one"])
        assert.isTrue(Either.isRight(r), Either.isLeft(r) ? JSON.stringify(r.left.error) : "")
        const got = plain(Either.getOrThrow(r)[c.field])
        assert.deepStrictEqual(got, c.repeatable ? ["one"] : "one")
      }))
    it.effect(`${name} with two values`, () =>
      Effect.gen(function* () {
        const r = yield* parse([...c.command, ...c.base, `--${c.flag}`, "one", `--${c.flag}`, "two"])
        if (c.repeatable) {
          assert.isTrue(Either.isRight(r), Either.isLeft(r) ? JSON.stringify(r.left.error) : "")
          assert.deepStrictEqual(plain(Either.getOrThrow(r)[c.field]), ["one", "two"])
        } else {
          // A flag that takes one value refuses a second as a usage error (one line, exit 2), never a crash.
          assert.isTrue(Either.isLeft(r) && ValidationError.isValidationError(r.left))
        }
      }))
  }

  for (const command of [["hub"], ["platform", "--registry", "http://127.0.0.1:7700", "--registry-key", "mk_x"], ["agent", "examples/echo-agent.ts"], ["mcp"]]) {
    it.effect(`${command[0]} --port 99999 is a usage error naming the range`, () =>
      Effect.gen(function* () {
        const r = yield* parse([...command, "--port", "99999"])
        assert.isTrue(Either.isLeft(r))
        if (Either.isLeft(r)) assert.include(JSON.stringify(r.left.error), "--port must be a port from 0 to 65535")
        assert.isTrue(Either.isRight(yield* parse([...command, "--port", "0"])))
      }))
  }
})

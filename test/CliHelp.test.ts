/**
 * `mesh <command> --help` for every command of the tree: each argument and option is described in its own words
 * (no "A file." / "A user-defined piece of text." / "This setting is optional." before or instead of it), and
 * `--log-level` is listed once.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { ensureBin } from "./support/bin.js"

const help = (words: ReadonlyArray<string>): string => {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" }
  for (const k of Object.keys(env)) if (k.startsWith("MESH_")) delete env[k]
  return execFileSync(process.execPath, [ensureBin(), ...words, "--help"], { env, encoding: "utf8" })
}

/** The commands `mesh --help` lists (`keys`, `keys create`, …). */
const commands = (): ReadonlyArray<ReadonlyArray<string>> =>
  help([]).split("\n").flatMap((line) => {
    const m = /^ {2}- ((?:[a-z]+ ?)+?)(?= [[<-]| {2,}| *$)/.exec(line)
    return m === null ? [] : [m[1]!.trim().split(" ")]
  })

const FILLER = [
  "A file.",
  "An existing file.",
  "A user-defined piece of text.",
  "A user-defined piece of text that is confidential.",
  "An integer.",
  "A true or false value.",
  "One of the following:",
  "This option can be set from environment variables.",
  "This setting is optional."
]

/** Each argument or option heading of the ARGUMENTS and OPTIONS sections, with the paragraphs under it. */
const entries = (text: string): ReadonlyArray<{ readonly heading: string; readonly paragraphs: ReadonlyArray<string> }> => {
  const out: Array<{ heading: string; paragraphs: Array<string> }> = []
  let section = ""
  for (const line of text.split("\n")) {
    if (/^[A-Z]+$/.test(line)) {
      section = line
      continue
    }
    if (section !== "ARGUMENTS" && section !== "OPTIONS") continue
    if (/^(--|\(-|<)/.test(line)) out.push({ heading: line, paragraphs: [] })
    else if (line.trim() !== "" && out.length > 0) out[out.length - 1]!.paragraphs.push(line.trim())
  }
  return out
}

describe("mesh --help for every command", () => {
  const tree = commands()

  it("lists the whole tree", () => {
    const names = tree.map((w) => w.join(" "))
    for (const expected of ["keygen", "hub", "agent", "call", "keys create", "agents ls", "mandate issue", "saga run", "mcp"]) assert.include(names, expected)
  })

  for (const words of [[], ...tree]) {
    it(`mesh ${words.join(" ")} --help: every option has its own description, no filler, --log-level once`, () => {
      const text = help(words)
      for (const filler of FILLER) assert.notInclude(text, filler, `mesh ${words.join(" ")} --help`)
      assert.strictEqual(text.match(/^--log-level /gm)?.length ?? 0, 1, text)
      for (const e of entries(text)) {
        const own = e.paragraphs.filter((p) => !/^This option may be repeated/.test(p))
        assert.isAbove(own.length, 0, `${e.heading} has no description in mesh ${words.join(" ")} --help`)
      }
    })
  }

  it("mesh agents list points to mesh agents ls, on one line", () => {
    try {
      help(["agents", "list"])
      assert.fail("mesh agents list succeeded")
    } catch (e) {
      const failed = e as { readonly status: number; readonly stderr: string }
      assert.strictEqual(failed.status, 2)
      assert.strictEqual(failed.stderr, "mesh: there is no \"mesh agents list\"; did you mean \"mesh agents ls\"? (see mesh --help)\n")
    }
  })
})

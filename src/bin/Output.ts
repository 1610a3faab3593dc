/**
 * How `mesh` writes to the terminal: plain text (no ANSI colour) when NO_COLOR is set or the output is not a
 * terminal; usage lines that name the whole command (`$ mesh keys create`, not `$ create`); and a usage error as one
 * line on stderr, `mesh: <what was wrong> (see mesh <command> --help)`, printed once.
 *
 * Floor: bin (docs/architecture.md §3).
 */
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import { colourPrettyLogger, plainPrettyLogger } from "../cli/Observability.js"

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;]*m/g

/** True when output must carry no colour: NO_COLOR set (https://no-color.org), or stdout not a terminal. */
export const isPlain = (env: NodeJS.ProcessEnv = process.env, tty: boolean = process.stdout.isTTY === true): boolean =>
  (env.NO_COLOR !== undefined && env.NO_COLOR !== "") || !tty

/** The subcommand words of an argument list (`["keys", "create"]` of `keys create --owner x`). */
export const commandWords = (args: ReadonlyArray<string>): ReadonlyArray<string> => {
  const words: Array<string> = []
  for (const a of args) {
    if (a.startsWith("-")) break
    words.push(a)
  }
  return words
}

/** Help text with its usage lines naming the whole command: the parser writes a subcommand's usage as `$ create …`. */
export const fixUsage = (text: string, words: ReadonlyArray<string>): string =>
  text.replace(/^\$ (\S+)/gm, (line, first: string) => {
    if (first === "mesh") return line
    const at = words.lastIndexOf(first)
    return `$ mesh ${at < 0 ? first : words.slice(0, at + 1).join(" ")}`
  })

/**
 * What the parser writes under every option of a type before the option's own text ("A file.", "A user-defined piece
 * of text.", "One of the following: …" beside a usage line that lists them already, "This setting is optional." where the
 * usage line's brackets say so): dropped from `--help`.
 */
const FILLER = /^ {2}(An? (integer|floating point number|true or false value|user-defined piece of text( that is confidential)?|(existing )?(file|directory|file or directory)( that must not exist)?)\.|A (file|directory|file or directory) that must not exist\.|One of the following: .*|This option can be set from environment variables\.|This option may be repeated zero or more times\.|This setting is optional\.)\n\n?/gm

/** The parser's own description of `--log-level`, said for this command line. */
const BUILTIN_LOG_LEVEL = "  Sets the minimum log level for a command."
const LOG_LEVEL_TEXT = "  least severe log level printed, for any command (mesh hub and mesh agent also read MESH_HUB_LOG_LEVEL and MESH_AGENT_LOG_LEVEL; default info)"

/** Help text without the parser's filler lines, so each option shows its own description. */
export const dropFiller = (text: string): string =>
  /^USAGE$/m.test(text) ? text.replace(FILLER, "").replace(BUILTIN_LOG_LEVEL, LOG_LEVEL_TEXT) : text

/** A parser error (one or more paragraphs) as the one line `mesh` prints. */
export const errorLine = (text: string, words: ReadonlyArray<string>): string => {
  const paragraphs = text.replace(ANSI, "").split(/\n\s*\n/).map((p) => p.replace(/\s+/g, " ").trim()).filter((p) => p.length > 0)
  const help = words.length === 0 ? "mesh --help" : `mesh ${words.join(" ")} --help`
  return `mesh: ${paragraphs.join("; ")} (see ${help})`
}

/**
 * Runs `effect` with the console and logger `mesh` prints through (the one-line pretty format). Everything `mesh`
 * itself writes to stderr is a line starting `mesh: `; anything else written there is the parser's usage error, which
 * is reshaped into that line.
 */
export const withOutput = (args: ReadonlyArray<string>) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  const plain = isPlain()
  const words = commandWords(args)
  const text = (xs: ReadonlyArray<unknown>) => {
    const t = xs.map(String).join(" ")
    return plain ? t.replace(ANSI, "") : t
  }
  // Log lines are notes beside the result: on stderr, whatever the command.
  const logged = Effect.provide(effect, Logger.replace(Logger.prettyLoggerDefault, isPlain(process.env, process.stderr.isTTY === true) ? plainPrettyLogger : colourPrettyLogger))
  return Console.consoleWith((base) =>
    Effect.withConsole(logged, {
      ...base,
      log: (...xs: ReadonlyArray<unknown>) => base.log(dropFiller(fixUsage(text(xs), words))),
      error: (...xs: ReadonlyArray<unknown>) => {
        const t = text(xs)
        return base.error(t.startsWith("mesh: ") ? t : errorLine(t, words))
      }
    })
  )
}

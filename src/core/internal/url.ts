/**
 * A URL parser that remembers the last text it parsed: a server checks request after request to the same endpoint
 * URL, and what reads the result only reads it.
 *
 * Floor: core (docs/architecture.md §3).
 */

/** A parser with a memory of one: the URL of `text`, or undefined when it is not an absolute URL. */
export const lastUrlParser = (): ((text: string) => URL | undefined) => {
  let lastText: string | undefined
  let lastUrl: URL | undefined
  return (text) => {
    if (text !== lastText) {
      lastText = text
      try {
        lastUrl = new URL(text)
      } catch {
        lastUrl = undefined
      }
    }
    return lastUrl
  }
}

/* eslint-disable @typescript-eslint/no-explicit-any -- response bodies are read loosely, field by field, in assertions */
/**
 * Shared set-up for agent-server tests: raw JSON requests and an SSE reader that can stop early (to test reconnects).
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/** A fresh database file in its own temp folder. */
export const tempDatabase = (name = "agent.db") => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "mesh-agent-")), name)

/** A raw request: status, JSON body (or `{ text }`) and headers. */
export const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body)
    })
    const text = await res.text()
    let json: Record<string, unknown>
    try {
      json = JSON.parse(text)
    } catch {
      json = { text }
    }
    return { status: res.status, body: json as Record<string, any>, headers: res.headers }
  })

/** A GET returning the JSON body. */
export const get = (url: string) =>
  Effect.promise(async () => {
    const res = await fetch(url)
    return { status: res.status, body: (await res.json()) as Record<string, any> }
  })

/** One SSE event as read. */
export interface ReadEvent {
  readonly id: string
  readonly event: string
  readonly data: any
}

/**
 * POSTs asking for SSE and reads events until the stream ends or `stopWhen` says stop (then the connection is
 * dropped, as a client losing its network would).
 */
export const readSse = (
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
  stopWhen: (e: ReadEvent, all: ReadonlyArray<ReadEvent>) => boolean = () => false
) =>
  Effect.promise(async () => {
    const controller = new AbortController()
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream", ...headers },
      body: JSON.stringify(body),
      signal: controller.signal
    })
    const events: Array<ReadEvent> = []
    if (!(res.headers.get("content-type") ?? "").includes("text/event-stream")) {
      return { status: res.status, events, body: (await res.json()) as Record<string, any> }
    }
    const reader = res.body!.getReader()
    const decoder = new TextDecoder()
    let buffer = ""
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        buffer += decoder.decode(value, { stream: true })
        let end: number
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          const fields: Record<string, string> = {}
          for (const line of frame.split("\n")) {
            const i = line.indexOf(": ")
            if (i > 0) fields[line.slice(0, i)] = line.slice(i + 2)
          }
          const e = { id: fields.id ?? "", event: fields.event ?? "message", data: JSON.parse(fields.data ?? "null") }
          events.push(e)
          if (stopWhen(e, events)) {
            controller.abort()
            return { status: res.status, events, body: {} }
          }
        }
      }
    } catch (e) {
      if (!controller.signal.aborted) throw e
    }
    return { status: res.status, events, body: {} }
  })

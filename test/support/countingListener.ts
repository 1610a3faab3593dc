/** A plain node:http listener that answers every request with `reply` as JSON and counts what reached it. */
import * as Effect from "effect/Effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/** A listener on `host` (default 127.0.0.1), closed with the scope: its URL, port and how many requests reached it. */
export const countingListener = (reply: unknown = {}, host = "127.0.0.1") =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly port: number; readonly hits: () => number; readonly server: http.Server }>((resume) => {
      let hits = 0
      const server = http.createServer((req, res) => {
        hits++
        req.resume()
        req.on("end", () => {
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify(reply))
        })
      })
      server.listen(0, host, () => {
        const port = (server.address() as AddressInfo).port
        resume(Effect.succeed({ url: `http://${host}:${port}`, port, hits: () => hits, server }))
      })
    }),
    (l) => Effect.async<void>((resume) => void l.server.close(() => resume(Effect.void)))
  )

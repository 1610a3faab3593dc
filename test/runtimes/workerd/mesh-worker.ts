/**
 * A Worker serving a MeshServer (`MeshServerWeb`) over `Keys.noble`: it streams one chunk and answers with the
 * request's body. The server's identity and the one sender it knows come from the bindings.
 */
import { Keys } from "../../../src/core/Keys.js"
import * as MeshServerWeb from "../../../src/mesh/MeshServerWeb.js"

interface Env {
  readonly SERVER_DID: string
  readonly SERVER_KEY: string
  readonly SENDER_DID: string
  readonly SENDER_PUBLIC_KEY: string
}

let served: ReturnType<typeof MeshServerWeb.toWebHandler> | undefined

export default {
  fetch(request: Request, env: Env): Promise<Response> {
    served ??= MeshServerWeb.toWebHandler(
      {
        agentDid: env.SERVER_DID,
        privateKey: env.SERVER_KEY,
        resolvePublicKey: (did) => (did === env.SENDER_DID ? env.SENDER_PUBLIC_KEY : null),
        onMessage: (envelope, respond, stream) => {
          stream({ part: 1 })
          respond({ echo: envelope.body })
        }
      },
      Keys.noble
    )
    return served.handler(request)
  }
}

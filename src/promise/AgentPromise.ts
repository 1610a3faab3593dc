/**
 * The agent API for callers that do not use Effect: `serve` an agent, `callAgent` another (through the hub, signed
 * with mesh-sig), stream its reply, sign approvals for paused tasks. Promises reject with the typed error (match on
 * `code`); streams are async iterables.
 *
 * Floor: promise (docs/architecture.md §3).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as AgentClient from "../agent/AgentClient.js"
import * as AgentServer from "../agent/AgentServer.js"
import * as Approval from "../core/Approval.js"
import type { PrivateKeyInput } from "../core/Keys.js"
import { runPromise, runWithKeys } from "../node/internal/promiseRuntime.js"

/** A running agent server; `close` stops it. */
export interface ServedAgent extends Omit<AgentServer.RunningAgent, "close"> {
  readonly close: () => Promise<void>
}

/** Starts an agent server (`AgentServer.make`) and resolves once it listens. */
export const serve = async (options: AgentServer.AgentServerOptions): Promise<ServedAgent> => {
  const scope = Effect.runSync(Scope.make())
  try {
    const agent = await runWithKeys(Scope.extend(AgentServer.make(options), scope))
    return { ...agent, close: () => runPromise(Scope.close(scope, Exit.void)) }
  } catch (e) {
    await runPromise(Scope.close(scope, Exit.void))
    throw e
  }
}

/** An agent client whose calls return Promises. */
export interface AgentClientPromise {
  readonly call: (target: string, message: string, options?: AgentClient.CallOptions) => Promise<AgentClient.CallResult>
  readonly stream: (target: string, message: string, options?: AgentClient.CallOptions) => AsyncIterable<AgentClient.StreamEvent>
  readonly resume: (
    target: string,
    taskId: string,
    approval: unknown,
    options?: Pick<AgentClient.CallOptions, "signAs" | "bearerToken">
  ) => Promise<AgentClient.CallResult>
  /** The agent's signed discovery document, read as strict JSON. */
  readonly discover: (target: string) => Promise<Readonly<Record<string, unknown>>>
}

/** A client for calling agents by `didHash` (through `options.hubUrl`) or by URL. */
export const createAgentClient = (options: AgentClient.AgentClientOptions = {}): AgentClientPromise => {
  let client: Promise<AgentClient.AgentClientApi> | undefined
  const get = () => (client ??= runWithKeys(AgentClient.make(options).pipe(Effect.provide(FetchHttpClient.layer))))
  return {
    call: async (target, message, o) => runWithKeys((await get()).call(target, message, o)),
    stream: (target, message, o) => ({
      [Symbol.asyncIterator]: () => {
        const iterator = get().then((c) =>
          Stream.toAsyncIterable(c.stream(target, message, o))[Symbol.asyncIterator]()
        )
        return {
          next: async () => (await iterator).next(),
          return: async () => {
            const it = await iterator
            return it.return === undefined ? { done: true, value: undefined } : it.return()
          }
        }
      }
    }),
    resume: async (target, taskId, approval, o) => runWithKeys((await get()).resume(target, taskId, approval, o)),
    discover: async (target) => runWithKeys((await get()).discover(target))
  }
}

const clients = new Map<string, AgentClientPromise>()

/**
 * Calls the agent with this `didHash`, resolved through the hub at `options.hubUrl` (cached), signing with mesh-sig
 * when `signAs` is given → `{ message, sessionId }` (or the pause at a human gate).
 */
export const callAgent = (
  didHash: string,
  message: string,
  options: AgentClient.CallOptions & { readonly hubUrl?: string } = {}
): Promise<AgentClient.CallResult> => clientFor(options.hubUrl).call(didHash, message, options)

/** `callAgent`, streamed: chunk events, then done (or approval_required). */
export const callAgentStream = (
  didHash: string,
  message: string,
  options: AgentClient.CallOptions & { readonly hubUrl?: string } = {}
): AsyncIterable<AgentClient.StreamEvent> => clientFor(options.hubUrl).stream(didHash, message, options)

const clientFor = (hubUrl: string | undefined): AgentClientPromise => {
  const key = hubUrl ?? ""
  let c = clients.get(key)
  if (c === undefined) clients.set(key, (c = createAgentClient(hubUrl === undefined ? {} : { hubUrl })))
  return c
}

/** Signs an approval (or a denial) of a paused task's capability, as the mandate's grantor. */
export const signApproval = (input: Approval.ApprovalInput, grantorDid: string, privateKey: PrivateKeyInput): Promise<Approval.SignedApproval> =>
  runWithKeys(Approval.signApproval(input, grantorDid, privateKey))

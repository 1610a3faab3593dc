/**
 * A handler's calls to other agents, made as the agent itself (`input.call`, `input.callStream`): the didHash is
 * resolved through the agent's hub, the request is signed with mesh-sig by the agent's own DID and key, and it
 * carries the served request's correlation id and trace context (a child span of the handler's while tracing), so
 * the callee knows who asks and one user request can be followed across agents.
 *
 * Under a task mandate a call is an action like any other: asked of the guard first as `agent:<didHash>` (or
 * `agent:<didHash>/<capability>`), so the mandate's allowed and blocked lists, human gates and action limits apply,
 * and a refusal sends nothing. Without one, or under a mandate of another kind (a payment mandate pays for this
 * agent's work, it does not rule its actions), the call is made unguarded.
 *
 * The run's own mandate never travels: it is granted to this agent and would prove nothing to another (under
 * bearer auth it would be a credential handed on). A handler that needs the callee to act under someone's authority
 * presents a mandate granted to the callee, as `mandate`. Everything a call sends is picked field by field, so a
 * handler in plain JavaScript cannot slip another signer, a bearer token or a forged trace into it.
 *
 * Floor: agent (docs/architecture.md §3).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Stream from "effect/Stream"
import * as AgentClient from "./AgentClient.js"
import { AgentCallError, type AgentClientApi, type CallOptions, type CallResult } from "./AgentClient.js"
import { type AgentCallFailure, type AgentCallOptions, agentCapability, type RunInput } from "./Handler.js"
import type { IdentityApi } from "./Identity.js"
import { parseDidHash } from "../core/Did.js"
import type { Keys } from "../core/Keys.js"
import { decodeUnverified } from "../core/Mandate.js"
import { CorrelationId } from "../http/CorrelationId.js"
import * as HttpClientDefault from "../http/HttpClientDefault.js"
import { settle } from "../node/internal/promiseRuntime.js"

/** The client an agent's handlers call other agents through, over the agent's hub; absent when it has none. */
export class AgentCalls extends Context.Tag("agent-mesh/agent/AgentCalls")<AgentCalls, AgentClientApi>() {}

/** The client over the hub at `hubUrl`. */
export const layer = (hubUrl: string): Layer.Layer<AgentCalls, never, Keys> =>
  Layer.effect(AgentCalls, AgentClient.make({ hubUrl })).pipe(Layer.provide(HttpClientDefault.layer))

/** What an agent's calls need from its server. */
export interface ServerCalls {
  /** Absent when the agent has no hub. */
  readonly client: AgentClientApi | undefined
  readonly identity: IdentityApi
  /** Where the Promise forms run. */
  readonly runtime: Runtime.Runtime<never>
}

/** What the calls of one run need. */
export interface RunCalls {
  /** The mandate the run was called with, if any. */
  readonly mandate: string | undefined
  readonly guardEffect: RunInput["guardEffect"]
  /** The context of the request being served: its correlation id, span and headers. */
  readonly context: Context.Context<never>
}

/** The four forms of a run's calls, as `RunInput` names them. */
export type Calls = Pick<RunInput, "call" | "callEffect" | "callStream" | "callStreamEffect">

const refuse = (code: string, message: string) => Effect.fail(new AgentCallError({ code, message }))

/** Whether calls under `token` ask the task guard: any mandate but one that decodes as another kind. */
const guarded = (token: string | undefined): boolean => {
  if (token === undefined) return false
  const decoded = decodeUnverified(token)
  // One that does not decode goes to the guard, which refuses it with its code.
  return Either.isLeft(decoded) || decoded.right.kind === "task"
}

/** The options a call sends: the handler's own fields only, and this agent as the signer. */
const sent = (identity: IdentityApi, o: AgentCallOptions): CallOptions => ({
  ...(o.sessionId === undefined ? {} : { sessionId: o.sessionId }),
  ...(o.history === undefined ? {} : { history: o.history }),
  ...(o.context === undefined ? {} : { context: o.context }),
  ...(o.mandate === undefined ? {} : { mandate: o.mandate }),
  ...(o.capability === undefined ? {} : { capability: o.capability }),
  ...(o.commit === undefined ? {} : { commit: o.commit }),
  ...(o.idempotencyKey === undefined ? {} : { idempotencyKey: o.idempotencyKey }),
  signAs: { did: identity.did, privateKey: identity.privateKey }
})

/** The calls each run of an agent hands its handler. */
export const make = (server: ServerCalls): ((run: RunCalls) => Calls) => {
  const { identity, client } = server

  /** The checks before anything is sent: an identity, a hub, a didHash, then the guard. */
  const prepare = (run: RunCalls, target: string, o: AgentCallOptions): Effect.Effect<{ readonly didHash: string; readonly client: AgentClientApi }, AgentCallFailure> => {
    if (identity.ephemeral) {
      return refuse(
        "IDENTITY_NOT_CONFIGURED",
        `this agent has no identity of its own (its key was made at start and nobody can resolve it), so it cannot call ${target} as itself: start it with --identity <file> (or give did and privateKey)`
      )
    }
    if (client === undefined) return refuse("HUB_NOT_CONFIGURED", `this agent has no hub to find ${target} in: start it with --hub <url> (or give hubUrl)`)
    return parseDidHash(target).pipe(
      Effect.mapError((e) => new AgentCallError({ code: "AGENT_NOT_FOUND", message: `${e.message}: an agent is called by the didHash it is registered under` })),
      Effect.flatMap((didHash) => {
        const found = { didHash, client }
        if (!guarded(run.mandate)) return Effect.succeed(found)
        const description = `call the agent ${didHash}${o.capability === undefined ? "" : ` for ${o.capability}`}`
        return Effect.as(run.guardEffect(agentCapability(didHash, o.capability), { description, ...o.guard }), found)
      })
    )
  }

  const called = (run: RunCalls, target: string, message: string, o: AgentCallOptions): Effect.Effect<CallResult, AgentCallFailure> =>
    Effect.flatMap(Effect.suspend(() => prepare(run, target, o)), (t) => t.client.call(t.didHash, message, sent(identity, o)))

  const streamed = (run: RunCalls, target: string, message: string, o: AgentCallOptions): Stream.Stream<string, AgentCallFailure> =>
    Stream.unwrap(
      Effect.map(Effect.suspend(() => prepare(run, target, o)), (t) =>
        t.client.stream(t.didHash, message, sent(identity, o)).pipe(
          Stream.mapEffect((e) =>
            e.type === "approval_required"
              ? Effect.fail(new AgentCallError({ code: "APPROVAL_REQUIRED", message: `${target} paused at a human gate for ${e.approvalRequired.capability} (task ${e.approvalRequired.taskId})` }))
              : Effect.succeed(e)
          ),
          Stream.filterMap((e) => (e.type === "chunk" ? Option.some(e.text) : Option.none()))
        )
      )
    )

  // An Effect run in the handler's own fiber keeps its context, with any span the handler opened around the call;
  // run anywhere else (a runtime of the handler's own), it gets the served request's: correlation id, span, headers.
  const inRequest = Effect.map(Effect.serviceOption(CorrelationId), Option.isSome)
  const runPromise = Runtime.runPromiseExit(server.runtime)

  return (run) => {
    const merged = (outer: Context.Context<never>) => Context.merge(outer, run.context)
    return {
      callEffect: (target, message, o = {}) =>
        Effect.flatMap(inRequest, (inside) => (inside ? called(run, target, message, o) : Effect.mapInputContext(called(run, target, message, o), merged))),
      callStreamEffect: (target, message, o = {}) =>
        Stream.unwrap(Effect.map(inRequest, (inside) => (inside ? streamed(run, target, message, o) : Stream.mapInputContext(streamed(run, target, message, o), merged)))),
      call: (target, message, o = {}) => runPromise(Effect.mapInputContext(called(run, target, message, o), merged)).then(settle),
      callStream: (target, message, o = {}) => Stream.toAsyncIterableRuntime(Stream.mapInputContext(streamed(run, target, message, o), merged), server.runtime)
    }
  }
}

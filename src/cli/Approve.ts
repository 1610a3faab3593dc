/**
 * `mesh approve`: the human side of a human gate from the command line. A run paused at a gate (`mesh call` prints
 * the task, the capability and this command) resumes when the mandate's grantor signs an approval of that task and
 * capability (docs/protocol.md, human gates) and sends it to the agent's `/v1/resume`; `--deny` signs a denial, and
 * the agent ends the task.
 *
 * Floor: cli (docs/architecture.md §3).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { signApproval } from "../core/Approval.js"
import { callJson, formatApproval, printResult, readIdentityFile } from "./Cli.js"

/** What `mesh approve` takes. */
export interface ApproveArgs {
  readonly hubUrl: string
  readonly taskId: string
  /** The paused agent: its didHash (resolved on the hub) or its base URL. */
  readonly agent: string
  readonly capability: string
  /** The grantor's identity file: it signs the approval, and the resume request. */
  readonly identity: string
  readonly deny: boolean
  readonly ttlSeconds: Option.Option<number>
  /** Print the outcome as one JSON document: the reply as `mesh call --json` prints it, or `{ status: "denied", … }`. */
  readonly json?: boolean
}

/**
 * Signs the decision as the identity and resumes the task on the agent. Prints the run's reply (or its next pause);
 * a denial the agent ended the task on is printed as such and is not an error.
 */
export const approveTask = (args: ApproveArgs) =>
  Effect.gen(function* () {
    const grantor = yield* readIdentityFile(args.identity)
    const decision = args.deny ? "deny" : "approve"
    const approval = yield* signApproval(
      { taskId: args.taskId, capability: args.capability, decision, ...(Option.isSome(args.ttlSeconds) ? { ttlSeconds: args.ttlSeconds.value } : {}) },
      grantor.did,
      grantor.privateKeyPkcs8B64
    )
    // Loaded only by the commands that call agents.
    const AgentClient = yield* Effect.promise(() => import("../agent/AgentClient.js"))
    const client = yield* AgentClient.make({ hubUrl: args.hubUrl })
    const resumed = yield* client.resume(args.agent, args.taskId, approval, { signAs: { did: grantor.did, privateKey: grantor.privateKeyPkcs8B64 } }).pipe(
      Effect.map(Option.some),
      Effect.catchIf((e) => args.deny && e.code === "HUMAN_GATE_DENIED", () => Effect.succeedNone)
    )
    const json = args.json === true
    if (Option.isNone(resumed)) {
      return yield* printResult(json, { status: "denied", taskId: args.taskId, capability: args.capability }, () => `denied: task ${args.taskId} (${args.capability}) ended by the agent`)
    }
    const reply = resumed.value
    yield* printResult(json, callJson(reply), () => ("status" in reply ? formatApproval(reply, { agent: args.agent, hubUrl: args.hubUrl }) : reply.message))
  }).pipe(Effect.provide(FetchHttpClient.layer))

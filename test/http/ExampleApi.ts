/**
 * A small HttpApi for the serving tests: a GET with a path param, a POST with a JSON body, a typed 409, a defect.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { CorrelationId } from "../../src/http/CorrelationId.js"
import { InvalidJson, PayloadTooLarge } from "../../src/http/ErrorBody.js"

export class Agent extends Schema.Class<Agent>("Agent")({ id: Schema.String, name: Schema.String }) {}

export class AgentNotFound extends Schema.TaggedError<AgentNotFound>()(
  "AgentNotFound",
  { code: Schema.Literal("AGENT_NOT_FOUND"), message: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

export class AgentExists extends Schema.TaggedError<AgentExists>()(
  "AgentExists",
  { code: Schema.Literal("AGENT_EXISTS"), message: Schema.String, id: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) {}

export const CreateAgent = Schema.Struct({ id: Schema.String.pipe(Schema.minLength(1)), name: Schema.String })

export class AgentsGroup extends HttpApiGroup.make("agents")
  .add(
    HttpApiEndpoint.get("get", "/agents/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(Agent)
      .addError(AgentNotFound)
  )
  .add(HttpApiEndpoint.post("create", "/agents").setPayload(CreateAgent).addSuccess(Agent, { status: 201 }).addError(AgentExists))
  .add(HttpApiEndpoint.get("whoami", "/whoami").addSuccess(Schema.Struct({ correlationId: Schema.String })))
  .add(HttpApiEndpoint.get("boom", "/boom").addSuccess(Schema.String))
  .prefix("/v1") {}

export class ExampleApi extends HttpApi.make("example").add(AgentsGroup).addError(InvalidJson).addError(PayloadTooLarge) {}

/** Handlers over an in-memory map seeded with one agent. */
export const AgentsLive = HttpApiBuilder.group(ExampleApi, "agents", (handlers) =>
  Effect.sync(() => {
    const agents = new Map<string, Agent>([["a1", new Agent({ id: "a1", name: "Alice" })]])
    return handlers
      .handle("get", ({ path }) =>
        Effect.suspend(() => {
          const agent = agents.get(path.id)
          return agent ? Effect.succeed(agent) : Effect.fail(new AgentNotFound({ code: "AGENT_NOT_FOUND", message: `no agent ${path.id}` }))
        })
      )
      .handle("create", ({ payload }) =>
        Effect.suspend(() => {
          if (agents.has(payload.id)) {
            return Effect.fail(new AgentExists({ code: "AGENT_EXISTS", message: `agent ${payload.id} exists`, id: payload.id }))
          }
          const agent = new Agent(payload)
          agents.set(agent.id, agent)
          // Yield once so concurrent requests interleave through the async path of the server.
          return Effect.as(Effect.yieldNow(), agent)
        })
      )
      .handle("whoami", () => Effect.map(CorrelationId, (correlationId) => ({ correlationId })))
      .handle("boom", () => Effect.die(new Error("secret stack detail")))
  })
)

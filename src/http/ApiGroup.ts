/**
 * `group`: `HttpApiBuilder.group` that also hands its handlers to the lean server. The layer it makes is
 * HttpApiBuilder's own (the same routes on `HttpApiBuilder.Router`, so stock `HttpApiBuilder.serve`,
 * `toWebHandler` and tests over them see no difference); when the lean server builds it, the handler functions of the
 * group, the group's context and its middleware are also recorded in `CompiledGroups`, from which `Serve` compiles
 * each endpoint once at start (docs/architecture.md §6). A group made with plain `HttpApiBuilder.group` is still
 * served, through its route effect.
 *
 * Floor: http (docs/architecture.md §3).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"

/** One implemented endpoint, as `HttpApiBuilder.Handlers` holds it. */
export interface HandlerItem {
  readonly endpoint: HttpApiEndpoint.HttpApiEndpoint.AnyWithProps
  readonly handler: (request: unknown) => Effect.Effect<unknown, unknown, unknown>
  readonly withFullRequest: boolean
  readonly uninterruptible: boolean
}

/** A group's handlers with the context its layer was built in (its services and its middleware implementations). */
export interface GroupHandlers {
  readonly group: HttpApiGroup.HttpApiGroup.AnyWithProps
  readonly items: ReadonlyArray<HandlerItem>
  readonly context: Context.Context<never>
}

/** Where groups made with `group` record their handlers while the lean server builds them. */
export class CompiledGroups extends Context.Tag("agent-mesh/http/CompiledGroups")<CompiledGroups, { readonly add: (group: GroupHandlers) => void }>() {}

interface HandlersLike {
  readonly group: HttpApiGroup.HttpApiGroup.AnyWithProps
  readonly handlers: Chunk.Chunk<HandlerItem>
}

/**
 * `HttpApiBuilder.group`, with the same types and the same layer, whose handlers the lean server also compiles.
 * `build` runs once, as with HttpApiBuilder.
 */
export const group: typeof HttpApiBuilder.group = (api, groupName, build) =>
  HttpApiBuilder.group(api, groupName, ((handlers: never) => {
    const result = (build as (h: never) => unknown)(handlers)
    // Runs inside HttpApiBuilder.group's own effect, so this context is the one its routes capture.
    return Effect.flatMap(Effect.context<never>(), (context) =>
      Effect.map((Effect.isEffect(result) ? result : Effect.succeed(result)) as Effect.Effect<HandlersLike>, (built) => {
        const registry = Context.getOption(context, CompiledGroups)
        if (registry._tag === "Some") registry.value.add({ group: built.group, items: Chunk.toReadonlyArray(built.handlers), context })
        return built
      }))
  }) as never)

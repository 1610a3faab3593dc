/**
 * The saga routes of a hub that runs no sagas: every one answers 503 `SAGAS_DISABLED`, naming the flag that turns
 * sagas on, rather than a bare `ROUTE_NOT_FOUND` that leaves a caller guessing whether the URL or the hub is wrong.
 * A hub with sagas serves `SagaApi`'s group on the same paths instead (docs/sagas.md).
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Layer from "effect/Layer"
import * as ApiGroup from "../http/ApiGroup.js"
import { HubApi } from "./HubApi.js"
import { ApiKeyAuthLive, docsPage, GroupsLive } from "./HubHttp.js"

/** This hub was started without a saga runner, so it takes no sagas. */
export class SagasDisabled extends Schema.TaggedError<SagasDisabled>()(
  "SagasDisabled",
  { code: Schema.Literal("SAGAS_DISABLED"), message: Schema.String },
  HttpApiSchema.annotations({ status: 503 })
) {}

/** What every saga route of such a hub answers. */
export const SAGAS_DISABLED_MESSAGE = "this hub runs no sagas: start it with --saga-identity <runner identity file> (mesh hub), or SagaHub.start in code"

const SagaPath = Schema.Struct({ sagaId: Schema.String })
const DESCRIPTION = "This hub runs no sagas (started without a saga runner): always 503 SAGAS_DISABLED."

/** The saga paths, each refused. Bodies are not read: whatever is sent, the answer is the same. */
export class SagasDisabledGroup extends HttpApiGroup.make("sagas")
  .add(HttpApiEndpoint.post("startSaga", "/sagas").setPayload(Schema.Unknown).addSuccess(Schema.Void).annotate(OpenApi.Description, DESCRIPTION))
  .add(HttpApiEndpoint.get("listSagas", "/sagas").addSuccess(Schema.Void).annotate(OpenApi.Description, DESCRIPTION))
  .add(HttpApiEndpoint.get("getSaga", "/sagas/:sagaId").setPath(SagaPath).addSuccess(Schema.Void).annotate(OpenApi.Description, DESCRIPTION))
  .add(HttpApiEndpoint.get("sagaEvents", "/sagas/:sagaId/events").setPath(SagaPath).addSuccess(Schema.Void).annotate(OpenApi.Description, DESCRIPTION))
  .prefix("/v1")
  .addError(SagasDisabled) {}

/** The contract a hub without sagas serves: the hub's, with the saga paths refused. */
export class HubWithoutSagasApi extends HubApi.add(SagasDisabledGroup) {}

const refuse = () => Effect.fail(new SagasDisabled({ code: "SAGAS_DISABLED", message: SAGAS_DISABLED_MESSAGE }))

/** The handlers of the refused saga paths. */
export const SagasDisabledLive = ApiGroup.group(HubWithoutSagasApi, "sagas", (handlers) =>
  Effect.succeed(handlers.handle("startSaga", refuse).handle("listSagas", refuse).handle("getSaga", refuse).handle("sagaEvents", refuse))
)

/** `/openapi.json` and `/docs` of such a hub, computed from its contract when first asked for. */
const DocsWithoutSagasLive = ApiGroup.group(HubWithoutSagasApi, "docs", (handlers) =>
  Effect.sync(() => {
    let doc: OpenApi.OpenAPISpec | undefined = undefined
    let page: string | undefined = undefined
    const docOnce = () => (doc ??= OpenApi.fromApi(HubWithoutSagasApi))
    return handlers.handle("openapi", () => Effect.sync(docOnce)).handle("docs", () => Effect.sync(() => (page ??= docsPage(docOnce()))))
  })
)

/** Every group of a hub without sagas, needing the hub's services. */
export const HandlersWithoutSagasLive = Layer.mergeAll(GroupsLive, DocsWithoutSagasLive, SagasDisabledLive).pipe(Layer.provide(ApiKeyAuthLive))

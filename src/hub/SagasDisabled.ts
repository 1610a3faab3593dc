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
import * as ApiGroup from "../http/ApiGroup.js"
import { HubApi } from "./HubApi.js"

/** This hub was started without a saga runner, so it takes no sagas. */
export class SagasDisabled extends Schema.TaggedError<SagasDisabled>()(
  "SagasDisabled",
  { code: Schema.Literal("SAGAS_DISABLED"), message: Schema.String },
  HttpApiSchema.annotations({ status: 503 })
) {}

/** What every saga route of such a hub answers. */
export const SAGAS_DISABLED_MESSAGE = "this hub runs no sagas: start it with --saga-identity <runner identity file> (mesh hub), or SagaHub.start in code"

const SagaPath = Schema.Struct({ sagaId: Schema.String })

/** The saga paths, each refused. Bodies are not read: whatever is sent, the answer is the same. */
export class SagasDisabledGroup extends HttpApiGroup.make("sagas")
  .add(HttpApiEndpoint.post("startSaga", "/sagas").setPayload(Schema.Unknown).addSuccess(Schema.Void))
  .add(HttpApiEndpoint.get("getSaga", "/sagas/:sagaId").setPath(SagaPath).addSuccess(Schema.Void))
  .add(HttpApiEndpoint.get("sagaEvents", "/sagas/:sagaId/events").setPath(SagaPath).addSuccess(Schema.Void))
  .prefix("/v1")
  .addError(SagasDisabled) {}

/** The contract a hub without sagas serves: the hub's, with the saga paths refused. */
export class HubWithoutSagasApi extends HubApi.add(SagasDisabledGroup) {}

const refuse = () => Effect.fail(new SagasDisabled({ code: "SAGAS_DISABLED", message: SAGAS_DISABLED_MESSAGE }))

/** The handlers of the refused saga paths. */
export const SagasDisabledLive = ApiGroup.group(HubWithoutSagasApi, "sagas", (handlers) =>
  Effect.succeed(handlers.handle("startSaga", refuse).handle("getSaga", refuse).handle("sagaEvents", refuse))
)

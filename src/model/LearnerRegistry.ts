/**
 * The hub's learner statistics over HTTP, from the model floor: `GET {registry}/v1/learner-stats` reads the counts
 * every publisher sent, summed per (model, task type); `POST {registry}/v1/learner-stats` with an API key publishes
 * this learner's own counts (its totals, which replace what it published before, so publishing twice never counts
 * twice). The wire schemas are `ModelLearner.LearnerStats` (read) and `ModelLearner.PublishedLearnerStats` (publish,
 * at most `MAX_ARM_TRIALS` trials per pair); the hub imports them from here, so both sides read one definition and
 * the model floor never imports the hub.
 *
 * Floor: model (docs/architecture.md §3).
 */
import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { LearnerStats, MAX_ARM_TRIALS, scaleCounts } from "./ModelLearner.js"

/** The path of the learner statistics on a hub. */
export const LEARNER_STATS_PATH = "/v1/learner-stats"

/** What a publish answers: how many (model, task type) rows the hub now holds from this publisher. */
export const PublishResult = Schema.Struct({ accepted: Schema.NonNegativeInt })
/** What a publish answers. */
export type PublishResult = typeof PublishResult.Type

/** The hub could not be reached, refused the request, or answered out of shape (the spec's REGISTRY_UNREACHABLE; `status` is the hub's when it answered). */
export class RegistryUnreachable extends Schema.TaggedError<RegistryUnreachable>()("RegistryUnreachable", {
  code: Schema.Literal("REGISTRY_UNREACHABLE"),
  message: Schema.String,
  status: Schema.optional(Schema.Number)
}) {}

const TIMEOUT = Duration.seconds(10)

const unavailable = (message: string, status?: number) =>
  new RegistryUnreachable({ code: "REGISTRY_UNREACHABLE", message, ...(status === undefined ? {} : { status }) })

const send = <A, I>(request: HttpClientRequest.HttpClientRequest, schema: Schema.Schema<A, I>) =>
  Effect.flatMap(HttpClient.HttpClient, (client) =>
    client.execute(request).pipe(
      Effect.flatMap((response) =>
        response.status >= 200 && response.status < 300
          ? Effect.mapError(HttpClientResponse.schemaBodyJson(schema)(response), () => unavailable("the hub's answer is out of shape"))
          : Effect.fail(unavailable(`the hub answered HTTP ${response.status}`, response.status))
      ),
      Effect.catchTags({
        RequestError: (e) => Effect.fail(unavailable(`could not reach the hub (${e.reason})`)),
        ResponseError: (e) => Effect.fail(unavailable(`the hub's answer broke off (${e.reason})`))
      }),
      Effect.scoped,
      Effect.timeoutFail({ duration: TIMEOUT, onTimeout: () => unavailable(`no answer within ${Duration.format(TIMEOUT)}`) })
    )
  )

const url = (registryUrl: string) => `${registryUrl.replace(/\/+$/, "")}${LEARNER_STATS_PATH}`

/** Reads the mesh's aggregated learner counts from the hub at `registryUrl`. */
export const fetchStats = (registryUrl: string): Effect.Effect<LearnerStats, RegistryUnreachable, HttpClient.HttpClient> =>
  send(HttpClientRequest.get(url(registryUrl)), LearnerStats)

/**
 * Publishes this learner's own counts to the hub at `registryUrl` under an API key, each pair scaled to at most
 * `MAX_ARM_TRIALS` trials (a long-lived learner's counts outgrow the hub's bound, and the hub weighs no pair by more).
 */
export const publishStats = (
  registryUrl: string,
  apiKey: string | Redacted.Redacted,
  stats: LearnerStats
): Effect.Effect<PublishResult, RegistryUnreachable, HttpClient.HttpClient> =>
  send(
    HttpClientRequest.post(url(registryUrl), {
      body: HttpBody.unsafeJson({ stats: stats.stats.map((s) => ({ ...s, ...scaleCounts(s.successes, s.failures, MAX_ARM_TRIALS) })) }),
      headers: { authorization: `Bearer ${typeof apiKey === "string" ? apiKey : Redacted.value(apiKey)}` }
    }),
    PublishResult
  )

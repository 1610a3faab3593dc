/**
 * What the HTTP model providers share when a call fails: every failure is a `ModelError` whose message names the
 * provider and never carries the key (some providers quote the key they were sent in their error text, and it must
 * not reach callers or logs); HTTP statuses map through `fromHttpStatus` with `Retry-After`; transport, stream and
 * timeout failures map to PROVIDER_UNAVAILABLE or PROVIDER_BAD_RESPONSE.
 *
 * Floor: model (docs/architecture.md §3).
 */
import type * as AiError from "@effect/ai/AiError"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Stream from "effect/Stream"
import { errorDetail, fromHttpStatus, ModelError, type ModelErrorCode, parseRetryAfter } from "../../core/ModelProvider.js"

/** What a provider's failures are phrased with. */
export interface ProviderFailureOptions {
  /** Prefixes every message. */
  readonly name: string
  /** The key in clear, scrubbed from every message; empty when there is none. */
  readonly secret: string
  /** The bound a timed-out call reports. */
  readonly timeout: Duration.Duration
  /** The message for a stream event that does not decode. */
  readonly undecodableStream: string
}

/** The failure constructors and mappings of one provider. */
export const make = ({ name, secret, timeout, undecodableStream }: ProviderFailureOptions) => {
  const scrub = (text: string): string => (secret.length > 0 ? text.split(secret).join("[redacted]") : text)
  const failure = (code: ModelErrorCode, message: string): ModelError => new ModelError({ code, message: scrub(`${name}: ${message}`) })
  const unavailable = (message: string) => failure("PROVIDER_UNAVAILABLE", message)
  const badResponse = (message: string) => failure("PROVIDER_BAD_RESPONSE", message)
  const timedOut = () => unavailable(`no answer within ${Duration.format(timeout)}`)

  const statusFailure = (status: number, headers: Readonly<Record<string, string>>, body: string | undefined) =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      const retryAfter = parseRetryAfter(headers["retry-after"], now)
      // The text of an auth failure is about the key; say nothing of it.
      const detail = status === 401 || status === 403 ? "the API key was refused" : errorDetail(body)
      return fromHttpStatus(status, scrub(`${name}: HTTP ${status}${detail ? `: ${detail}` : ""}`), retryAfter)
    })

  const fromClientError = (error: HttpClientError.HttpClientError): ModelError =>
    error._tag === "RequestError"
      ? unavailable(`could not reach the server (${error.reason}${error.description ? `: ${error.description}` : ""})`)
      : unavailable(`the answer broke off (${error.reason})`)

  const fromAiError = (error: AiError.AiError): Effect.Effect<ModelError> => {
    switch (error._tag) {
      case "HttpRequestError":
        return Effect.succeed(unavailable(`could not reach the server (${error.reason})`))
      case "HttpResponseError":
        return error.reason === "StatusCode"
          ? statusFailure(error.response.status, error.response.headers, error.body)
          : Effect.succeed(
            error.reason === "EmptyBody" ? badResponse("empty stream") : unavailable(`the stream broke off (${error.reason})`)
          )
      case "MalformedOutput":
        return Effect.succeed(badResponse(undecodableStream))
      default:
        return Effect.succeed(unavailable(error.message))
    }
  }

  /** A whole call with its transport failures mapped, bounded by the timeout. */
  const callFailures = <A, R>(
    call: Effect.Effect<A, ModelError | HttpClientError.HttpClientError, R>
  ): Effect.Effect<A, ModelError, R> =>
    call.pipe(
      Effect.catchTags({
        RequestError: (error) => Effect.fail(fromClientError(error)),
        ResponseError: (error) => Effect.fail(fromClientError(error))
      }),
      Effect.timeoutFail({ duration: timeout, onTimeout: timedOut })
    )

  /** A client's `streamRequest` stream with its failures mapped, and each wait for the next event bounded. */
  const streamFailures = <A, R>(events: Stream.Stream<A, AiError.AiError, R>): Stream.Stream<A, ModelError, R> =>
    events.pipe(
      Stream.catchAll((error) => Stream.fromEffect(Effect.flatMap(fromAiError(error), Effect.fail))),
      // A parser failure (an event over 10 MiB) is a defect in `streamRequest`; it is the server's fault.
      Stream.catchAllCause((cause) =>
        Option.match(Option.filter(Cause.dieOption(cause), Predicate.isTagged("SseError")), {
          onNone: () => Stream.failCause(cause),
          onSome: () => Stream.fail(badResponse("oversized stream event"))
        })
      ),
      Stream.timeoutFail(timedOut, timeout)
    )

  return { scrub, failure, unavailable, badResponse, timedOut, statusFailure, fromClientError, fromAiError, callFailures, streamFailures }
}

/**
 * The model catalogue: which models a router may choose from, who serves each one (`provider`), how strong it is
 * (`tier`, 1 = cheapest and weakest; escalation climbs tiers), what it costs and how much it reads at once.
 *
 * Prices are integers, as every amount is in this package (`core/Money`): micro-USD **per million tokens**. A price
 * per single token in whole micro-dollars cannot be written for the models people actually use ($0.15 per million
 * tokens is 0.15 micro-USD a token), and rounding it to 0 or 1 would make the cheapest models free or 7× dearer.
 * Per million tokens every published price is an exact integer, and the cost of a call
 * (`tokens × price / 1 000 000`, rounded up) is computed in integers well below 2^53. Rounding up means a budget
 * is never under-charged.
 *
 * Config is read with Schema: USD prices as decimals per million tokens (`inputUsdPerMTok: 0.15`), read exactly
 * through `Money.parseUsd`, never through float arithmetic.
 *
 * Floor: model (docs/architecture.md §3).
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { type Micros, parseUsd } from "../core/Money.js"

/** A price: USD per million tokens, in its config form a decimal, decoded to integer micro-USD per million tokens. */
export const UsdPerMTok = Schema.transformOrFail(Schema.Number, Schema.Number, {
  strict: true,
  decode: (usd, _, ast) =>
    Either.match(parseUsd(usd), {
      onLeft: (e) => ParseResult.fail(new ParseResult.Type(ast, usd, e.message)),
      onRight: (micros) => ParseResult.succeed(micros as number)
    }),
  encode: (micros) => ParseResult.succeed(micros / 1_000_000)
})

/** One model as configured. */
export const ModelSpecConfig = Schema.Struct({
  /** The id sent to the provider (`model` of a `ChatRequest`), unique in a catalogue. */
  id: Schema.NonEmptyTrimmedString,
  /** The provider serving it, a key of the router's provider map (`ModelProviders`). */
  provider: Schema.NonEmptyTrimmedString,
  /** 1 = cheapest and weakest; escalation goes to the next tier up. */
  tier: Schema.Int.pipe(Schema.between(1, 100)),
  inputUsdPerMTok: UsdPerMTok,
  outputUsdPerMTok: UsdPerMTok,
  /** Prompt plus answer tokens the model reads and writes in one call. */
  contextWindow: Schema.Int.pipe(Schema.between(256, 100_000_000)),
  /** Longest answer the router asks of it; default 1024. */
  maxOutputTokens: Schema.optional(Schema.Int.pipe(Schema.between(1, 10_000_000)))
})

/** A catalogue as configured: at least one model, ids unique. */
export const CatalogueConfig = Schema.Struct({
  models: Schema.NonEmptyArray(ModelSpecConfig)
}).pipe(
  Schema.filter((c) => {
    const ids = new Set<string>()
    for (const m of c.models) {
      if (ids.has(m.id)) return `model id ${JSON.stringify(m.id)} appears twice`
      ids.add(m.id)
    }
    return true
  })
)

/** One model of a catalogue, prices in integer micro-USD per million tokens. */
export interface ModelSpec {
  readonly id: string
  readonly provider: string
  readonly tier: number
  readonly inputMicrosPerMTok: number
  readonly outputMicrosPerMTok: number
  readonly contextWindow: number
  readonly maxOutputTokens: number
}

/** A decoded catalogue: models sorted by tier, then by price (cheapest first). */
export interface ModelCatalogue {
  readonly models: ReadonlyArray<ModelSpec>
  readonly byId: ReadonlyMap<string, ModelSpec>
}

/** Longest answer asked of a model whose config names none. */
export const DEFAULT_MAX_OUTPUT_TOKENS = 1024

/** The cost of a call in micro-USD: integer, rounded up, so a budget is never under-charged. */
export const costMicros = (model: ModelSpec, inputTokens: number, outputTokens: number): Micros =>
  Math.ceil((inputTokens * model.inputMicrosPerMTok + outputTokens * model.outputMicrosPerMTok) / 1_000_000) as Micros

/** Builds a catalogue from decoded specs. */
export const fromSpecs = (specs: ReadonlyArray<ModelSpec>): ModelCatalogue => {
  const models = [...specs].sort((a, b) =>
    a.tier - b.tier || a.inputMicrosPerMTok + a.outputMicrosPerMTok - (b.inputMicrosPerMTok + b.outputMicrosPerMTok) || (a.id < b.id ? -1 : 1)
  )
  return { models, byId: new Map(models.map((m) => [m.id, m])) }
}

/** Reads a catalogue from config (JSON), failing with Schema's `ParseError` on anything out of shape. */
export const decode = (config: unknown): Either.Either<ModelCatalogue, ParseResult.ParseError> =>
  Either.map(Schema.decodeUnknownEither(CatalogueConfig)(config), (c) =>
    fromSpecs(
      c.models.map((m) => ({
        id: m.id,
        provider: m.provider,
        tier: m.tier,
        inputMicrosPerMTok: m.inputUsdPerMTok,
        outputMicrosPerMTok: m.outputUsdPerMTok,
        contextWindow: m.contextWindow,
        maxOutputTokens: m.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS
      }))
    )
  )

/**
 * The default catalogue: three tiers of an OpenAI-compatible provider named `openai`, at list prices of
 * 2026-11 in USD per million tokens. A deployment with other models passes its own config to `decode`.
 */
export const defaultConfig: typeof CatalogueConfig.Encoded = {
  models: [
    { id: "gpt-4o-mini", provider: "openai", tier: 1, inputUsdPerMTok: 0.15, outputUsdPerMTok: 0.6, contextWindow: 128_000 },
    { id: "gpt-4.1-mini", provider: "openai", tier: 2, inputUsdPerMTok: 0.4, outputUsdPerMTok: 1.6, contextWindow: 1_000_000 },
    { id: "gpt-4.1", provider: "openai", tier: 3, inputUsdPerMTok: 2, outputUsdPerMTok: 8, contextWindow: 1_000_000 }
  ]
}

/** `decode(defaultConfig)`. */
export const defaultCatalogue: ModelCatalogue = Either.getOrThrow(decode(defaultConfig))

/** A catalogue of one model, for an agent served with a single `model`: tier 1, priced at zero unless told. */
export const single = (
  id: string,
  provider: string,
  price: { readonly inputMicrosPerMTok?: number; readonly outputMicrosPerMTok?: number } = {}
): ModelCatalogue =>
  fromSpecs([{
    id,
    provider,
    tier: 1,
    inputMicrosPerMTok: price.inputMicrosPerMTok ?? 0,
    outputMicrosPerMTok: price.outputMicrosPerMTok ?? 0,
    contextWindow: 128_000,
    maxOutputTokens: DEFAULT_MAX_OUTPUT_TOKENS
  }])

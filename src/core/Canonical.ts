/**
 * RFC 8785 JSON Canonicalization Scheme: the bytes that get signed everywhere in the mesh.
 *
 * Floor: core (docs/architecture.md §3).
 */
import canonicalize from "canonicalize"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { utf8 } from "./internal/bytes.js"

/** A value that has no JCS form: NaN, Infinity, a lone surrogate, a cycle, or nothing JSON can hold. */
export class NotCanonicalizable extends Schema.TaggedError<NotCanonicalizable>()("NotCanonicalizable", {
  code: Schema.Literal("NOT_CANONICALIZABLE"),
  message: Schema.String
}) {}

/** The JCS string of a JSON value. */
export const canonicalJson = (value: unknown): Either.Either<string, NotCanonicalizable> => {
  try {
    const out = canonicalize(value)
    return out === undefined
      ? Either.left(new NotCanonicalizable({ code: "NOT_CANONICALIZABLE", message: "value has no JSON form" }))
      : Either.right(out)
  } catch (e) {
    return Either.left(new NotCanonicalizable({ code: "NOT_CANONICALIZABLE", message: e instanceof Error ? e.message : String(e) }))
  }
}

/** The UTF-8 bytes of the JCS form of a JSON value. */
export const canonicalBytes = (value: unknown): Either.Either<Uint8Array, NotCanonicalizable> =>
  Either.map(canonicalJson(value), utf8)

"""Commit tokens (docs/protocol.md §13): the signed receipt an agent gives for one saga step it ran. A JWS compact
token (``alg`` EdDSA, ``typ`` commit+jwt, ``kid`` ``<issuer>#key-1``) whose payload is the receipt; header and
payload are written in their JCS form, so one receipt and one key give one token."""

from __future__ import annotations

import re
from typing import Any, Mapping

from .did import KeyRevoked, is_normalized_did, verification_method_id
from .jcs import NotCanonicalizable, StrictJsonError, canonical_bytes, canonicalize, parse_json_strict
from .keys import (
    MalformedKey,
    PrivateKeyInput,
    b64url_decode,
    b64url_encode,
    load_private_key,
    sha256,
    sign as ed_sign,
    verify as ed_verify,
)
from .mandate import KeyResolveError, to_key_source
from .money import InvalidAmount, format_usd_string, parse_usd
from .timestamp import is_utc_timestamp

__all__ = [
    "COMMIT_TOKEN_TYP",
    "MAX_TOKEN_LENGTH",
    "CommitTokenError",
    "digest_result",
    "sign",
    "verify",
    "decode_unverified",
    "receipt_problem",
]

COMMIT_TOKEN_TYP = "commit+jwt"
MAX_TOKEN_LENGTH = 8192

_RECEIPT_KEYS = ("sagaId", "step", "capability", "amountUsd", "resultDigest", "at", "issuer")
_DIGEST = re.compile(r"[A-Za-z0-9_-]{43}")


class CommitTokenError(ValueError):
    """A token that does not decode or verify, or a receipt that cannot be signed; ``code`` is one of
    ``MALFORMED_TOKEN``, ``SIGNATURE_INVALID``, ``KEY_NOT_FOUND``, ``KEY_REVOKED``, ``RESOLVER_UNAVAILABLE``,
    ``INVALID_RECEIPT``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _js_len(s: str) -> int:
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def receipt_problem(r: Any) -> str | None:
    """Why ``r`` is not a commit receipt (§13.1), or None."""
    if not isinstance(r, dict):
        return "not an object"
    for k in r:
        if k not in _RECEIPT_KEYS:
            return f"unknown member {k!r}"
    for k in ("sagaId", "step", "capability"):
        v = r.get(k)
        if not isinstance(v, str) or not 1 <= _js_len(v) <= 200:
            return f"{k} must be a string of 1 to 200 characters"
    amount = r.get("amountUsd")
    if not isinstance(amount, str):
        return "amountUsd must be a decimal string"
    try:
        parse_usd(amount)
    except InvalidAmount:
        return "amountUsd must be a non-negative USD decimal"
    if not isinstance(r.get("resultDigest"), str) or not _DIGEST.fullmatch(r["resultDigest"]):
        return "resultDigest must be 43 characters of base64url"
    if not is_utc_timestamp(r.get("at")):
        return "at must be an RFC 3339 UTC timestamp"
    if not is_normalized_did(r.get("issuer")):
        return "issuer must be a lower-case did:mesh DID"
    return None


def digest_result(result: Any) -> str:
    """The receipt's ``resultDigest``: base64url of SHA-256 over the JCS form of the result."""
    try:
        return b64url_encode(sha256(canonical_bytes(result)))
    except NotCanonicalizable as e:
        raise CommitTokenError("INVALID_RECEIPT", f"the result has no JSON form: {e}") from e


def sign(receipt: Mapping[str, Any], private_key: PrivateKeyInput) -> str:
    """Signs a receipt with the issuer's key; ``amountUsd`` is written in its canonical form."""
    r = dict(receipt)
    problem = receipt_problem(r)
    if problem is not None:
        raise CommitTokenError("INVALID_RECEIPT", f"the receipt is not valid: {problem}")
    r["amountUsd"] = format_usd_string(parse_usd(r["amountUsd"]))
    key = load_private_key(private_key)
    header = {"alg": "EdDSA", "typ": COMMIT_TOKEN_TYP, "kid": verification_method_id(r["issuer"])}
    signing_input = (
        b64url_encode(canonicalize(header).encode("utf-8")) + "." + b64url_encode(canonicalize(r).encode("utf-8"))
    )
    return signing_input + "." + b64url_encode(ed_sign(key, signing_input.encode("ascii")))


def _segment_json(s: str) -> Any:
    try:
        return parse_json_strict(b64url_decode(s, canonical=True).decode("utf-8"))
    except (ValueError, UnicodeDecodeError, StrictJsonError):
        return None


def _parse(token: Any) -> tuple[dict[str, Any], bytes, bytes]:
    def malformed(message: str) -> CommitTokenError:
        return CommitTokenError("MALFORMED_TOKEN", message)

    if not isinstance(token, str):
        raise malformed("a commit token is a string")
    if _js_len(token) > MAX_TOKEN_LENGTH:
        raise malformed(f"token longer than {MAX_TOKEN_LENGTH} characters")
    parts = token.split(".")
    if len(parts) != 3:
        raise malformed("not a JWS compact token (three segments)")
    h, p, s = parts
    header = _segment_json(h)
    if not isinstance(header, dict):
        raise malformed("header is not base64url I-JSON")
    for k in header:
        if k not in ("alg", "typ", "kid"):
            raise malformed(f"unsupported header member {k!r}")
    if header.get("alg") != "EdDSA":
        raise malformed("alg must be EdDSA")
    if header.get("typ") != COMMIT_TOKEN_TYP:
        raise malformed(f"typ must be {COMMIT_TOKEN_TYP}")
    receipt = _segment_json(p)
    problem = receipt_problem(receipt)
    if problem is not None:
        raise malformed(f"payload is not a commit receipt: {problem}")
    if header.get("kid") != verification_method_id(receipt["issuer"]):
        raise malformed("kid must be the issuer's #key-1")
    try:
        signature = b64url_decode(s, canonical=True)
    except ValueError:
        signature = b""
    if len(signature) != 64:
        raise malformed("signature is not 64 bytes of base64url")
    return receipt, (h + "." + p).encode("ascii"), signature


def decode_unverified(token: str) -> dict[str, Any]:
    """A token's receipt without checking its signature: for display and routing only, never for billing."""
    return _parse(token)[0]


def verify(token: str, keys: Any) -> dict[str, Any]:
    """Verifies a commit token under its issuer's key (raw bytes, publicKeyB64, a map DID → key or a resolver) and
    returns the receipt; raises ``CommitTokenError``."""
    receipt, signing_input, signature = _parse(token)
    source = to_key_source(keys)
    if isinstance(source, bytes):
        public_key = source
    else:
        try:
            public_key = source.resolve(receipt["issuer"]).public_key
        except KeyResolveError as e:
            raise CommitTokenError(e.code, str(e)) from e
        except KeyRevoked as e:
            raise CommitTokenError("KEY_REVOKED", str(e)) from e
        except Exception as e:
            raise CommitTokenError("RESOLVER_UNAVAILABLE", str(e)) from e
    try:
        ok = ed_verify(public_key, signing_input, signature)
    except MalformedKey as e:
        raise CommitTokenError("SIGNATURE_INVALID", str(e)) from e
    if not ok:
        raise CommitTokenError("SIGNATURE_INVALID", f"signature does not verify under {receipt['issuer']}'s key")
    return receipt

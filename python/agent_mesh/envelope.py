"""Signed envelopes (docs/protocol.md §5): how agents talk. ``build_envelope`` signs with eddsa-jcs-2022;
``validate_envelope`` checks shape, addressee, time window, signature, and only then records the nonce, so forged
traffic cannot burn a sender's nonces."""

from __future__ import annotations

import logging
import math
import re
import secrets
import uuid
from typing import Any, Mapping

from . import base58
from .did import is_normalized_did, parse_did, verification_method_id
from .jcs import NotCanonicalizable
from .keys import (
    MalformedKey,
    PrivateKeyInput,
    PublicKeyInput,
    b64decode,
    b64url_encode,
    load_private_key,
    sign,
    verify,
)
from .nonce import NonceRecordError, NonceStore
from .proof import CRYPTOSUITE, hash_data
from .timestamp import now_ms as _wall_ms, parse_utc_timestamp, to_iso_string

__all__ = [
    "ENVELOPE_ERROR_CODES",
    "EnvelopeError",
    "MESH_REQUEST",
    "MESH_RESPONSE",
    "DEFAULT_TTL_SECONDS",
    "DEFAULT_MAX_TTL_SECONDS",
    "DEFAULT_CLOCK_TOLERANCE_MS",
    "new_correlation_id",
    "new_nonce",
    "build_envelope",
    "is_envelope",
    "check_envelope",
    "validate_envelope",
]

log = logging.getLogger("agent_mesh.envelope")

ENVELOPE_ERROR_CODES = (
    "MALFORMED",
    "WRONG_RECIPIENT",
    "NOT_YET_VALID",
    "EXPIRED",
    "TTL_TOO_LONG",
    "SIGNATURE_INVALID",
    "REPLAYED",
    "NONCE_STORE_FULL",
    "NONCE_QUOTA_EXCEEDED",
    "NONCE_STORE_UNAVAILABLE",
)

MESH_REQUEST = "MeshRequest"
MESH_RESPONSE = "MeshResponse"
DEFAULT_TTL_SECONDS = 300
DEFAULT_MAX_TTL_SECONDS = 86_400
DEFAULT_CLOCK_TOLERANCE_MS = 30_000

_ENVELOPE_KEYS = frozenset(
    ["type", "id", "from", "to", "correlationId", "nonce", "createdAt", "expiresAt", "body", "proof"]
)
_PROOF_KEYS = frozenset(
    ["type", "cryptosuite", "created", "verificationMethod", "proofPurpose", "@context", "proofValue"]
)
_NONCE = re.compile(r"[A-Za-z0-9_-]{16,128}", re.ASCII)


class EnvelopeError(ValueError):
    """An envelope refused or not built; ``code`` is one of ``ENVELOPE_ERROR_CODES``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def new_correlation_id() -> str:
    """A fresh correlation id: a random UUID from the platform CSPRNG."""
    return str(uuid.uuid4())


def new_nonce() -> str:
    """A fresh 128-bit nonce, base64url."""
    return b64url_encode(secrets.token_bytes(16))


def _js_len(s: str) -> int:
    # Lengths on the wire are counted as JavaScript counts them, in UTF-16 code units.
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def _bounded(u: Any, max_len: int) -> bool:
    return isinstance(u, str) and 1 <= _js_len(u) <= max_len


def _js_round(x: float) -> int:
    return math.floor(x + 0.5)


def build_envelope(
    type_: str,
    from_did: str,
    to_did: str,
    body: Mapping[str, Any],
    correlation_id: str | None,
    private_key: PrivateKeyInput,
    ttl_seconds: float = DEFAULT_TTL_SECONDS,
    *,
    now_ms: int | None = None,
    envelope_id: str | None = None,
    nonce: str | None = None,
) -> dict[str, Any]:
    """Builds and signs an envelope (``id``, ``nonce`` and times filled in). Raises ``InvalidDid``, ``MalformedKey``
    or ``EnvelopeError`` (``TTL_TOO_LONG`` for a lifetime outside (0, 86 400] s, ``MALFORMED`` for a bad type or a
    body with no JSON form). ``now_ms``, ``envelope_id`` and ``nonce`` are for reproducible tests."""
    key = load_private_key(private_key)
    frm = parse_did(from_did)
    to = parse_did(to_did)
    if (
        isinstance(ttl_seconds, bool)
        or not isinstance(ttl_seconds, (int, float))
        or not math.isfinite(ttl_seconds)
        or not (0 < ttl_seconds <= DEFAULT_MAX_TTL_SECONDS)
    ):
        raise EnvelopeError("TTL_TOO_LONG", f"ttl_seconds must be in (0, {DEFAULT_MAX_TTL_SECONDS}], got {ttl_seconds}")
    if not _bounded(type_, 128):
        raise EnvelopeError("MALFORMED", "type must be a string of 1 to 128 characters")
    if not isinstance(body, Mapping):
        raise EnvelopeError("MALFORMED", "body must be a JSON object")
    now = _wall_ms() if now_ms is None else now_ms
    created_at = to_iso_string(now)
    unsecured = {
        "type": type_,
        "id": envelope_id if envelope_id is not None else f"urn:uuid:{uuid.uuid4()}",
        "from": frm,
        "to": to,
        "correlationId": correlation_id if correlation_id is not None else new_correlation_id(),
        "nonce": nonce if nonce is not None else new_nonce(),
        "createdAt": created_at,
        "expiresAt": to_iso_string(now + _js_round(ttl_seconds * 1000)),
        "body": dict(body),
    }
    options = {
        "type": "DataIntegrityProof",
        "cryptosuite": CRYPTOSUITE,
        "created": created_at,
        "verificationMethod": verification_method_id(frm),
        "proofPurpose": "assertionMethod",
    }
    try:
        data = hash_data(options, unsecured)
    except NotCanonicalizable as e:
        raise EnvelopeError("MALFORMED", f"body is not JSON: {e}") from e
    return {**unsecured, "proof": {**options, "proofValue": base58.encode_multibase(sign(key, data))}}


def is_envelope(u: Any) -> bool:
    """True when ``u`` has exactly the envelope's shape (docs/protocol.md §5; any other member refuses it)."""
    if not isinstance(u, dict) or not set(u) <= _ENVELOPE_KEYS:
        return False
    p = u.get("proof")
    if not isinstance(p, dict) or not set(p) <= _PROOF_KEYS:
        return False
    ctx = p.get("@context", None)
    return (
        _bounded(u.get("type"), 128)
        and _bounded(u.get("id"), 256)
        and is_normalized_did(u.get("from"))
        and is_normalized_did(u.get("to"))
        and _bounded(u.get("correlationId"), 256)
        and isinstance(u.get("nonce"), str)
        and _NONCE.fullmatch(u["nonce"]) is not None
        and isinstance(u.get("createdAt"), str)
        and len(u["createdAt"]) <= 64
        and parse_utc_timestamp(u["createdAt"]) is not None
        and isinstance(u.get("expiresAt"), str)
        and len(u["expiresAt"]) <= 64
        and parse_utc_timestamp(u["expiresAt"]) is not None
        and isinstance(u.get("body"), dict)
        and p.get("type") == "DataIntegrityProof"
        and p.get("cryptosuite") == CRYPTOSUITE
        and ("created" not in p or isinstance(p["created"], str))
        and isinstance(p.get("verificationMethod"), str)
        and isinstance(p.get("proofPurpose"), str)
        and ("@context" not in p or (isinstance(ctx, list) and all(isinstance(c, str) for c in ctx)))
        and isinstance(p.get("proofValue"), str)
        and p["proofValue"].startswith("z")
    )


def _public_key_bytes(key: PublicKeyInput) -> bytes:
    if isinstance(key, str):
        return b64decode(key)
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key)
    from .keys import public_key_bytes

    return public_key_bytes(key)


def check_envelope(
    envelope: Any,
    sender_public_key: PublicKeyInput,
    my_did: str,
    nonce_registry: NonceStore,
    skip_signature: bool = False,
    *,
    clock_tolerance_ms: int = DEFAULT_CLOCK_TOLERANCE_MS,
    max_ttl_seconds: int = DEFAULT_MAX_TTL_SECONDS,
    now_ms: int | None = None,
) -> dict[str, Any]:
    """``validate_envelope`` that returns the envelope or raises ``EnvelopeError`` with the code and a message."""
    # 1. shape
    if not is_envelope(envelope):
        raise EnvelopeError("MALFORMED", "not an envelope (docs/protocol.md §5)")
    env: dict[str, Any] = envelope
    if env["proof"].get("created") != env["createdAt"]:
        raise EnvelopeError("MALFORMED", "proof.created must equal createdAt")
    if env["proof"]["verificationMethod"] != verification_method_id(env["from"]):
        raise EnvelopeError("MALFORMED", f"proof must be by {verification_method_id(env['from'])}")
    created_ms = parse_utc_timestamp(env["createdAt"])
    expires_ms = parse_utc_timestamp(env["expiresAt"])
    assert created_ms is not None and expires_ms is not None
    if not expires_ms > created_ms:
        raise EnvelopeError("MALFORMED", "expiresAt must be after createdAt")
    if expires_ms - created_ms > max_ttl_seconds * 1000:
        raise EnvelopeError("TTL_TOO_LONG", f"lifetime exceeds {max_ttl_seconds} s")

    # 2. addressee
    if env["to"] != my_did.lower():
        raise EnvelopeError("WRONG_RECIPIENT", f"addressed to {env['to']}")

    # 3. time window
    now = _wall_ms() if now_ms is None else now_ms
    if created_ms > now + clock_tolerance_ms:
        raise EnvelopeError("NOT_YET_VALID", f"created {created_ms - now} ms in the future")
    if expires_ms <= now - clock_tolerance_ms:
        raise EnvelopeError("EXPIRED", f"expired {now - expires_ms} ms ago")

    # 4. signature
    if skip_signature:
        log.warning(
            "envelope %s from %s: signature NOT checked (skip_signature; trusted mesh only)", env["id"], env["from"]
        )
    else:
        try:
            public_key = _public_key_bytes(sender_public_key)
            signature = base58.decode_multibase(env["proof"]["proofValue"])
        except (ValueError, TypeError) as e:
            raise EnvelopeError("SIGNATURE_INVALID", "public key or proofValue is not decodable") from e
        unsecured = {k: v for k, v in env.items() if k != "proof"}
        options = {k: v for k, v in env["proof"].items() if k != "proofValue"}
        try:
            data = hash_data(options, unsecured)
        except NotCanonicalizable as e:
            raise EnvelopeError("MALFORMED", str(e)) from e
        try:
            ok = verify(public_key, data, signature)
        except MalformedKey:
            ok = False
        if not ok:
            raise EnvelopeError("SIGNATURE_INVALID", "signature does not verify")

    # 5. nonce, only now that the envelope is authentic
    try:
        nonce_registry.record(env["from"], env["nonce"], expires_ms + clock_tolerance_ms, now)
    except NonceRecordError as e:
        raise EnvelopeError(e.code, str(e)) from e
    except Exception as e:  # a store backed by a database that failed: refuse (fail closed)
        raise EnvelopeError("NONCE_STORE_UNAVAILABLE", str(e)) from e
    return env


def validate_envelope(
    envelope: Any,
    sender_public_key: PublicKeyInput,
    my_did: str,
    nonce_registry: NonceStore,
    skip_signature: bool = False,
    *,
    clock_tolerance_ms: int = DEFAULT_CLOCK_TOLERANCE_MS,
    max_ttl_seconds: int = DEFAULT_MAX_TTL_SECONDS,
    now_ms: int | None = None,
) -> tuple[bool, str | None]:
    """Checks an envelope for ``my_did`` from a sender whose public key (raw bytes, publicKeyB64 or key object) is
    given, recording its nonce once everything else holds: ``(True, None)`` or ``(False, code)``."""
    try:
        check_envelope(
            envelope,
            sender_public_key,
            my_did,
            nonce_registry,
            skip_signature,
            clock_tolerance_ms=clock_tolerance_ms,
            max_ttl_seconds=max_ttl_seconds,
            now_ms=now_ms,
        )
    except EnvelopeError as e:
        return False, e.code
    return True, None

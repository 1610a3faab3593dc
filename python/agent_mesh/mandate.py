"""Mandates (docs/protocol.md §9): short-lived JWS tokens (``alg`` EdDSA, ``typ`` mandate+jwt) delegating authority
from a grantor DID to exactly one grantee DID. An attenuated mandate carries its whole parent token in ``prf``; a
chain verifies offline from the grantors' current keys. Signatures always cover the exact received bytes; a
re-encoded or trimmed token never verifies."""

from __future__ import annotations

import datetime as _dt
import secrets
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence, Union, runtime_checkable

from .constraints import (
    MANDATE_KINDS,
    constraints_json,
    constraints_problem,
    with_canonical_usd,
    narrowing_violation,
    normalize_task,
)
from .did import KeyRevoked, normalize_did, is_normalized_did, verification_method_id
from .jcs import StrictJsonError, parse_json_strict, stringify
from .keys import (
    MalformedKey,
    PrivateKeyInput,
    b64decode,
    b64url_decode,
    b64url_encode,
    is_acceptable_public_key,
    load_private_key,
    sign as ed_sign,
    verify as ed_verify,
)
from .timestamp import now_ms as _wall_ms

__all__ = [
    "MANDATE_TYP",
    "MAX_TOKEN_LENGTH",
    "MAX_CHAIN_LENGTH",
    "DEFAULT_TTL_SECONDS",
    "DEFAULT_CLOCK_TOLERANCE_SECONDS",
    "MANDATE_INVALID_REASONS",
    "Mandate",
    "MandateInvalid",
    "MandateIssueError",
    "ResolvedKey",
    "KeyResolveError",
    "KeyResolver",
    "StaticKeyResolver",
    "KeysInput",
    "to_key_source",
    "decode_unverified",
    "check_mandate",
    "verify_mandate",
    "verify_task_mandate",
    "chain_of",
    "issue_intent_mandate",
    "attenuate_to_cart",
    "attenuate_to_payment",
    "issue_task_mandate",
    "attenuate_task_mandate",
    "issue_model_budget_mandate",
    "attenuate_model_budget_mandate",
]

MANDATE_TYP = "mandate+jwt"
MAX_TOKEN_LENGTH = 65_536
MAX_CHAIN_LENGTH = 8
DEFAULT_TTL_SECONDS = 3600
DEFAULT_CLOCK_TOLERANCE_SECONDS = 30

MANDATE_INVALID_REASONS = (
    "MALFORMED",
    "EXPIRED",
    "NOT_YET_VALID",
    "GRANTEE_MISMATCH",
    "KIND_MISMATCH",
    "KEY_NOT_FOUND",
    "KEY_REVOKED",
    "RESOLVER_UNAVAILABLE",
    "KEY_ROTATED",
    "SIGNATURE_INVALID",
    "REVOKED",
    "CHAIN_BROKEN",
    "ATTENUATION_WIDENED",
    "DEPTH_EXCEEDED",
)


class MandateInvalid(ValueError):
    """A mandate (or a link of its chain) failed verification: ``code`` is ``MANDATE_INVALID``, ``reason`` says
    which rule (docs/protocol.md §9.7)."""

    code = "MANDATE_INVALID"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class MandateIssueError(ValueError):
    """Issuing or attenuating was refused before anything was signed (docs/protocol.md §9.8); ``code`` says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Mandate:
    """A decoded mandate. ``token`` is what must be passed on, exactly as issued."""

    token: str
    kind: str
    grantor: str
    grantee: str
    expires_at: int
    issued_at: int
    not_before: int
    jti: str
    key_version: int
    constraints: Any
    parent: "Mandate | None"

    @property
    def depth(self) -> int:
        """Number of ``prf`` links above this mandate (0 for a root)."""
        return 0 if self.parent is None else self.parent.depth + 1

    @property
    def expiry(self) -> _dt.datetime:
        """``exp`` as an aware UTC datetime."""
        return _dt.datetime.fromtimestamp(self.expires_at, tz=_dt.timezone.utc)

    def to_dict(self) -> dict[str, Any]:
        """The decoded fields as a JSON-ready dict (camelCase, as the TypeScript mandate shows them)."""
        return {
            "token": self.token,
            "kind": self.kind,
            "grantor": self.grantor,
            "grantee": self.grantee,
            "expiresAt": self.expires_at,
            "issuedAt": self.issued_at,
            "notBefore": self.not_before,
            "jti": self.jti,
            "keyVersion": self.key_version,
            "constraints": self.constraints,
            "depth": self.depth,
        }


# ---------------------------------------------------------------------------------------------------------------
# Key sources


@dataclass(frozen=True)
class ResolvedKey:
    """A grantor's current key: raw 32-byte Ed25519 public key and its version (1, 2, … on each rotation)."""

    public_key: bytes
    key_version: int = 1


class KeyResolveError(Exception):
    """A resolver's refusal: ``code`` ``KEY_NOT_FOUND``, ``KEY_REVOKED`` or ``RESOLVER_UNAVAILABLE``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@runtime_checkable
class KeyResolver(Protocol):
    """DID → current key. ``resolve`` raises ``KeyResolveError`` (or ``KeyRevoked``); a resolver may also define
    ``is_mandate_revoked(jti, issuer) -> bool``."""

    def resolve(self, did: str) -> ResolvedKey: ...


class StaticKeyResolver:
    """A resolver over a fixed map DID → key (``ResolvedKey``, raw bytes, publicKeyB64, or a dict with
    ``publicKey`` and ``keyVersion``). A small-order or non-canonical key is answered as ``KEY_NOT_FOUND``."""

    def __init__(self, keys: Mapping[str, Any]) -> None:
        self._map: dict[str, ResolvedKey] = {}
        for did, k in keys.items():
            self._map[did.lower()] = _resolved(k)

    def resolve(self, did: str) -> ResolvedKey:
        """The DID's current key."""
        key = self._map.get(did)
        if key is None:
            raise KeyResolveError("KEY_NOT_FOUND", f"no key known for {did}")
        if not is_acceptable_public_key(key.public_key):
            raise KeyResolveError(
                "KEY_NOT_FOUND",
                f"INVALID_PUBLIC_KEY: the key configured for {did} is a small-order point or not canonically encoded",
            )
        return key


def _raw_key(k: Any) -> bytes:
    if isinstance(k, str):
        return b64decode(k)
    if isinstance(k, (bytes, bytearray, memoryview)):
        return bytes(k)
    from .keys import public_key_bytes

    return public_key_bytes(k)


def _resolved(k: Any) -> ResolvedKey:
    if isinstance(k, ResolvedKey):
        return k
    if isinstance(k, Mapping):
        pk = k.get("publicKey", k.get("public_key"))
        kv = k.get("keyVersion", k.get("key_version", 1))
        return ResolvedKey(_raw_key(pk), int(kv))
    return ResolvedKey(_raw_key(k), 1)


KeysInput = Union[bytes, str, KeyResolver, Mapping[str, Any], Any]


def to_key_source(keys: KeysInput) -> bytes | KeyResolver:
    """Grantor keys as the verifier takes them: one public key (raw bytes, publicKeyB64 or a key object: the leaf
    grantor's, no key-version check) for a single mandate, a map DID → key, or a ``KeyResolver``."""
    if isinstance(keys, (bytes, bytearray, memoryview)):
        return bytes(keys)
    if isinstance(keys, str):
        return b64decode(keys)
    if hasattr(keys, "resolve") and callable(keys.resolve):
        return keys
    if isinstance(keys, Mapping):
        return StaticKeyResolver(keys)
    return _raw_key(keys)


# ---------------------------------------------------------------------------------------------------------------
# Parsing


@dataclass
class _Link:
    mandate: Mandate
    signing_input: bytes
    signature: bytes
    cns_problem: str | None


_HEADER_KEYS = ("alg", "typ", "kid")
_CLAIM_KEYS = ("iss", "aud", "iat", "nbf", "exp", "jti", "kv", "kind", "cns", "prf")


def _is_safe_int(u: Any) -> bool:
    if isinstance(u, bool) or not isinstance(u, (int, float)):
        return False
    if isinstance(u, float) and not u.is_integer():
        return False
    return -(2**53 - 1) <= u <= 2**53 - 1


def _is_time(u: Any) -> bool:
    return _is_safe_int(u) and u >= 0


def _js_len(s: str) -> int:
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def _decode_json_segment(segment: str) -> Any:
    try:
        raw = b64url_decode(segment, canonical=True)
        return parse_json_strict(raw.decode("utf-8"), max_depth=100_000)
    except (ValueError, UnicodeDecodeError, StrictJsonError, RecursionError):
        return None


def _parse_links(token: Any, into: list[_Link], remaining: int) -> Mandate:
    if not isinstance(token, str):
        raise MandateInvalid("MALFORMED", "token is not a string")
    if _js_len(token) > MAX_TOKEN_LENGTH:
        raise MandateInvalid("MALFORMED", f"token longer than {MAX_TOKEN_LENGTH} characters")
    parts = token.split(".")
    if len(parts) != 3:
        raise MandateInvalid("MALFORMED", "not a JWS compact token (three segments)")
    header = _decode_json_segment(parts[0])
    if not isinstance(header, dict):
        raise MandateInvalid(
            "MALFORMED", "header is not base64url I-JSON (an object, no member named twice, no __proto__)"
        )
    for k in header:
        if k not in _HEADER_KEYS:
            raise MandateInvalid("MALFORMED", f"unsupported header member {k!r}")
    if header.get("alg") != "EdDSA":
        raise MandateInvalid("MALFORMED", "alg must be EdDSA")
    if header.get("typ") != MANDATE_TYP:
        raise MandateInvalid("MALFORMED", f"typ must be {MANDATE_TYP}")
    kid = header.get("kid")
    if not isinstance(kid, str):
        raise MandateInvalid("MALFORMED", "kid must be the grantor's #key-1")
    p = _decode_json_segment(parts[1])
    if not isinstance(p, dict):
        raise MandateInvalid(
            "MALFORMED", "payload is not base64url I-JSON (an object, no claim named twice, no __proto__)"
        )
    for k in p:
        if k not in _CLAIM_KEYS:
            raise MandateInvalid("MALFORMED", f"unknown claim {k!r}")
    if not is_normalized_did(p.get("iss")):
        raise MandateInvalid("MALFORMED", "iss must be a lower-case did:mesh DID")
    if not is_normalized_did(p.get("aud")):
        raise MandateInvalid("MALFORMED", "aud must be a lower-case did:mesh DID")
    if kid != verification_method_id(p["iss"]):
        raise MandateInvalid("MALFORMED", "kid must be the grantor's #key-1")
    if not (_is_time(p.get("iat")) and _is_time(p.get("nbf")) and _is_time(p.get("exp"))):
        raise MandateInvalid("MALFORMED", "iat, nbf and exp must be NumericDate integers")
    if p["nbf"] >= p["exp"] or p["iat"] > p["exp"]:
        raise MandateInvalid("MALFORMED", "exp must come after iat and nbf")
    jti = p.get("jti")
    if not isinstance(jti, str) or not 0 < _js_len(jti) <= 128:
        raise MandateInvalid("MALFORMED", "jti must be a string of 1..128 characters")
    kv: Any = p.get("kv")
    if not _is_safe_int(kv) or kv < 1:
        raise MandateInvalid("MALFORMED", "kv must be a positive integer")
    kind = p.get("kind")
    if not isinstance(kind, str) or kind not in MANDATE_KINDS:
        raise MandateInvalid("MALFORMED", "unknown kind")
    # its shape is a parse check (docs/protocol.md §9.5 step 1); what it holds is checked after the signature
    if not isinstance(p.get("cns"), dict):
        raise MandateInvalid("MALFORMED", "cns must be an object")
    # recorded, not raised: a forgery is refused for its signature first
    cns_problem = constraints_problem(kind, p.get("cns"))
    try:
        signature = b64url_decode(parts[2], canonical=True)
    except ValueError:
        signature = b""
    if len(signature) != 64:
        raise MandateInvalid("MALFORMED", "signature is not 64 bytes of base64url")
    parent: Mandate | None = None
    if "prf" in p:
        if remaining <= 1:
            raise MandateInvalid("DEPTH_EXCEEDED", f"chain longer than {MAX_CHAIN_LENGTH} links")
        parent = _parse_links(p["prf"], into, remaining - 1)
    mandate = Mandate(
        token=token,
        kind=kind,
        grantor=p["iss"],
        grantee=p["aud"],
        expires_at=int(p["exp"]),
        issued_at=int(p["iat"]),
        not_before=int(p["nbf"]),
        jti=jti,
        key_version=int(kv),
        constraints=p.get("cns"),
        parent=parent,
    )
    into.append(_Link(mandate, (parts[0] + "." + parts[1]).encode("ascii"), signature, cns_problem))
    return mandate


def _parse_chain(token: Any) -> tuple[list[_Link], MandateInvalid | None]:
    links: list[_Link] = []
    _parse_links(token, links, MAX_CHAIN_LENGTH)
    problem: MandateInvalid | None = None
    for i, link in enumerate(links):
        if link.cns_problem is not None:
            where = f"cns: {link.cns_problem}" if len(links) == 1 else f"link {i}: cns: {link.cns_problem}"
            problem = MandateInvalid("MALFORMED", where)
            break
    return links, problem


def _chain_problem(links: Sequence[_Link]) -> MandateInvalid | None:
    root = links[0].mandate
    if root.kind in ("cart", "payment"):
        return MandateInvalid("CHAIN_BROKEN", f"a {root.kind} mandate must carry its parent in prf")
    for i in range(1, len(links)):
        parent = links[i - 1].mandate
        child = links[i].mandate
        if parent.grantee != child.grantor:
            return MandateInvalid(
                "CHAIN_BROKEN", f"link {i}: grantor {child.grantor} is not the parent's grantee {parent.grantee}"
            )
        if child.expires_at > parent.expires_at:
            return MandateInvalid("ATTENUATION_WIDENED", f"link {i}: expires after its parent")
        v = narrowing_violation(parent.kind, parent.constraints, child.kind, child.constraints)
        if v is not None:
            return MandateInvalid(v[0], f"link {i}: {v[1]}")
    return None


def decode_unverified(token: str) -> Mandate:
    """Decodes a token and its chain without checking any signature, time or key: for display and routing only.
    Raises ``MandateInvalid`` (``MALFORMED``, ``DEPTH_EXCEEDED``)."""
    links, problem = _parse_chain(token)
    if problem is not None:
        raise problem
    return links[-1].mandate


def chain_of(mandate: Mandate) -> list[Mandate]:
    """The chain of a mandate, root first."""
    out: list[Mandate] = []
    m: Mandate | None = mandate
    while m is not None:
        out.append(m)
        m = m.parent
    return list(reversed(out))


# ---------------------------------------------------------------------------------------------------------------
# Verification


def _link_key(source: bytes | KeyResolver, link: _Link, is_leaf: bool) -> bytes:
    m = link.mandate
    if isinstance(source, bytes):
        if is_leaf:
            return source
        raise MandateInvalid("KEY_NOT_FOUND", f"no key for {m.grantor}: a chain needs a KeyResolver")
    try:
        resolved = source.resolve(m.grantor)
    except KeyResolveError as e:
        raise MandateInvalid(e.code if e.code in MANDATE_INVALID_REASONS else "RESOLVER_UNAVAILABLE", str(e)) from e
    except KeyRevoked as e:
        raise MandateInvalid("KEY_REVOKED", str(e)) from e
    except Exception as e:  # a resolver that could not answer: nothing is known about the mandate
        raise MandateInvalid("RESOLVER_UNAVAILABLE", str(e)) from e
    resolved = _resolved(resolved)
    if resolved.key_version != m.key_version:
        raise MandateInvalid(
            "KEY_ROTATED",
            f"{m.grantor} signed under key version {m.key_version}; the current one is {resolved.key_version}",
        )
    return resolved.public_key


def check_mandate(
    token: str,
    keys: KeysInput,
    expected_grantee: str | None = None,
    kinds: Sequence[str] | None = None,
    clock_tolerance_seconds: int = DEFAULT_CLOCK_TOLERANCE_SECONDS,
    now_ms: int | None = None,
) -> Mandate:
    """Verifies a mandate and its whole chain offline (docs/protocol.md §9.5, in that order) and returns the leaf;
    raises ``MandateInvalid`` with the ``reason``."""
    source = to_key_source(keys)
    links, cns_problem = _parse_chain(token)
    last = len(links) - 1

    def check_signature(i: int) -> None:
        link = links[i]
        public_key = _link_key(source, link, i == last)
        try:
            ok = ed_verify(public_key, link.signing_input, link.signature)
        except MalformedKey as e:
            raise MandateInvalid("SIGNATURE_INVALID", str(e)) from e
        if not ok:
            raise MandateInvalid(
                "SIGNATURE_INVALID", f"link {i}: signature does not verify under {link.mandate.grantor}'s key"
            )

    check_signature(last)
    if cns_problem is not None:
        raise cns_problem
    for i in range(last):
        check_signature(i)
    revoked: Callable[[str, str], bool] | None = getattr(source, "is_mandate_revoked", None)
    if revoked is not None:
        for i, link in enumerate(links):
            if revoked(link.mandate.jti, link.mandate.grantor):
                raise MandateInvalid("REVOKED", f"link {i}: mandate {link.mandate.jti} was revoked")
    structural = _chain_problem(links)
    if structural is not None:
        raise structural
    now = (_wall_ms() if now_ms is None else now_ms) // 1000
    for i, link in enumerate(links):
        m = link.mandate
        if now >= m.expires_at:
            raise MandateInvalid("EXPIRED", f"link {i}: expired at {m.expires_at}")
        if now + clock_tolerance_seconds < m.not_before:
            raise MandateInvalid("NOT_YET_VALID", f"link {i}: not valid before {m.not_before}")
    leaf = links[last].mandate
    if kinds is not None and leaf.kind not in kinds:
        raise MandateInvalid("KIND_MISMATCH", f"a {leaf.kind} mandate where {' or '.join(kinds)} was expected")
    if expected_grantee is not None and expected_grantee.lower() != leaf.grantee:
        raise MandateInvalid("GRANTEE_MISMATCH", f"granted to {leaf.grantee}, presented by {expected_grantee}")
    return leaf


def verify_mandate(
    token: str,
    grantor_public_key: KeysInput,
    *,
    expected_grantee: str | None = None,
    kinds: Sequence[str] | None = None,
    clock_tolerance_seconds: int = DEFAULT_CLOCK_TOLERANCE_SECONDS,
    now_ms: int | None = None,
) -> tuple[bool, Mandate | None, str | None]:
    """Verifies a mandate and its chain: ``(True, mandate, None)`` or ``(False, None, reason)``, never raising for an
    invalid mandate. ``grantor_public_key`` is the grantor's key (single mandate), a map DID → key, or a resolver."""
    try:
        m = check_mandate(token, grantor_public_key, expected_grantee, kinds, clock_tolerance_seconds, now_ms)
    except MandateInvalid as e:
        return False, None, e.reason
    return True, m, None


def verify_task_mandate(
    token: str,
    expected_grantee: str,
    keys: KeysInput,
    *,
    clock_tolerance_seconds: int = DEFAULT_CLOCK_TOLERANCE_SECONDS,
    now_ms: int | None = None,
) -> dict[str, Any]:
    """Verifies a task mandate for the grantee expected to present it: ``{"valid": bool, "reason": str | None}``."""
    valid, _, reason = verify_mandate(
        token,
        keys,
        expected_grantee=expected_grantee,
        kinds=["task"],
        clock_tolerance_seconds=clock_tolerance_seconds,
        now_ms=now_ms,
    )
    return {"valid": valid, "reason": reason}


# ---------------------------------------------------------------------------------------------------------------
# Issuing


def _issuing_did(did: Any, what: str) -> str:
    d = normalize_did(did)
    if d is None:
        raise MandateIssueError("INVALID_DID", f"{what} {did!r} is not a did:mesh DID")
    return d


def _sign(
    kind: str,
    grantor: str,
    grantee: str,
    constraints: Any,
    key: PrivateKeyInput,
    ttl_seconds: int | None,
    key_version: int | None,
    parent: Mandate | None,
    now_ms: int | None,
    jti: str | None,
) -> Mandate:
    grantor = _issuing_did(grantor, "grantor")
    grantee = _issuing_did(grantee, "grantee")
    ttl = DEFAULT_TTL_SECONDS if ttl_seconds is None else ttl_seconds
    if not _is_safe_int(ttl) or ttl <= 0:
        raise MandateIssueError("INVALID_TTL", "ttl_seconds must be a positive integer")
    kv = 1 if key_version is None else key_version
    if not _is_safe_int(kv) or kv < 1:
        raise MandateIssueError("INVALID_CONSTRAINTS", "key_version must be a positive integer")
    constraints = with_canonical_usd(kind, constraints)
    problem = constraints_problem(kind, constraints)
    if problem is not None:
        raise MandateIssueError("INVALID_CONSTRAINTS", problem)
    now = (_wall_ms() if now_ms is None else now_ms) // 1000
    exp = now + int(ttl)
    if parent is not None:
        if parent.grantee != grantor:
            raise MandateIssueError("CHAIN_BROKEN", f"the parent was granted to {parent.grantee}, not to {grantor}")
        if now >= parent.expires_at:
            raise MandateIssueError("PARENT_EXPIRED", f"the parent expired at {parent.expires_at}")
        if parent.depth + 2 > MAX_CHAIN_LENGTH:
            raise MandateIssueError("DELEGATION_DEPTH_EXCEEDED", f"a chain holds at most {MAX_CHAIN_LENGTH} links")
        v = narrowing_violation(parent.kind, parent.constraints, kind, constraints)
        if v is not None:
            raise MandateIssueError("DELEGATION_DEPTH_EXCEEDED" if v[0] == "DEPTH_EXCEEDED" else v[0], v[1])
        exp = min(exp, parent.expires_at)
    elif kind in ("cart", "payment"):
        raise MandateIssueError("CHAIN_BROKEN", f"a {kind} mandate must be attenuated from a parent")
    private_key = load_private_key(key)
    header = {"alg": "EdDSA", "typ": MANDATE_TYP, "kid": verification_method_id(grantor)}
    payload: dict[str, Any] = {
        "iss": grantor,
        "aud": grantee,
        "iat": now,
        "nbf": now,
        "exp": exp,
        "jti": jti if jti is not None else b64url_encode(secrets.token_bytes(16)),
        "kv": int(kv),
        "kind": kind,
        "cns": constraints,
    }
    if parent is not None:
        payload["prf"] = parent.token
    signing_input = (
        b64url_encode(stringify(header).encode("utf-8")) + "." + b64url_encode(stringify(payload).encode("utf-8"))
    )
    token = signing_input + "." + b64url_encode(ed_sign(private_key, signing_input.encode("ascii")))
    # parsed back, so the mandate returned is exactly what verifiers see
    return decode_unverified(token)


def _parent_mandate(parent: Mandate | str, grantor_did: str | None = None) -> Mandate:
    if isinstance(parent, Mandate):
        p = parent
    else:
        try:
            p = decode_unverified(parent)
        except MandateInvalid as e:
            raise MandateIssueError("PARENT_INVALID", f"{e.reason}: {e}") from e
    # A child signed with another DID's key names the parent's grantee in its kid and fails every verification:
    # refused before signing when the attenuating party names its DID (docs/protocol.md §9.8).
    if grantor_did is not None:
        holder = normalize_did(grantor_did) or grantor_did
        if holder != p.grantee:
            raise MandateIssueError("GRANTEE_MISMATCH", f"the parent was granted to {p.grantee}; {holder} cannot attenuate it")
    return p


def issue_intent_mandate(
    grantor_did: str,
    grantee_did: str,
    constraints: Any,
    private_key: PrivateKeyInput,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    *,
    key_version: int = 1,
    now_ms: int | None = None,
    jti: str | None = None,
) -> Mandate:
    """Issues an intent mandate, the root of a spending chain: ``constraints`` is a ``SpendingConstraints`` or a dict
    (``spend_limit_usd``/``spendLimitUsd``, optional ``allowed_merchants``/``allowedMerchants``)."""
    return _sign(
        "intent",
        grantor_did,
        grantee_did,
        constraints_json(constraints),
        private_key,
        ttl_seconds,
        key_version,
        None,
        now_ms,
        jti,
    )


def attenuate_to_cart(
    parent: Mandate | str,
    grantee_did: str,
    narrowed: Any,
    grantor_private_key: PrivateKeyInput,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    *,
    key_version: int = 1,
    now_ms: int | None = None,
    jti: str | None = None,
    grantor_did: str | None = None,
) -> Mandate:
    """Attenuates an intent into a cart mandate whose spend limit and merchants are within the parent's; the
    grantor is the parent's grantee, whose key signs. The lifetime is cut to the parent's expiry."""
    p = _parent_mandate(parent, grantor_did)
    return _sign(
        "cart",
        p.grantee,
        grantee_did,
        constraints_json(narrowed),
        grantor_private_key,
        ttl_seconds,
        key_version,
        p,
        now_ms,
        jti,
    )


def attenuate_to_payment(
    parent: Mandate | str,
    grantee_did: str,
    amount_usd: float | int | str,
    merchant: str,
    grantor_private_key: PrivateKeyInput,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    *,
    key_version: int = 1,
    now_ms: int | None = None,
    jti: str | None = None,
    grantor_did: str | None = None,
) -> Mandate:
    """Attenuates an intent or cart into a payment mandate for one amount to one merchant."""
    p = _parent_mandate(parent, grantor_did)
    cns = {"amountUsd": amount_usd, "merchant": merchant}
    return _sign("payment", p.grantee, grantee_did, cns, grantor_private_key, ttl_seconds, key_version, p, now_ms, jti)


def issue_task_mandate(
    grantor_did: str,
    grantee_did: str,
    constraints: Any,
    private_key: PrivateKeyInput,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    *,
    key_version: int = 1,
    now_ms: int | None = None,
    jti: str | None = None,
) -> Mandate:
    """Issues a root task mandate (``TaskConstraints`` or a dict); optional members are written at their defaults."""
    cns = constraints_json(constraints)
    problem = constraints_problem("task", cns)
    if problem is not None:
        raise MandateIssueError("INVALID_CONSTRAINTS", problem)
    return _sign(
        "task", grantor_did, grantee_did, normalize_task(cns), private_key, ttl_seconds, key_version, None, now_ms, jti
    )


def attenuate_task_mandate(
    parent: Mandate | str,
    grantee_did: str,
    constraints: Any,
    grantor_private_key: PrivateKeyInput,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    *,
    key_version: int = 1,
    now_ms: int | None = None,
    jti: str | None = None,
    grantor_did: str | None = None,
) -> Mandate:
    """Attenuates a task mandate; the constraints must be within the parent's (docs/protocol.md §9.4)."""
    cns = constraints_json(constraints)
    problem = constraints_problem("task", cns)
    if problem is not None:
        raise MandateIssueError("INVALID_CONSTRAINTS", problem)
    p = _parent_mandate(parent, grantor_did)
    return _sign(
        "task",
        p.grantee,
        grantee_did,
        normalize_task(cns),
        grantor_private_key,
        ttl_seconds,
        key_version,
        p,
        now_ms,
        jti,
    )


def issue_model_budget_mandate(
    grantor_did: str,
    grantee_did: str,
    constraints: Any,
    private_key: PrivateKeyInput,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    *,
    key_version: int = 1,
    now_ms: int | None = None,
    jti: str | None = None,
) -> Mandate:
    """Issues a root model-budget mandate (token and cost budgets, quality bar, task type) for model routing."""
    return _sign(
        "model-budget",
        grantor_did,
        grantee_did,
        constraints_json(constraints),
        private_key,
        ttl_seconds,
        key_version,
        None,
        now_ms,
        jti,
    )


def attenuate_model_budget_mandate(
    parent: Mandate | str,
    grantee_did: str,
    constraints: Any,
    grantor_private_key: PrivateKeyInput,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    *,
    key_version: int = 1,
    now_ms: int | None = None,
    jti: str | None = None,
    grantor_did: str | None = None,
) -> Mandate:
    """Attenuates a model-budget mandate: budgets and steps only shrink, the quality bar only rises."""
    p = _parent_mandate(parent, grantor_did)
    return _sign(
        "model-budget",
        p.grantee,
        grantee_did,
        constraints_json(constraints),
        grantor_private_key,
        ttl_seconds,
        key_version,
        p,
        now_ms,
        jti,
    )

"""Signed human approvals for tasks paused at a human gate (docs/protocol.md §11): ``{type: "MeshApproval", taskId,
capability, decision, expiresAt}`` with an eddsa-jcs-2022 proof by the grantor's ``#key-1``. Verification checks
shape, presence of a proof, the signer, the task and capability, the time window, the grantor's current key and only
then the signature, each failure with one ``ApprovalError`` code."""

from __future__ import annotations

from typing import Any

from .did import KeyRevoked, normalize_did, parse_did, verification_method_id
from .jcs import NotCanonicalizable
from .keys import PrivateKeyInput
from .mandate import KeyResolveError, KeysInput, to_key_source
from .proof import CRYPTOSUITE, ProofInvalid, sign_message, verify_message
from .timestamp import now_ms as _wall_ms, parse_utc_timestamp, to_date_time_seconds, to_iso_string

__all__ = [
    "APPROVAL_TYPE",
    "DEFAULT_APPROVAL_TTL_SECONDS",
    "MAX_APPROVAL_TTL_SECONDS",
    "ApprovalError",
    "sign_approval",
    "verify_approval",
]

APPROVAL_TYPE = "MeshApproval"
DEFAULT_APPROVAL_TTL_SECONDS = 900
MAX_APPROVAL_TTL_SECONDS = 86_400
DEFAULT_APPROVAL_CLOCK_TOLERANCE_MS = 30_000

_FIELDS = ("type", "taskId", "capability", "decision", "expiresAt", "proof")
_PROOF_FIELDS = ("type", "cryptosuite", "created", "verificationMethod", "proofPurpose", "proofValue")


class ApprovalError(ValueError):
    """An approval refused or not signed: ``code`` is ``APPROVAL_MALFORMED``, ``APPROVAL_UNSIGNED``,
    ``APPROVAL_WRONG_SIGNER``, ``APPROVAL_INVALID``, ``APPROVAL_MISMATCH``, ``APPROVAL_EXPIRED`` or
    ``RESOLVER_UNAVAILABLE``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _js_len(s: str) -> int:
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def _bounded(u: Any, max_len: int = 256) -> bool:
    return isinstance(u, str) and 1 <= _js_len(u) <= max_len


def _timestamp(u: Any) -> bool:
    return isinstance(u, str) and len(u) <= 64 and parse_utc_timestamp(u) is not None


def sign_approval(
    task_id: str,
    capability: str,
    grantor_did: str,
    private_key: PrivateKeyInput,
    decision: str = "approve",
    ttl_seconds: int = DEFAULT_APPROVAL_TTL_SECONDS,
    *,
    now_ms: int | None = None,
) -> dict[str, Any]:
    """Signs an approval as the grantor; ``created`` is the current whole second and ``expiresAt`` ``created`` +
    ttl (at most 86 400 s). Raises ``ApprovalError`` (``APPROVAL_MALFORMED``), ``InvalidDid`` or ``MalformedKey``."""
    did = parse_did(grantor_did)
    if (
        isinstance(ttl_seconds, bool)
        or not isinstance(ttl_seconds, int)
        or not 0 < ttl_seconds <= MAX_APPROVAL_TTL_SECONDS
    ):
        raise ApprovalError(
            "APPROVAL_MALFORMED",
            f"ttl_seconds must be a whole number in [1, {MAX_APPROVAL_TTL_SECONDS}], got {ttl_seconds}",
        )
    created_ms = ((_wall_ms() if now_ms is None else now_ms) // 1000) * 1000
    fields = {
        "type": APPROVAL_TYPE,
        "taskId": task_id,
        "capability": capability,
        "decision": decision,
        "expiresAt": to_iso_string(created_ms + ttl_seconds * 1000),
    }
    if not _bounded(task_id) or not _bounded(capability) or decision not in ("approve", "deny"):
        raise ApprovalError(
            "APPROVAL_MALFORMED", "taskId and capability must be 1 to 256 characters, decision approve or deny"
        )
    try:
        return sign_message(fields, private_key, verification_method_id(did), created=to_date_time_seconds(created_ms))
    except NotCanonicalizable as e:
        raise ApprovalError("APPROVAL_MALFORMED", str(e)) from e


def verify_approval(
    approval: Any,
    task_id: str,
    capability: str,
    grantor: str,
    keys: KeysInput,
    *,
    clock_tolerance_ms: int = DEFAULT_APPROVAL_CLOCK_TOLERANCE_MS,
    now_ms: int | None = None,
) -> dict[str, Any]:
    """Checks that ``approval`` is for this task and capability, unexpired, and signed by ``grantor``'s current key
    (``keys``: the grantor's public key, a map DID → key, or a resolver); returns ``{"decision", "expires_at"}``
    (epoch ms) or raises ``ApprovalError``."""
    # 1. shape
    a = approval
    if not isinstance(a, dict) or any(k not in _FIELDS for k in a):
        raise ApprovalError(
            "APPROVAL_MALFORMED",
            "not an approval object (closed: type, taskId, capability, decision, expiresAt, proof)",
        )
    if not (
        a.get("type") == APPROVAL_TYPE
        and _bounded(a.get("taskId"))
        and _bounded(a.get("capability"))
        and a.get("decision") in ("approve", "deny")
        and _timestamp(a.get("expiresAt"))
    ):
        raise ApprovalError("APPROVAL_MALFORMED", "type, taskId, capability, decision or expiresAt is not valid")
    # 2. a proof, itself well formed
    p = a.get("proof")
    if p is None:
        raise ApprovalError("APPROVAL_UNSIGNED", "the approval carries no proof")
    if not (
        isinstance(p, dict)
        and all(k in _PROOF_FIELDS for k in p)
        and p.get("type") == "DataIntegrityProof"
        and p.get("cryptosuite") == CRYPTOSUITE
        and _timestamp(p.get("created"))
        and isinstance(p.get("verificationMethod"), str)
        and _js_len(p["verificationMethod"]) <= 512
        and p.get("proofPurpose") == "assertionMethod"
        and isinstance(p.get("proofValue"), str)
        and p["proofValue"].startswith("z")
        and _js_len(p["proofValue"]) <= 128
    ):
        raise ApprovalError("APPROVAL_MALFORMED", "proof is not a closed eddsa-jcs-2022 proof with created")
    created_ms = parse_utc_timestamp(p["created"])
    expires_ms = parse_utc_timestamp(a["expiresAt"])
    assert created_ms is not None and expires_ms is not None
    # 3. the signer: the grantor's own method, whatever key it claims
    g = normalize_did(grantor) or grantor
    method = verification_method_id(g)
    if p["verificationMethod"] != method:
        raise ApprovalError(
            "APPROVAL_WRONG_SIGNER", f"signed by {p['verificationMethod']}; the approval must come from {method}"
        )
    # 4. this task and this capability
    if a["taskId"] != task_id:
        raise ApprovalError("APPROVAL_MISMATCH", f"the approval is for task {a['taskId']}")
    if a["capability"] != capability:
        raise ApprovalError(
            "APPROVAL_MISMATCH", f"the approval is for {a['capability']}, the task waits for {capability}"
        )
    # 5. time
    now = _wall_ms() if now_ms is None else now_ms
    if expires_ms <= now - clock_tolerance_ms:
        raise ApprovalError("APPROVAL_EXPIRED", f"expired at {a['expiresAt']}")
    if created_ms > now + clock_tolerance_ms:
        raise ApprovalError("APPROVAL_EXPIRED", f"created at {p['created']}, in the future")
    if not expires_ms > created_ms or expires_ms - created_ms > MAX_APPROVAL_TTL_SECONDS * 1000:
        raise ApprovalError("APPROVAL_EXPIRED", f"lifetime must be in (0, {MAX_APPROVAL_TTL_SECONDS}] seconds")
    # 6. the grantor's current key
    source = to_key_source(keys)
    if isinstance(source, bytes):
        public_key = source
    else:
        try:
            public_key = source.resolve(g).public_key
        except KeyResolveError as e:
            if e.code == "RESOLVER_UNAVAILABLE":
                raise ApprovalError("RESOLVER_UNAVAILABLE", str(e)) from e
            raise ApprovalError("APPROVAL_INVALID", f"{g} has no current key: {e}") from e
        except KeyRevoked as e:
            raise ApprovalError("APPROVAL_INVALID", f"{g} has no current key: {e}") from e
        except Exception as e:
            raise ApprovalError("RESOLVER_UNAVAILABLE", str(e)) from e
    # 7. the signature, over every member as received
    try:
        verify_message(a, public_key, verification_method=method, proof_purpose="assertionMethod")
    except (ProofInvalid, ValueError) as e:
        raise ApprovalError("APPROVAL_INVALID", f"{getattr(e, 'code', 'MALFORMED_KEY')}: {e}") from e
    return {"decision": a["decision"], "expires_at": expires_ms}

"""W3C Data Integrity proofs with the ``eddsa-jcs-2022`` cryptosuite over any JSON object (docs/protocol.md §4)."""

from __future__ import annotations

from typing import Any, Mapping

from . import base58
from .jcs import NotCanonicalizable, canonical_bytes
from .keys import PrivateKeyInput, PublicKeyInput, sha256, sign, verify
from .timestamp import now_ms, to_date_time_seconds

__all__ = ["CRYPTOSUITE", "ProofInvalid", "hash_data", "sign_message", "verify_message", "is_data_integrity_proof"]

CRYPTOSUITE = "eddsa-jcs-2022"


class ProofInvalid(ValueError):
    """A proof that is missing or malformed (``MALFORMED_PROOF``), by another method than pinned
    (``VERIFICATION_METHOD_MISMATCH``), or whose signature does not verify (``SIGNATURE_INVALID``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def hash_data(options: Mapping[str, Any], unsecured: Mapping[str, Any]) -> bytes:
    """The 64 bytes eddsa-jcs-2022 signs: SHA-256(JCS(proof options)) ‖ SHA-256(JCS(document without proof))."""
    return sha256(canonical_bytes(options)) + sha256(canonical_bytes(unsecured))


def sign_message(
    message: Mapping[str, Any],
    private_key: PrivateKeyInput,
    verification_method_id: str,
    proof_purpose: str = "assertionMethod",
    created: str | None = None,
) -> dict[str, Any]:
    """A copy of a JSON object with an eddsa-jcs-2022 proof (any existing proof replaced); ``created`` defaults to
    now, to the second. Raises ``NotCanonicalizable`` or ``MalformedKey``."""
    unsecured = {k: v for k, v in message.items() if k != "proof"}
    options: dict[str, Any] = {
        "type": "DataIntegrityProof",
        "cryptosuite": CRYPTOSUITE,
        "created": created if created is not None else to_date_time_seconds(now_ms()),
        "verificationMethod": verification_method_id,
        "proofPurpose": proof_purpose,
    }
    context = unsecured.get("@context")
    if isinstance(context, list):
        options["@context"] = context
    signature = sign(private_key, hash_data(options, unsecured))
    return {**unsecured, "proof": {**options, "proofValue": base58.encode_multibase(signature)}}


def is_data_integrity_proof(p: Any) -> bool:
    """The shape of a proof as it travels (members beyond these are allowed and signed)."""
    if not isinstance(p, dict):
        return False
    ctx = p.get("@context")
    return (
        p.get("type") == "DataIntegrityProof"
        and p.get("cryptosuite") == CRYPTOSUITE
        and ("created" not in p or isinstance(p["created"], str))
        and isinstance(p.get("verificationMethod"), str)
        and isinstance(p.get("proofPurpose"), str)
        and (ctx is None and "@context" not in p or isinstance(ctx, list) and all(isinstance(c, str) for c in ctx))
        and isinstance(p.get("proofValue"), str)
        and p["proofValue"].startswith("z")
    )


def verify_message(
    message: Mapping[str, Any],
    public_key: PublicKeyInput,
    verification_method: str | None = None,
    proof_purpose: str | None = None,
) -> dict[str, Any]:
    """Verifies the eddsa-jcs-2022 proof of a message under a raw public key (optionally pinning the method and
    purpose) and returns the message; raises ``ProofInvalid`` (``.code``) or ``MalformedKey``."""
    proof = message.get("proof") if isinstance(message, Mapping) else None
    if not is_data_integrity_proof(proof):
        raise ProofInvalid("MALFORMED_PROOF", "missing or malformed eddsa-jcs-2022 proof")
    assert isinstance(proof, dict)
    if verification_method is not None and proof["verificationMethod"] != verification_method:
        raise ProofInvalid("VERIFICATION_METHOD_MISMATCH", f"proof is by {proof['verificationMethod']}")
    if proof_purpose is not None and proof["proofPurpose"] != proof_purpose:
        raise ProofInvalid("MALFORMED_PROOF", f"proof purpose {proof['proofPurpose']} is not {proof_purpose}")
    unsecured = {k: v for k, v in message.items() if k != "proof"}
    proof_context = proof.get("@context")
    if proof_context is not None:
        # The document's @context must start with the proof's, in order (vc-di-eddsa §3.3.2).
        doc_context = unsecured.get("@context")
        if (
            not isinstance(doc_context, list)
            or len(doc_context) < len(proof_context)
            or any(doc_context[i] != c for i, c in enumerate(proof_context))
        ):
            raise ProofInvalid("MALFORMED_PROOF", "proof @context does not match the document's")
    try:
        signature = base58.decode_multibase(proof["proofValue"])
    except ValueError as e:
        raise ProofInvalid("MALFORMED_PROOF", "proofValue is not base58btc") from e
    # Hash the proof exactly as received (minus proofValue): a member not named here is signed, not dropped.
    received_options = {k: v for k, v in proof.items() if k != "proofValue"}
    try:
        data = hash_data(received_options, unsecured)
    except NotCanonicalizable as e:
        raise ProofInvalid("MALFORMED_PROOF", str(e)) from e
    if not verify(public_key, data, signature):
        raise ProofInvalid("SIGNATURE_INVALID", "signature does not verify")
    return dict(message)

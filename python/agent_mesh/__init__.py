"""agent-mesh for Python: identities, signed envelopes, mandates, commit tokens, the hub client, agent calls and
the agent server, wire-compatible with the TypeScript package (docs/protocol.md)."""

from __future__ import annotations

import importlib
from typing import Any

from .approval import ApprovalError, sign_approval, verify_approval
from .base58 import decode as base58_decode, encode as base58_encode
from .commit_token import CommitTokenError, digest_result
from .commit_token import sign as sign_commit_token, verify as verify_commit_token
from .constraints import ModelBudgetConstraints, SpendingConstraints, TaskConstraints
from .did import (
    Identity,
    IdentityFileError,
    InvalidDid,
    KeyRevoked,
    MalformedDidDocument,
    did_hash,
    extract_public_key,
    generate_did,
    identity_from_key,
    import_identity,
    load_identity_file,
    make_did_document,
    normalize_did,
    parse_did,
    save_identity_file,
    verification_method_id,
)
from .envelope import (
    MESH_REQUEST,
    MESH_RESPONSE,
    EnvelopeError,
    build_envelope,
    check_envelope,
    new_correlation_id,
    new_nonce,
    validate_envelope,
)
from .guards import (
    Authorization,
    CounterStore,
    SpendingConstraintViolation,
    SpendingGuard,
    TaskConstraintViolation,
    TaskGuard,
)
from .jcs import NotCanonicalizable, StrictJsonError, canonical_bytes, canonicalize, parse_json_strict
from .keys import (
    MalformedKey,
    did_key,
    generate_private_key,
    import_public_key,
    load_private_key,
    private_key_seed,
    private_key_to_pkcs8,
    public_key_b64,
    public_key_bytes,
    public_key_multibase,
    public_key_of_did_key,
    sign,
    verify,
)
from .mandate import (
    KeyResolveError,
    KeyResolver,
    Mandate,
    MandateInvalid,
    MandateIssueError,
    ResolvedKey,
    StaticKeyResolver,
    attenuate_model_budget_mandate,
    attenuate_task_mandate,
    attenuate_to_cart,
    attenuate_to_payment,
    chain_of,
    check_mandate,
    decode_unverified,
    issue_intent_mandate,
    issue_model_budget_mandate,
    issue_task_mandate,
    verify_mandate,
    verify_task_mandate,
)
from .money import InvalidAmount, format_usd_string, parse_usd
from .nonce import NonceRecordError, NonceRegistry, NonceStore, SqliteNonceRegistry
from .proof import ProofInvalid, sign_message, verify_message
from .reconciliation import reconcile, reconcile_pools

__version__ = "1.0.0"

# The network half is imported on first use: the server needs the optional `server` extra, and importing the
# package must not pull an HTTP stack into callers that only sign and verify.
_LAZY = {
    "call_agent": "client",
    "acall_agent": "client",
    "stream_agent": "client",
    "astream_agent": "client",
    "AgentClient": "client",
    "AsyncAgentClient": "client",
    "AgentCallError": "client",
    "serve": "server",
    "create_app": "server",
    "AgentError": "server",
    "AgentConfigError": "server",
    "RunningAgent": "server",
    "HubClient": "hub",
    "AsyncHubClient": "hub",
    "HubError": "hub",
    "resolve_mcp": "hub",
    "register_agent": "hub",
    "resolve_agent": "hub",
    "list_agents": "hub",
    "register_mcp": "hub",
    "register_skill": "hub",
    "sign_request": "http_signature",
    "check_request": "http_signature",
    "verify_request": "http_signature",
    "HttpSignatureError": "http_signature",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_mesh' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = sorted(
    [
        n
        for n, v in list(globals().items())
        if not n.startswith("_") and not isinstance(v, type(importlib)) and n not in ("annotations", "Any")
    ]
    + list(_LAZY)
)

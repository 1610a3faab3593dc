"""Human-gate approvals (docs/protocol.md §11): the documented vector and every refusal code, in order."""

from __future__ import annotations

import pytest

from agent_mesh import generate_did
from agent_mesh.approval import ApprovalError, sign_approval, verify_approval
from agent_mesh.keys import public_key_bytes
from agent_mesh.mandate import KeyResolveError, ResolvedKey, StaticKeyResolver

NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SEED = b"\x01" * 32
ALICE = "did:mesh:alice"
KEYS = {ALICE: public_key_bytes(SEED)}


def test_documented_vector() -> None:
    a = sign_approval("task-1", "send_email", ALICE, SEED, "approve", 900, now_ms=NOW)
    assert a["expiresAt"] == "2026-01-01T00:15:00.000Z"
    assert a["proof"]["created"] == "2026-01-01T00:00:00Z"
    assert (
        a["proof"]["proofValue"]
        == "z3jdsvwDBEVq18xEZvsk84aYs9Vqhr3LHJjZduHRrFo5M3ahhPM3icF3NjycwJAjGXmwTYmabyzQTF8Z67emj1WMB"
    )
    assert verify_approval(a, "task-1", "send_email", ALICE, KEYS, now_ms=NOW) == {
        "decision": "approve",
        "expires_at": NOW + 900_000,
    }


def code(
    approval: object,
    task: str = "task-1",
    cap: str = "send_email",
    grantor: str = ALICE,
    keys: object = None,
    now: int = NOW,
) -> str:
    with pytest.raises(ApprovalError) as e:
        verify_approval(approval, task, cap, grantor, KEYS if keys is None else keys, now_ms=now)  # type: ignore[arg-type]
    return e.value.code


def test_refusals_in_order() -> None:
    a = sign_approval("task-1", "send_email", ALICE, SEED, "deny", 60, now_ms=NOW)
    assert verify_approval(a, "task-1", "send_email", ALICE, KEYS, now_ms=NOW)["decision"] == "deny"
    assert code({**a, "extra": 1}) == "APPROVAL_MALFORMED"
    assert code({**a, "decision": "maybe"}) == "APPROVAL_MALFORMED"
    assert code({**a, "expiresAt": "2026-01-01T02:15:00+02:00"}) == "APPROVAL_MALFORMED"
    assert code({k: v for k, v in a.items() if k != "proof"}) == "APPROVAL_UNSIGNED"
    assert code({**a, "proof": None}) == "APPROVAL_UNSIGNED"
    assert code({**a, "proof": {**a["proof"], "domain": "x"}}) == "APPROVAL_MALFORMED"
    assert code(a, grantor="did:mesh:bob") == "APPROVAL_WRONG_SIGNER"
    assert code(a, task="task-2") == "APPROVAL_MISMATCH"
    assert code(a, cap="delete") == "APPROVAL_MISMATCH"
    assert code(a, now=NOW + 90_000) == "APPROVAL_EXPIRED"
    assert code(a, now=NOW - 31_000) == "APPROVAL_EXPIRED"
    assert code(a, keys=StaticKeyResolver({})) == "APPROVAL_INVALID"

    class Down:
        def resolve(self, did: str) -> ResolvedKey:
            raise KeyResolveError("RESOLVER_UNAVAILABLE", "registry down")

    assert code(a, keys=Down()) == "RESOLVER_UNAVAILABLE"
    assert code({**a, "capability": "send_email", "taskId": "task-1", "decision": "approve"}) == "APPROVAL_INVALID"
    assert code(a, keys={ALICE: generate_did("alice")["public_key_bytes"]}) == "APPROVAL_INVALID"
    # the +00:00 form Python's isoformat writes is read (and, being signed as received, then fails the signature)
    assert code({**a, "expiresAt": a["expiresAt"].replace("Z", "+00:00")}) == "APPROVAL_INVALID"


def test_sign_refusals() -> None:
    for ttl in (0, 86_401, 1.5):
        with pytest.raises(ApprovalError) as e:
            sign_approval("t", "c", ALICE, SEED, ttl_seconds=ttl)  # type: ignore[arg-type]
        assert e.value.code == "APPROVAL_MALFORMED"
    with pytest.raises(ApprovalError):
        sign_approval("", "c", ALICE, SEED)

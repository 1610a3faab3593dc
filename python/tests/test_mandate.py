"""Mandates issued, attenuated and enforced in Python: issue codes (§9.8), verification reasons (§9.7) and the
spending and task guards (§9.9)."""

from __future__ import annotations

import pytest

from agent_mesh import (
    MandateIssueError,
    SpendingConstraints,
    SpendingConstraintViolation,
    SpendingGuard,
    TaskConstraints,
    TaskConstraintViolation,
    TaskGuard,
    attenuate_task_mandate,
    attenuate_to_cart,
    attenuate_to_payment,
    decode_unverified,
    issue_intent_mandate,
    issue_model_budget_mandate,
    issue_task_mandate,
    verify_mandate,
    verify_task_mandate,
)
from agent_mesh.constraints import ModelBudgetConstraints
from agent_mesh.keys import public_key_bytes
from agent_mesh.mandate import ResolvedKey, StaticKeyResolver, attenuate_model_budget_mandate

NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SEEDS = {f"did:mesh:{n}": bytes([i + 1]) * 32 for i, n in enumerate(["alice", "bob", "carol", "dave", "mallory"])}
KEYS = {did: public_key_bytes(seed) for did, seed in SEEDS.items()}


def intent(limit: float = 100, merchants: list[str] | None = None, ttl: int = 3600):
    return issue_intent_mandate(
        "did:mesh:alice",
        "did:mesh:bob",
        SpendingConstraints(limit, merchants),
        SEEDS["did:mesh:alice"],
        ttl,
        now_ms=NOW,
    )


def test_issued_intent_token() -> None:
    m = intent(100.5, ["shop"])
    assert m.kind == "intent" and m.grantor == "did:mesh:alice" and m.grantee == "did:mesh:bob"
    assert m.constraints == {"spendLimitUsd": 100.5, "allowedMerchants": ["shop"]}
    assert m.expires_at - m.issued_at == 3600 and m.not_before == m.issued_at == NOW // 1000
    assert m.key_version == 1 and len(m.jti) == 22 and m.depth == 0
    assert verify_mandate(m.token, KEYS["did:mesh:alice"], now_ms=NOW) == (True, m, None)
    # snake_case dict and wire dict give the same constraints
    m2 = issue_intent_mandate(
        "did:mesh:alice", "did:mesh:bob", {"spend_limit_usd": 100.5}, SEEDS["did:mesh:alice"], now_ms=NOW
    )
    assert m2.constraints == {"spendLimitUsd": 100.5}
    m3 = issue_intent_mandate(
        "did:mesh:alice",
        "did:mesh:bob",
        {"spend_limit_usd": 1, "allowed_merchants": ("a", "b")},
        SEEDS["did:mesh:alice"],
        now_ms=NOW,
    )
    assert m3.constraints == {"spendLimitUsd": 1, "allowedMerchants": ["a", "b"]}


def test_spending_chain_and_guard() -> None:
    root = intent(100, ["shop", "cafe"])
    cart = attenuate_to_cart(
        root, "did:mesh:carol", {"spendLimitUsd": 50, "allowedMerchants": ["shop"]}, SEEDS["did:mesh:bob"], now_ms=NOW
    )
    pay = attenuate_to_payment(cart.token, "did:mesh:dave", 30, "shop", SEEDS["did:mesh:carol"], now_ms=NOW)
    assert pay.depth == 2 and pay.parent is not None and pay.parent.token == cart.token
    ok, m, reason = verify_mandate(pay.token, KEYS, expected_grantee="did:mesh:dave", now_ms=NOW)
    assert (ok, reason) == (True, None) and m is not None and m.kind == "payment"
    # a chain needs a resolver: one key is only the leaf's
    assert verify_mandate(pay.token, KEYS["did:mesh:carol"], now_ms=NOW) == (False, None, "KEY_NOT_FOUND")

    guard = SpendingGuard(KEYS, clock=lambda: NOW)
    auth = guard.authorize(pay.token, 20, "shop", "did:mesh:dave")
    assert auth.amount_micros == 20_000_000
    with pytest.raises(SpendingConstraintViolation) as e:
        guard.authorize(pay.token, 10.000001, "shop", "did:mesh:dave")
    assert e.value.code == "LIMIT_EXCEEDED"
    guard.authorize(pay.token, 10, "shop", "did:mesh:dave")  # exactly the payment's 30 in all
    with pytest.raises(SpendingConstraintViolation) as e:
        guard.authorize(pay.token, 0.000001, "shop", "did:mesh:dave")
    assert e.value.code == "LIMIT_EXCEEDED"
    with pytest.raises(SpendingConstraintViolation) as e:
        guard.authorize(cart.token, 1, "cafe", "did:mesh:carol")
    assert e.value.code == "MERCHANT_NOT_ALLOWED"
    with pytest.raises(SpendingConstraintViolation) as e:
        guard.authorize(cart.token, 0.1 + 0.2, "shop", "did:mesh:carol")
    assert e.value.code == "INVALID_AMOUNT"
    # the cart already carries the payment's 30: 20 more fit, 20.000001 do not
    with pytest.raises(SpendingConstraintViolation) as e:
        guard.authorize(cart.token, "20.000001", "shop", "did:mesh:carol")
    assert e.value.code == "LIMIT_EXCEEDED"
    guard.authorize(cart.token, "20", "shop", "did:mesh:carol")
    with pytest.raises(SpendingConstraintViolation) as e:
        guard.authorize(cart.token, 1, "shop", "did:mesh:mallory")
    assert (e.value.code, e.value.reason) == ("MANDATE_INVALID", "GRANTEE_MISMATCH")


def test_issue_codes() -> None:
    root = intent(100, ["shop"])

    def code(f) -> str:  # type: ignore[no-untyped-def]
        with pytest.raises(MandateIssueError) as e:
            f()
        return e.value.code

    assert (
        code(
            lambda: attenuate_to_cart(
                root,
                "did:mesh:carol",
                {"spendLimitUsd": 101, "allowedMerchants": ["shop"]},
                SEEDS["did:mesh:bob"],
                now_ms=NOW,
            )
        )
        == "ATTENUATION_WIDENED"
    )
    assert (
        code(
            lambda: attenuate_to_cart(root, "did:mesh:carol", {"spendLimitUsd": 10}, SEEDS["did:mesh:bob"], now_ms=NOW)
        )
        == "ATTENUATION_WIDENED"
    )
    assert (
        code(lambda: attenuate_to_payment(root, "did:mesh:carol", 1, "cafe", SEEDS["did:mesh:bob"], now_ms=NOW))
        == "ATTENUATION_WIDENED"
    )
    assert (
        code(lambda: issue_intent_mandate("did:mesh:alice", "bob", {"spendLimitUsd": 1}, SEEDS["did:mesh:alice"]))
        == "INVALID_DID"
    )
    assert (
        code(
            lambda: issue_intent_mandate(
                "did:mesh:alice", "did:mesh:bob", {"spendLimitUsd": 0.1 + 0.2}, SEEDS["did:mesh:alice"]
            )
        )
        == "INVALID_CONSTRAINTS"
    )
    assert (
        code(
            lambda: issue_intent_mandate(
                "did:mesh:alice", "did:mesh:bob", {"spendLimitUsd": 1, "x": 1}, SEEDS["did:mesh:alice"]
            )
        )
        == "INVALID_CONSTRAINTS"
    )
    assert (
        code(
            lambda: issue_intent_mandate(
                "did:mesh:alice", "did:mesh:bob", {"spendLimitUsd": 1}, SEEDS["did:mesh:alice"], 0
            )
        )
        == "INVALID_TTL"
    )
    assert (
        code(
            lambda: issue_intent_mandate(
                "did:mesh:alice", "did:mesh:bob", {"spendLimitUsd": 1}, SEEDS["did:mesh:alice"], 1.5
            )
        )
        == "INVALID_TTL"
    )  # type: ignore[arg-type]
    assert (
        code(lambda: attenuate_to_cart("not.a.token", "did:mesh:carol", {"spendLimitUsd": 1}, SEEDS["did:mesh:bob"]))
        == "PARENT_INVALID"
    )
    assert (
        code(
            lambda: attenuate_to_cart(
                root,
                "did:mesh:carol",
                {"spendLimitUsd": 1, "allowedMerchants": ["shop"]},
                SEEDS["did:mesh:bob"],
                now_ms=NOW + 3600_000,
            )
        )
        == "PARENT_EXPIRED"
    )
    pay = attenuate_to_payment(root, "did:mesh:carol", 1, "shop", SEEDS["did:mesh:bob"], now_ms=NOW)
    assert (
        code(
            lambda: attenuate_to_cart(
                pay,
                "did:mesh:dave",
                {"spendLimitUsd": 1, "allowedMerchants": ["shop"]},
                SEEDS["did:mesh:carol"],
                now_ms=NOW,
            )
        )
        == "CHAIN_BROKEN"
    )
    task = issue_task_mandate(
        "did:mesh:alice", "did:mesh:bob", TaskConstraints(["a"], 0), SEEDS["did:mesh:alice"], now_ms=NOW
    )
    assert (
        code(
            lambda: attenuate_task_mandate(
                task, "did:mesh:carol", TaskConstraints(["a"], 0), SEEDS["did:mesh:bob"], now_ms=NOW
            )
        )
        == "DELEGATION_DEPTH_EXCEEDED"
    )


def test_child_lifetime_is_cut_to_the_parent() -> None:
    root = intent(100, ttl=60)
    cart = attenuate_to_cart(root, "did:mesh:carol", {"spendLimitUsd": 5}, SEEDS["did:mesh:bob"], 3600, now_ms=NOW)
    assert cart.expires_at == root.expires_at


def test_wrong_key_gives_a_child_that_fails_signature() -> None:
    root = intent(100)
    cart = attenuate_to_cart(root, "did:mesh:carol", {"spendLimitUsd": 5}, SEEDS["did:mesh:mallory"], now_ms=NOW)
    assert verify_mandate(cart.token, KEYS, now_ms=NOW) == (False, None, "SIGNATURE_INVALID")


def test_attenuating_as_another_did_than_the_parents_grantee_is_refused() -> None:
    root = intent(100)
    task_root = issue_task_mandate("did:mesh:alice", "did:mesh:bob", {"allowed": ["search"], "maxDelegationDepth": 1}, SEEDS["did:mesh:alice"], now_ms=NOW)
    mallory = SEEDS["did:mesh:mallory"]
    attempts = [
        lambda: attenuate_to_cart(root, "did:mesh:carol", {"spendLimitUsd": 5}, mallory, now_ms=NOW, grantor_did="did:mesh:mallory"),
        lambda: attenuate_to_payment(root, "did:mesh:carol", 5, "did:mesh:carol", mallory, now_ms=NOW, grantor_did="did:mesh:mallory"),
        lambda: attenuate_task_mandate(task_root, "did:mesh:carol", {"allowed": ["search"], "maxDelegationDepth": 0}, mallory, now_ms=NOW, grantor_did="did:mesh:mallory"),
    ]
    for attempt in attempts:
        with pytest.raises(MandateIssueError) as e:
            attempt()
        assert e.value.code == "GRANTEE_MISMATCH"
    # Named as the grantee (in any case), the same attenuation is signed and verifies.
    cart = attenuate_to_cart(root, "did:mesh:carol", {"spendLimitUsd": 5}, SEEDS["did:mesh:bob"], now_ms=NOW, grantor_did="did:mesh:BOB")
    assert verify_mandate(cart.token, KEYS, now_ms=NOW)[0] is True


def test_verification_reasons() -> None:
    m = intent()
    assert verify_mandate(m.token, KEYS, now_ms=NOW + 3600_000)[2] == "EXPIRED"
    assert verify_mandate(m.token, KEYS, now_ms=NOW - 31_000)[2] == "NOT_YET_VALID"
    assert verify_mandate(m.token, KEYS, now_ms=NOW - 30_000)[0] is True
    assert verify_mandate(m.token, KEYS, kinds=["task"], now_ms=NOW)[2] == "KIND_MISMATCH"
    assert (
        verify_mandate(m.token, {"did:mesh:alice": {"publicKey": KEYS["did:mesh:alice"], "keyVersion": 2}}, now_ms=NOW)[
            2
        ]
        == "KEY_ROTATED"
    )
    assert verify_mandate(m.token + "A", KEYS, now_ms=NOW)[2] == "MALFORMED"
    assert verify_mandate(m.token.replace(".", "=.", 1), KEYS, now_ms=NOW)[2] == "MALFORMED"
    assert verify_mandate(m.token, KEYS["did:mesh:bob"], now_ms=NOW)[2] == "SIGNATURE_INVALID"

    class Revoking(StaticKeyResolver):
        def is_mandate_revoked(self, jti: str, issuer: str) -> bool:
            return jti == m.jti

    assert verify_mandate(m.token, Revoking(KEYS), now_ms=NOW)[2] == "REVOKED"

    class Down:
        def resolve(self, did: str) -> ResolvedKey:
            raise ConnectionError("registry down")

    assert verify_mandate(m.token, Down(), now_ms=NOW)[2] == "RESOLVER_UNAVAILABLE"


def test_task_mandate_and_guard() -> None:
    root = issue_task_mandate(
        "did:mesh:alice",
        "did:mesh:bob",
        TaskConstraints(
            allowed=["search", "send_email", "delete"],
            max_delegation_depth=2,
            blocked=["delete"],
            human_gates=["send_email"],
            action_limits={"search": 3},
            compute_limit={"llmTokens": 1000},
            data_access=["inbox"],
            reversible_only=True,
        ),
        SEEDS["did:mesh:alice"],
        now_ms=NOW,
    )
    # every member written, defaults included, in the spec's order
    assert list(root.constraints) == [
        "allowed",
        "blocked",
        "reversibleOnly",
        "humanGates",
        "actionLimits",
        "computeLimit",
        "dataAccess",
        "sandbox",
        "maxDelegationDepth",
    ]
    child = attenuate_task_mandate(
        root,
        "did:mesh:carol",
        {
            "allowed": ["search", "send_email"],
            "max_delegation_depth": 0,
            "blocked": ["delete"],
            "human_gates": ["send_email"],
            "action_limits": {"search": 2},
            "compute_limit": {"llm_tokens": 500},
            "data_access": ["inbox"],
            "reversible_only": True,
        },
        SEEDS["did:mesh:bob"],
        now_ms=NOW,
    )
    assert verify_task_mandate(child.token, "did:mesh:carol", KEYS, now_ms=NOW) == {"valid": True, "reason": None}
    assert verify_task_mandate(child.token, "did:mesh:bob", KEYS, now_ms=NOW) == {
        "valid": False,
        "reason": "GRANTEE_MISMATCH",
    }
    intent_token = intent().token
    assert verify_task_mandate(intent_token, "did:mesh:bob", KEYS, now_ms=NOW) == {
        "valid": False,
        "reason": "KIND_MISMATCH",
    }

    g = TaskGuard(KEYS, clock=lambda: NOW)
    act = dict(presenter="did:mesh:carol", reversible=True, sandboxed=False)

    def code(**kw) -> str:  # type: ignore[no-untyped-def]
        with pytest.raises(TaskConstraintViolation) as e:
            g.check(child.token, **{**act, **kw})
        return e.value.code

    assert code(capability="delete") == "CAPABILITY_NOT_PERMITTED"
    assert code(capability="browse") == "CAPABILITY_NOT_PERMITTED"
    assert code(capability="search", reversible=False) == "REVERSIBILITY_VIOLATION"
    assert code(capability="search", data_scopes=["calendar"]) == "DATA_ACCESS_VIOLATION"
    assert code(capability="send_email") == "HUMAN_GATE_REQUIRED"
    g.check(child.token, capability="send_email", human_approved=True, **act)
    g.check(child.token, capability="search", llm_tokens=400, **act)
    g.check(child.token, capability="search", **act)
    assert code(capability="search") == "ACTION_LIMIT_EXCEEDED"
    assert code(capability="send_email", human_approved=True, llm_tokens=101) == "COMPUTE_LIMIT_EXCEEDED"
    assert code(capability="send_email", presenter="did:mesh:bob") == "MANDATE_INVALID"
    # a refused charge moved nothing: 100 tokens still fit
    g.check(child.token, capability="send_email", human_approved=True, llm_tokens=100, **act)
    with pytest.raises(TaskConstraintViolation) as e:
        g.reserve_compute(child.token, "did:mesh:carol", llm_tokens=1)
    assert e.value.code == "COMPUTE_LIMIT_EXCEEDED"

    sandboxed = issue_task_mandate(
        "did:mesh:alice",
        "did:mesh:bob",
        {"allowed": ["run"], "maxDelegationDepth": 0, "sandbox": True},
        SEEDS["did:mesh:alice"],
        now_ms=NOW,
    )
    with pytest.raises(TaskConstraintViolation) as e:
        g.check(sandboxed.token, presenter="did:mesh:bob", capability="run", reversible=True, sandboxed=False)
    assert e.value.code == "SANDBOX_REQUIRED"
    g.check(sandboxed.token, presenter="did:mesh:bob", capability="run", reversible=True, sandboxed=True)


def test_reserve_and_settle_compute() -> None:
    m = issue_task_mandate(
        "did:mesh:alice",
        "did:mesh:bob",
        {"allowed": [], "maxDelegationDepth": 0, "computeLimit": {"llmTokens": 100}},
        SEEDS["did:mesh:alice"],
        now_ms=NOW,
    )
    g = TaskGuard(KEYS, clock=lambda: NOW)
    leaf = g.reserve_compute(m.token, "did:mesh:bob", llm_tokens=80)
    g.settle_compute(leaf, {"llmTokens": 80}, {"llmTokens": 30})
    g.reserve_compute(m.token, "did:mesh:bob", llm_tokens=70)
    with pytest.raises(TaskConstraintViolation):
        g.reserve_compute(m.token, "did:mesh:bob", llm_tokens=1)


def test_depth_exceeded_in_a_signed_chain_is_delegation_depth_exceeded() -> None:
    from agent_mesh.jcs import stringify
    from agent_mesh.keys import b64url_encode, sign

    root = issue_task_mandate(
        "did:mesh:alice",
        "did:mesh:bob",
        {"allowed": ["a"], "maxDelegationDepth": 0},
        SEEDS["did:mesh:alice"],
        now_ms=NOW,
    )
    # a legitimate key signing a child the issuer would refuse: the verifier refuses it again
    header = {"alg": "EdDSA", "typ": "mandate+jwt", "kid": "did:mesh:bob#key-1"}
    payload = {
        "iss": "did:mesh:bob",
        "aud": "did:mesh:carol",
        "iat": NOW // 1000,
        "nbf": NOW // 1000,
        "exp": root.expires_at,
        "jti": "child",
        "kv": 1,
        "kind": "task",
        "cns": root.constraints,
        "prf": root.token,
    }
    si = b64url_encode(stringify(header).encode()) + "." + b64url_encode(stringify(payload).encode())
    token = si + "." + b64url_encode(sign(SEEDS["did:mesh:bob"], si.encode()))
    assert verify_mandate(token, KEYS, now_ms=NOW)[2] == "DEPTH_EXCEEDED"
    with pytest.raises(TaskConstraintViolation) as e:
        TaskGuard(KEYS, clock=lambda: NOW).check(
            token, presenter="did:mesh:carol", capability="a", reversible=True, sandboxed=False
        )
    assert (e.value.code, e.value.reason) == ("DELEGATION_DEPTH_EXCEEDED", "DEPTH_EXCEEDED")


def test_model_budget() -> None:
    c = ModelBudgetConstraints(10_000, 5, 0.7, "CODE", 4)
    m = issue_model_budget_mandate("did:mesh:alice", "did:mesh:bob", c, SEEDS["did:mesh:alice"], now_ms=NOW)
    assert m.constraints == {
        "token_budget": 10000,
        "cost_budget_usd": 5,
        "quality_threshold": 0.7,
        "task_type": "CODE",
        "expected_steps": 4,
    }
    child = attenuate_model_budget_mandate(
        m, "did:mesh:carol", ModelBudgetConstraints(5000, 2.5, 0.8, "CODE", 2), SEEDS["did:mesh:bob"], now_ms=NOW
    )
    assert verify_mandate(child.token, KEYS, now_ms=NOW)[0] is True
    with pytest.raises(MandateIssueError) as e:
        attenuate_model_budget_mandate(
            m, "did:mesh:carol", ModelBudgetConstraints(5000, 2.5, 0.6, "CODE", 2), SEEDS["did:mesh:bob"], now_ms=NOW
        )
    assert e.value.code == "ATTENUATION_WIDENED"
    with pytest.raises(MandateIssueError) as e:
        issue_model_budget_mandate(
            "did:mesh:alice", "did:mesh:bob", ModelBudgetConstraints(1, 1, 0.5, "POETRY", 1), SEEDS["did:mesh:alice"]
        )
    assert e.value.code == "INVALID_CONSTRAINTS"


def test_decode_unverified_and_expiry() -> None:
    m = intent()
    d = decode_unverified(m.token)
    assert d == m
    assert d.expiry.isoformat() == "2026-01-01T01:00:00+00:00"


def test_cns_not_an_object_is_malformed_even_when_forged() -> None:
    """§9.5 step 1: the shape of `cns` is a parse check, so even a forged signature gives MALFORMED."""
    import json

    from agent_mesh.keys import b64url_decode, b64url_encode, load_private_key

    header_b64, payload_b64, _ = intent().token.split(".")
    payload = json.loads(b64url_decode(payload_b64))
    for cns in (5, None, [], "x"):
        for signer in ("did:mesh:alice", "did:mesh:mallory"):
            body = b64url_encode(json.dumps({**payload, "cns": cns}, separators=(",", ":")).encode())
            signing_input = f"{header_b64}.{body}".encode()
            token = f"{header_b64}.{body}.{b64url_encode(load_private_key(SEEDS[signer]).sign(signing_input))}"
            assert verify_mandate(token, KEYS, now_ms=NOW)[2] == "MALFORMED", (cns, signer)


def test_usd_constraints_are_taken_as_decimal_strings_and_signed_as_canonical_numbers():
    from agent_mesh import generate_did
    from agent_mesh.mandate import MandateIssueError, attenuate_to_payment, issue_intent_mandate

    a = generate_did("alice")
    intent = issue_intent_mandate(a["did"], a["did"], {"spendLimitUsd": "5.00"}, a["private_key"])
    assert intent.constraints == {"spendLimitUsd": 5}
    pay = attenuate_to_payment(intent, "did:mesh:shop", "0.250", "did:mesh:shop", a["private_key"])
    assert pay.constraints == {"amountUsd": 0.25, "merchant": "did:mesh:shop"}
    try:
        issue_intent_mandate(a["did"], a["did"], {"maxAmountUsd": 5}, a["private_key"])
        raise AssertionError("an unknown member was accepted")
    except MandateIssueError as e:
        assert str(e) == "constraints: unknown member maxAmountUsd; allowed: spendLimitUsd, allowedMerchants"

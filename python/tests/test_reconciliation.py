"""Offline billing reconciliation (docs/protocol.md §13.4): every failure code, and the same report as TypeScript."""

from __future__ import annotations

from typing import Any

from agent_mesh import commit_token, generate_did
from agent_mesh.reconciliation import reconcile, reconcile_pools

AGENT = generate_did("flights", namespace="travel")
OTHER = generate_did("hotels", namespace="travel")
KEYS = {AGENT["did"]: AGENT["public_key_bytes"], OTHER["did"]: OTHER["public_key_bytes"]}


def token(step: str, amount: str, who: dict = AGENT) -> str:
    receipt = {
        "sagaId": "s1",
        "step": step,
        "capability": "book",
        "amountUsd": amount,
        "resultDigest": commit_token.digest_result(step),
        "at": "2026-01-01T12:00:00.000Z",
        "issuer": who["did"],
    }
    return commit_token.sign(receipt, who["private_key"])


def trail() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    allocations = [
        {
            "allocationId": "a1",
            "grantee": AGENT["did"],
            "idempotencyKey": "s1:flight",
            "amountUsd": 500,
            "usedUsd": 412.5,
            "status": "released",
            "commitToken": token("flight", "412.50"),
        },
        {
            "allocationId": "a2",
            "grantee": OTHER["did"],
            "idempotencyKey": "s1:spa",
            "amountUsd": 100,
            "usedUsd": 0,
            "status": "released",
        },  # compensated: nothing used, no token
        {"allocationId": "a3", "grantee": AGENT["did"], "idempotencyKey": "s1:car", "amountUsd": 50, "usedUsd": None, "status": "active"},
        {
            "allocationId": "a4",
            "grantee": OTHER["did"],
            "idempotencyKey": "s1:hotel",
            "amountUsd": 80,
            "usedUsd": 79.99,
            "status": "released",
            "commitToken": token("hotel", "79.99", OTHER),
        },
    ]
    return allocations, {"poolId": "p1", "allocatedUsd": 542.49}


def test_a_clean_trail() -> None:
    allocations, pool = trail()
    r = reconcile(allocations, pool, KEYS)
    assert r["failures"] == [] and r["ok"] is True
    assert (r["allocatedUsd"], r["usedUsd"]) == ("542.49", "492.49")
    assert set(r["receipts"]) == {"a1", "a4"} and r["receipts"]["a1"]["amountUsd"] == "412.5"


def codes(allocations: list[dict[str, Any]], pool: dict[str, Any], keys: Any = KEYS) -> list[tuple[str, str | None]]:
    return [(f["code"], f.get("allocationId")) for f in reconcile(allocations, pool, keys)["failures"]]


def test_every_failure() -> None:
    allocations, pool = trail()
    a1, a2, a3, a4 = allocations
    assert codes([{**a1, "commitToken": None}, a2, a3, a4], pool) == [("MISSING_COMMIT_TOKEN", "a1")]
    assert codes([{**a1, "usedUsd": 412.51}, a2, a3, a4], {**pool, "allocatedUsd": 542.5}) == [
        ("AMOUNT_MISMATCH", "a1")
    ]
    assert codes([a1, a2, {**a3, "commitToken": a1["commitToken"]}, a4], pool) == [
        ("STEP_MISMATCH", "a3"),
        ("AMOUNT_MISMATCH", "a3"),
        ("DUPLICATE_RECEIPT", "a3"),
    ]
    # One character of the signature changed, never to itself (the old last-two-characters swap left a signature that
    # already ended in "AA" as it was, one run in 256).
    head, sig = a4["commitToken"].rsplit(".", 1)
    tampered = f"{head}.{sig[:10]}{'B' if sig[10] == 'A' else 'A'}{sig[11:]}"
    assert codes([a1, a2, a3, {**a4, "commitToken": tampered}], pool) in (
        [("SIGNATURE_INVALID", "a4")],
        [("MALFORMED_TOKEN", "a4")],
    )
    assert codes([a1, a2, a3, {**a4, "commitToken": "x.y.z"}], pool) == [("MALFORMED_TOKEN", "a4")]
    assert codes(allocations, pool, {AGENT["did"]: AGENT["public_key_bytes"]}) == [("KEY_NOT_FOUND", "a4")]
    assert codes(allocations, {**pool, "allocatedUsd": 542.48}) == [("TOTAL_MISMATCH", None)]
    assert codes([{**a2, "amountUsd": 0.1 + 0.2}, a3], {**pool, "allocatedUsd": 50}) == [("INVALID_AMOUNT", "a2")]


def test_same_report_as_typescript(node_eval) -> None:  # type: ignore[no-untyped-def]
    allocations, pool = trail()
    a1, a2, a3, a4 = allocations
    cases = {
        "clean": (allocations, pool),
        "missing": ([{**a1, "commitToken": None}, a2, a3, a4], pool),
        "duplicate": ([a1, a2, {**a3, "commitToken": a1["commitToken"]}, a4], pool),
        "total": (allocations, {**pool, "allocatedUsd": 1}),
        "amount": ([{**a1, "usedUsd": 400}, a2, a3, a4], pool),
        "foreign": ([a1, a2, a3, {**a4, "commitToken": token("hotel", "79.99")}], pool),
    }
    for c in cases.values():
        for a in c[0]:
            if a.get("commitToken") is None:
                a.pop("commitToken", None)
    ts = node_eval(
        """
        import * as Effect from 'effect/Effect';
        import { Reconciliation, Keys, KeyResolver } from 'DIST/core/index.js';
        const resolver = KeyResolver.makeStatic(Object.fromEntries(Object.entries(input.keys).map(([d, k]) => [d, { publicKey: unhex(k), keyVersion: 1 }])));
        const r = {};
        for (const [name, [allocations, pool]] of Object.entries(input.cases)) {
          const rep = await Effect.runPromise(Reconciliation.verify(allocations, pool, resolver).pipe(Effect.provide(Keys.Keys.noble)));
          r[name] = { ok: rep.ok, allocatedUsd: rep.allocatedUsd, usedUsd: rep.usedUsd, receipts: [...rep.receipts.keys()],
                      failures: rep.failures.map((f) => [f.code, f.allocationId ?? null]) };
        }
        out(r);
        """,
        {"cases": cases, "keys": {d: k.hex() for d, k in KEYS.items()}},
    )
    for name, (allocations_, pool_) in cases.items():
        r = reconcile(allocations_, pool_, KEYS)
        py = {
            "ok": r["ok"],
            "allocatedUsd": r["allocatedUsd"],
            "usedUsd": r["usedUsd"],
            "receipts": list(r["receipts"]),
            "failures": [[f["code"], f.get("allocationId")] for f in r["failures"]],
        }
        assert py == ts[name], name
    assert ts["duplicate"]["failures"] == [["STEP_MISMATCH", "a3"], ["AMOUNT_MISMATCH", "a3"], ["DUPLICATE_RECEIPT", "a3"]]
    assert ts["foreign"]["failures"] == [["ISSUER_MISMATCH", "a4"]]


def test_a_receipt_proves_only_its_own_allocation() -> None:
    allocations, pool = trail()
    a1, a2, a3, a4 = allocations
    # The hotel's allocation released with a receipt the flights agent signed for work it made up.
    assert codes([a1, a2, a3, {**a4, "commitToken": token("made-up", "79.99")}], pool) == [
        ("ISSUER_MISMATCH", "a4"),
        ("STEP_MISMATCH", "a4"),
    ]


def test_one_receipt_in_two_pools_is_found_when_the_pools_are_checked_together() -> None:
    allocations, pool = trail()
    second = ([{**allocations[0], "allocationId": "b1"}], {"poolId": "p2", "allocatedUsd": 412.5})
    assert reconcile(*second, KEYS)["ok"] is True
    first, other = reconcile_pools([(allocations, pool), second], KEYS)
    assert first["ok"] is True
    assert [(f["code"], f.get("allocationId")) for f in other["failures"]] == [("DUPLICATE_RECEIPT", "b1")]

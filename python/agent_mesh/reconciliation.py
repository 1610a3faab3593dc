"""Billing reconciliation, offline (docs/protocol.md §13.4): given a pool's allocations as the ledger lists them
(``GET /v1/spending/pools/:poolId/allocations``, docs/hub.md) and the agents' keys, check that every charge is backed
by the signed receipt of the agent that did the work and that the ledger's total agrees with its rows. Nothing here
trusts the hub; every problem is one line of the report.

A receipt proves the work of its own allocation only: its issuer is the allocation's ``grantee`` and its saga and step
are the allocation's ``idempotencyKey`` (``<sagaId>:<step>``); one receipt backs one allocation, which
``reconcile_pools`` checks across the pools given together."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from . import commit_token
from .money import InvalidAmount, format_usd_string, parse_usd

__all__ = ["reconcile", "reconcile_pools"]


def reconcile(allocations: Sequence[Mapping[str, Any]], pool: Mapping[str, Any], keys: Any) -> dict[str, Any]:
    """Checks a pool's allocation list (``allocationId``, ``grantee``, ``idempotencyKey``, ``amountUsd``, ``usedUsd``,
    ``status``, ``commitToken?``) against its pool (``poolId``, ``allocatedUsd``); never raises. Returns ``{ok, poolId,
    receipts, allocatedUsd, usedUsd, failures}`` with one failure ``{code, allocationId?, message}`` per problem found."""
    return _check(allocations, pool, keys, {})


def reconcile_pools(trails: Sequence[tuple[Sequence[Mapping[str, Any]], Mapping[str, Any]]], keys: Any) -> list[dict[str, Any]]:
    """Checks several pools' ``(allocations, pool)`` together, one report each: a receipt billed in two pools is a
    ``DUPLICATE_RECEIPT`` on the second, which checking each pool alone cannot see."""
    billed: dict[str, str] = {}
    return [_check(allocations, pool, keys, billed) for allocations, pool in trails]


def _check(allocations: Sequence[Mapping[str, Any]], pool: Mapping[str, Any], keys: Any, billed: dict[str, str]) -> dict[str, Any]:
    failures: list[dict[str, Any]] = []
    receipts: dict[str, dict[str, Any]] = {}
    allocated = 0
    used = 0

    def micros(usd: Any, what: str, allocation_id: str | None = None) -> int | None:
        try:
            return parse_usd(usd)
        except InvalidAmount as e:
            f: dict[str, Any] = {"code": "INVALID_AMOUNT", "message": f"{what}: {e}"}
            if allocation_id is not None:
                f["allocationId"] = allocation_id
            failures.append(f)
            return None

    for a in allocations:
        aid = a["allocationId"]
        amount = micros(a.get("amountUsd"), "amountUsd", aid)
        amount = 0 if amount is None else amount
        spent: int | None = None
        if a.get("status") == "released":
            s = micros(a.get("usedUsd") if a.get("usedUsd") is not None else 0, "usedUsd", aid)
            spent = 0 if s is None else s
        allocated += amount if spent is None else spent
        used += spent or 0
        token = a.get("commitToken")
        if token is None:
            if spent is not None and spent > 0:
                failures.append(
                    {
                        "code": "MISSING_COMMIT_TOKEN",
                        "allocationId": aid,
                        "message": f"{format_usd_string(spent)} USD used without a commit token",
                    }
                )
            continue
        try:
            r = commit_token.verify(token, keys)
        except commit_token.CommitTokenError as e:
            failures.append(
                {
                    "code": "MALFORMED_TOKEN" if e.code == "INVALID_RECEIPT" else e.code,
                    "allocationId": aid,
                    "message": str(e),
                }
            )
            continue
        receipts[aid] = r
        if r["issuer"] != str(a.get("grantee", "")).lower():
            failures.append(
                {
                    "code": "ISSUER_MISMATCH",
                    "allocationId": aid,
                    "message": "the token is signed by another agent than the allocation's grantee",
                }
            )
        if f"{r['sagaId']}:{r['step']}" != a.get("idempotencyKey"):
            failures.append(
                {
                    "code": "STEP_MISMATCH",
                    "allocationId": aid,
                    "message": "the token's saga and step (<sagaId>:<step>) are not the allocation's idempotency key",
                }
            )
        try:
            signed: int | None = parse_usd(r["amountUsd"])
        except InvalidAmount:
            signed = None
        if signed != (-1 if spent is None else spent):
            failures.append(
                {
                    "code": "AMOUNT_MISMATCH",
                    "allocationId": aid,
                    "message": "a commit token on an allocation still active"
                    if spent is None
                    else f"the token signs {r['amountUsd']} USD, the ledger used {format_usd_string(spent)} USD",
                }
            )
        receipt_id = json.dumps([r["issuer"], r["sagaId"], r["step"]])
        earlier = billed.get(receipt_id)
        if earlier is not None:
            failures.append(
                {
                    "code": "DUPLICATE_RECEIPT",
                    "allocationId": aid,
                    "message": f"saga {r['sagaId']} step {r['step']} by {r['issuer']} is billed on {earlier} too",
                }
            )
        else:
            billed[receipt_id] = f"{pool.get('poolId')}/{aid}"
    total = micros(pool.get("allocatedUsd"), "the pool's allocatedUsd")
    if total is not None and total != allocated:
        failures.append(
            {
                "code": "TOTAL_MISMATCH",
                "message": f"the pool says {format_usd_string(total)} USD allocated; "
                f"its allocations add up to {format_usd_string(allocated)} USD",
            }
        )
    return {
        "ok": not failures,
        "poolId": pool.get("poolId"),
        "receipts": receipts,
        "allocatedUsd": format_usd_string(allocated),
        "usedUsd": format_usd_string(used),
        "failures": failures,
    }

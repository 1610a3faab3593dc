"""Random mandate chains, signed link by link without the issuer's checks, judged by Python and by TypeScript: the
verdict (valid, or the reason) must be the same for every one. This reaches the constraint validation and the
narrowing rules of docs/protocol.md §9.3–§9.5 with shapes no hand-written case lists."""

from __future__ import annotations

import random
from typing import Any

from agent_mesh import generate_did, verify_mandate
from agent_mesh.jcs import stringify
from agent_mesh.keys import b64encode, b64url_encode, sign

NOW_S = 1_767_225_600
PEOPLE = [generate_did(n) for n in ("alice", "bob", "carol", "dave")]
CAPS = ["search", "mail", "pay", "delete"]


def _usd(rng: random.Random) -> Any:
    if rng.random() < 0.03:
        return rng.choice([0.1 + 0.2, 1e-7, -1, "5", 1e9, 123.4567891])
    return rng.choice([0, 1, 5, 10, 50, 99.99, 100, 0.1, 0.000001, 12.5, 100.0])


def _names(rng: random.Random) -> Any:
    if rng.random() < 0.05:
        return "search"
    return rng.sample(CAPS, rng.randint(0, len(CAPS)))


def _cns(kind: str, rng: random.Random) -> Any:
    if rng.random() < 0.03:
        return rng.choice([None, [], "x", 5])
    c: dict[str, Any]
    if kind in ("intent", "cart"):
        c = {"spendLimitUsd": _usd(rng)}
        if rng.random() < 0.6:
            c["allowedMerchants"] = rng.sample(["shop", "cafe", "air"], rng.randint(0, 3))
    elif kind == "payment":
        c = {"amountUsd": _usd(rng), "merchant": rng.choice(["shop", "cafe", "air", "shop", "cafe", "air", ""])}
    elif kind == "task":
        c = {
            "allowed": _names(rng),
            "maxDelegationDepth": rng.choice([0, 1, 2, 3, 1, 2, 3, 2.0] + ([-1, 1.5] if rng.random() < 0.1 else [])),
        }
        for k in ("blocked", "humanGates", "dataAccess"):
            if rng.random() < 0.5:
                c[k] = _names(rng)
        for k in ("reversibleOnly", "sandbox"):
            if rng.random() < 0.4:
                c[k] = rng.choice([True, False, True] + (["yes"] if rng.random() < 0.1 else []))
        if rng.random() < 0.5:
            c["actionLimits"] = {
                cap: rng.choice([0, 1, 2, 5] + ([-1] if rng.random() < 0.1 else []))
                for cap in rng.sample(CAPS, rng.randint(0, 3))
            }
        if rng.random() < 0.5:
            c["computeLimit"] = {
                k: rng.choice([0, 10, 100] + ([2.5] if rng.random() < 0.1 else []))
                for k in rng.sample(["llmTokens", "webRequests"], rng.randint(0, 2))
            }
    else:
        c = {
            "token_budget": rng.choice([0, 100, 1000] + ([-5] if rng.random() < 0.1 else [])),
            "cost_budget_usd": _usd(rng),
            "quality_threshold": rng.choice([0, 0.5, 0.9, 1] + ([1.5] if rng.random() < 0.1 else [])),
            "task_type": rng.choice(["CODE", "CODE", "REASONING"] + (["POETRY"] if rng.random() < 0.1 else [])),
            "expected_steps": rng.choice([1, 3, 10]),
        }
    if rng.random() < 0.02:
        c["unknown"] = 1
    return c


def _link(rng: random.Random, kind: str, iss: dict, aud: dict, exp: int, parent: str | None) -> str:
    header = {"alg": "EdDSA", "typ": "mandate+jwt", "kid": iss["did"] + "#key-1"}
    payload: dict[str, Any] = {
        "iss": iss["did"],
        "aud": aud["did"],
        "iat": NOW_S - 10,
        "nbf": NOW_S - 10,
        "exp": exp,
        "jti": b64url_encode(rng.randbytes(16)),
        "kv": 1,
        "kind": kind,
        "cns": _cns(kind, rng),
    }
    if parent is not None:
        payload["prf"] = parent
    si = b64url_encode(stringify(header).encode()) + "." + b64url_encode(stringify(payload).encode())
    signer = iss if rng.random() > 0.03 else rng.choice(PEOPLE)
    return si + "." + b64url_encode(sign(signer["private_key"], si.encode()))


def _chain(rng: random.Random) -> str:
    family = rng.choice([["intent", "cart", "payment"], ["task"], ["model-budget"]])
    length = rng.randint(1, 4)
    token: str | None = None
    holder = PEOPLE[0]
    exp = NOW_S + 3600
    for i in range(length):
        if family[0] == "intent":
            kind = (
                "intent"
                if i == 0
                else rng.choice(
                    ["cart", "payment", "intent"]
                    if rng.random() < 0.1
                    else (["cart", "payment"] if i == 1 else ["payment"])
                )
            )
        else:
            kind = family[0]
        grantor = holder if rng.random() > 0.05 else rng.choice(PEOPLE)
        grantee = rng.choice([p for p in PEOPLE if p is not grantor])
        exp = exp + rng.choice([0, -60, -600, 60]) if i else exp
        token = _link(rng, kind, grantor, grantee, exp, token)
        holder = grantee
    assert token is not None
    return token


def test_random_chains_get_the_same_verdict(node_eval) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(2026)
    tokens = [_chain(rng) for _ in range(600)]
    keys = {p["did"]: p["public_key_bytes"] for p in PEOPLE}
    py = [verify_mandate(t, keys, now_ms=NOW_S * 1000)[2] for t in tokens]
    ts = node_eval(
        """
        import * as Effect from 'effect/Effect';
        import * as TestClock from 'effect/TestClock';
        import * as TestContext from 'effect/TestContext';
        import { Mandate, Keys, KeyResolver } from 'DIST/core/index.js';
        const resolver = KeyResolver.makeStatic(Object.fromEntries(Object.entries(input.keys).map(([d, k]) => [d, { publicKey: new Uint8Array(Buffer.from(k, 'base64')), keyVersion: 1 }])));
        const prog = Effect.gen(function* () {
          yield* TestClock.setTime(input.now);
          const r = [];
          for (const t of input.tokens) r.push(yield* Effect.match(Mandate.verifyMandate(t, resolver), { onFailure: (e) => e.reason, onSuccess: () => null }));
          return r;
        });
        out(await Effect.runPromise(prog.pipe(Effect.provide(Keys.Keys.noble), Effect.provide(TestContext.TestContext))));
        """,
        {"tokens": tokens, "keys": {d: b64encode(k) for d, k in keys.items()}, "now": NOW_S * 1000},
    )
    mismatches = [(i, p, t) for i, (p, t) in enumerate(zip(py, ts, strict=True)) if p != t]
    assert not mismatches, mismatches[:10]
    # the sample reaches the interesting verdicts, not only one of them
    assert {None, "MALFORMED", "ATTENUATION_WIDENED", "CHAIN_BROKEN", "SIGNATURE_INVALID", "DEPTH_EXCEEDED"} <= set(py)

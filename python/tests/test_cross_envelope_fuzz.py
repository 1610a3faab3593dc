"""Random mutations of signed envelopes, judged by Python and by TypeScript at one fixed time: the code (or valid)
must be the same for every one (docs/protocol.md §5, shape rules and validation order)."""

from __future__ import annotations

import copy
import random
from typing import Any

from agent_mesh import NonceRegistry, build_envelope, generate_did, validate_envelope
from agent_mesh.keys import b64encode
from agent_mesh.timestamp import to_iso_string

NOW = 1_767_268_800_000
ALICE = generate_did("alice", namespace="acme")
BOB = generate_did("bob")
CAROL = generate_did("carol")

ODD_VALUES: list[Any] = [None, 0, 1.5, True, "", "x", [], {}, "A" * 300, "\U0001f600" * 70, ["a"], {"k": 1}]
TIMES = [
    "2026-01-01T12:00:00Z",
    "2026-01-01t12:00:00.5z",
    "2026-01-01T12:00:00+00:00",
    "2026-01-01T12:00:00-00:00",
    "2026-01-01T14:00:00+02:00",
    "2026-02-30T00:00:00Z",
    "2026-01-01T12:00:60Z",
    "2026-01-01T12:00:00.123456789Z",
    to_iso_string(NOW - 3_600_000),
    to_iso_string(NOW + 3_600_000),
    to_iso_string(NOW + 2 * 86_400_000),
    "not a time",
]


def _mutate(env: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    e = copy.deepcopy(env)
    for _ in range(rng.randint(1, 2)):
        what = rng.randrange(10)
        if what == 9 and isinstance(e.get("proof"), dict):
            # move the whole window (proof.created with it), so the time checks are reached before the signature
            created = NOW + rng.choice([-200_000, -40_000, 29_000, 31_000, -3_600_000])
            e["createdAt"] = e["proof"]["created"] = to_iso_string(created)
            e["expiresAt"] = to_iso_string(created + rng.choice([1, 60_000, 300_000, 86_400_000, 86_400_001]))
            continue
        if what == 0:
            e.pop(rng.choice(list(e)), None)
        elif what == 1:
            e[rng.choice(["extra", "Type", "__x"])] = rng.choice(ODD_VALUES)
        elif what == 2:
            e[rng.choice(["type", "id", "correlationId", "nonce", "body", "from", "to"])] = rng.choice(ODD_VALUES)
        elif what == 3:
            e[rng.choice(["createdAt", "expiresAt"])] = rng.choice(TIMES)
        elif what == 4:
            e["from"] = rng.choice(
                [e.get("from", ""), str(e.get("from", "")).upper(), CAROL["did"], "did:mesh:a", "did:key:z6Mk"]
            )
        elif what == 5:
            e["to"] = rng.choice([BOB["did"].upper(), CAROL["did"], "did:mesh:bob ", BOB["did"]])
        elif what == 6:
            e["nonce"] = rng.choice(
                ["a" * 15, "a" * 16, "a" * 128, "a" * 129, "a+bcdefghijklmnopq", "AAAAAAAAAAAAAAAAAAAAAA"]
            )
        elif what == 7 and isinstance(e.get("proof"), dict):
            p = e["proof"]
            k = rng.choice(
                [
                    "type",
                    "cryptosuite",
                    "created",
                    "verificationMethod",
                    "proofPurpose",
                    "proofValue",
                    "@context",
                    "domain",
                ]
            )
            p[k] = rng.choice(
                [*ODD_VALUES, p.get(k), "z", "z111", CAROL["did"] + "#key-1", ["https://www.w3.org/ns/did/v1"]]
            )
            if rng.random() < 0.2:
                p.pop(k, None)
        else:
            e["body"] = rng.choice(
                [
                    {"capability": "x"},
                    {"x": float(rng.randint(0, 10**6)) / 7},
                    {"nested": {"a": [1, None]}},
                    e.get("body"),
                ]
            )
    return e


def test_random_envelopes_get_the_same_code(node_eval) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(5)
    base = [
        build_envelope(
            "MeshRequest",
            ALICE["did"],
            BOB["did"],
            {"capability": "echo", "params": {"i": i}},
            None,
            ALICE["private_key"],
            rng.choice([60, 300, 86_400]),
            now_ms=NOW - rng.randint(0, 40_000),
        )
        for i in range(20)
    ]
    cases = [copy.deepcopy(b) for b in base] + [_mutate(rng.choice(base), rng) for _ in range(600)]
    # each case on its own store, so a repeated nonce is judged alone
    py = [validate_envelope(e, ALICE["public_key_bytes"], BOB["did"], NonceRegistry(), now_ms=NOW)[1] for e in cases]
    ts = node_eval(
        """
        import * as Effect from 'effect/Effect';
        import * as Logger from 'effect/Logger';
        import * as TestClock from 'effect/TestClock';
        import * as TestContext from 'effect/TestContext';
        import { Envelope, Keys, NonceStore } from 'DIST/core/index.js';
        const prog = Effect.gen(function* () {
          yield* TestClock.setTime(input.now);
          const r = [];
          for (const e of input.cases)
            r.push(yield* Effect.match(Envelope.validateEnvelope(e, input.pub, input.me, NonceStore.makeMemory()), { onFailure: (x) => x.code, onSuccess: () => null }));
          return r;
        });
        out(await Effect.runPromise(prog.pipe(Effect.provide(Keys.Keys.noble), Effect.provide(TestContext.TestContext), Effect.provide(Logger.remove(Logger.defaultLogger)))));
        """,
        {"cases": cases, "pub": b64encode(ALICE["public_key_bytes"]), "me": BOB["did"], "now": NOW},
    )
    mismatches = [(i, cases[i], p, t) for i, (p, t) in enumerate(zip(py, ts, strict=True)) if p != t]
    assert not mismatches, mismatches[:5]
    assert {
        None,
        "MALFORMED",
        "SIGNATURE_INVALID",
        "WRONG_RECIPIENT",
        "TTL_TOO_LONG",
        "EXPIRED",
        "NOT_YET_VALID",
    } <= set(py)

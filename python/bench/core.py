"""Envelope validation and mandate verification per second, Python beside TypeScript on the same machine.

    python3 python/bench/core.py            (needs the built dist/: npm run build)

Each figure is the median of a few timed rounds; the raw Ed25519 verify of each runtime is printed beside as its
baseline. TypeScript runs its Effect API with the node:crypto key layer, as an application does.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from agent_mesh import (  # noqa: E402
    NonceRegistry,
    attenuate_to_cart,
    attenuate_to_payment,
    build_envelope,
    generate_did,
    issue_intent_mandate,
    validate_envelope,
    verify,
    verify_mandate,
)
from agent_mesh.keys import private_key_seed, sign  # noqa: E402
from agent_mesh.mandate import StaticKeyResolver  # noqa: E402


def rate(op: Callable[[], object], rounds: int = 5, round_s: float = 0.3) -> float:
    """Median ops/s over ``rounds`` rounds of about ``round_s`` seconds, after calibration."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            op()
        dt = time.perf_counter() - t0
        if dt > round_s / 10:
            n = max(1, int(n * round_s / dt))
            break
        n *= 2
    rates = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            op()
        rates.append(n / (time.perf_counter() - t0))
    return statistics.median(rates)


def python_figures() -> dict[str, float]:
    alice, bob, carol, dave = (generate_did(n) for n in ("alice", "bob", "carol", "dave"))
    body = {
        "capability": "summarize",
        "params": {"text": "The quick brown fox jumps over the lazy dog.", "maxWords": 12},
    }
    pool = [
        build_envelope("MeshRequest", alice["did"], bob["did"], body, None, alice["private_key"]) for _ in range(20_000)
    ]
    state = {"i": 0, "reg": NonceRegistry(capacity=1_000_000)}

    def validate_one() -> None:
        if state["i"] == len(pool):
            state["i"] = 0
            state["reg"] = NonceRegistry(capacity=1_000_000)
        env = pool[state["i"]]
        state["i"] += 1
        ok, code = validate_envelope(env, alice["public_key_bytes"], bob["did"], state["reg"])
        assert ok, code

    keys = StaticKeyResolver({p["did"]: p["public_key_bytes"] for p in (alice, bob, carol, dave)})
    one = issue_intent_mandate(alice["did"], bob["did"], {"spendLimitUsd": 100}, alice["private_key"])
    cart = attenuate_to_cart(one, carol["did"], {"spendLimitUsd": 50}, bob["private_key"])
    three = attenuate_to_payment(cart, dave["did"], 10, "shop", carol["private_key"])
    data = b"x" * 64
    sig = sign(alice["private_key"], data)
    out = {
        "raw Ed25519 verify": rate(lambda: verify(alice["public_key_bytes"], data, sig)),
        "envelope validate": rate(validate_one),
        "mandate verify (1 link)": rate(lambda: verify_mandate(one.token, keys)[0] or sys.exit("invalid")),
        "mandate verify (3 links)": rate(lambda: verify_mandate(three.token, keys)[0] or sys.exit("invalid")),
    }
    out["_seeds"] = {p["did"]: private_key_seed(p["private_key"]).hex() for p in (alice, bob, carol, dave)}  # type: ignore[assignment]
    out["_tokens"] = [one.token, three.token]  # type: ignore[assignment]
    return out


TS = r"""
import * as Effect from 'effect/Effect';
import * as crypto from 'node:crypto';
import { Did, Envelope, Keys, Mandate, NonceStore, KeyResolver } from 'DIST/core/index.js';
import { KeysNative } from 'DIST/node/index.js';
import { readFileSync } from 'node:fs';
const input = JSON.parse(readFileSync(0, 'utf8'));
const keys = Effect.runSync(Effect.provide(Keys.Keys, KeysNative.layer));
const withKeys = (e) => Effect.provideService(e, Keys.Keys, keys);
const rate = (op, rounds = 5, roundMs = 300) => {
  let n = 1;
  for (;;) { const t0 = performance.now(); for (let i = 0; i < n; i++) op(); const dt = performance.now() - t0;
    if (dt > roundMs / 10) { n = Math.max(1, Math.round(n * roundMs / dt)); break } n *= 2 }
  const rates = [];
  for (let r = 0; r < rounds; r++) { const t0 = performance.now(); for (let i = 0; i < n; i++) op(); rates.push(n / ((performance.now() - t0) / 1000)) }
  rates.sort((a, b) => a - b); return rates[Math.floor(rates.length / 2)];
};
const [alice, bob] = Effect.runSync(withKeys(Effect.all([Did.generateDid('alice'), Did.generateDid('bob')])));
const body = { capability: 'summarize', params: { text: 'The quick brown fox jumps over the lazy dog.', maxWords: 12 } };
const build = withKeys(Envelope.buildEnvelope({ type: 'MeshRequest', from: alice.did, to: bob.did, body, privateKey: alice.privateKey }));
const pool = Effect.runSync(Effect.forEach(Array.from({ length: 20000 }), () => build));
let next = 0; let store = NonceStore.makeMemory({ capacity: 1000000 });
const validateOne = () => { if (next === pool.length) { next = 0; store = NonceStore.makeMemory({ capacity: 1000000 }) }
  Effect.runSync(withKeys(Envelope.validateEnvelope(pool[next++], alice.publicKeyBytes, bob.did, store))) };
const resolver = KeyResolver.makeStatic(Object.fromEntries(Object.entries(input.seeds).map(([did, seed]) =>
  [did, { publicKey: Effect.runSync(keys.importPrivateKey(new Uint8Array(Buffer.from(seed, 'hex')))).publicKey, keyVersion: 1 }])));
const verifyOne = (t) => () => Effect.runSync(withKeys(Mandate.verifyMandate(t, resolver)));
const { privateKey, publicKey } = crypto.generateKeyPairSync('ed25519');
const data = crypto.randomBytes(64); const sig = crypto.sign(null, data, privateKey);
console.log(JSON.stringify({
  'raw Ed25519 verify': rate(() => crypto.verify(null, data, publicKey, sig)),
  'envelope validate': rate(validateOne),
  'mandate verify (1 link)': rate(verifyOne(input.tokens[0])),
  'mandate verify (3 links)': rate(verifyOne(input.tokens[1])),
}));
process.exit(0);
"""


def main() -> None:
    py = python_figures()
    payload = {"seeds": py.pop("_seeds"), "tokens": py.pop("_tokens")}
    proc = subprocess.run(
        ["node", "--input-type=module", "-e", TS.replace("DIST", (ROOT / "dist").as_uri())],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    ts = json.loads(proc.stdout.strip().split("\n")[-1])
    print(f"{'operation':<28}{'Python ops/s':>14}{'TypeScript ops/s':>18}{'Python/TS':>11}")
    for name, v in py.items():
        print(f"{name:<28}{v:>14,.0f}{ts[name]:>18,.0f}{v / ts[name]:>11.2f}")


if __name__ == "__main__":
    main()

"""Cross-language tests of the core: what Python signs, TypeScript (the built dist/) accepts, and the reverse;
envelopes, mandate chains, proofs, commit tokens, canonical JSON and identities (docs/protocol.md is the judge)."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from agent_mesh import (
    NonceRegistry,
    SpendingGuard,
    TaskConstraints,
    attenuate_task_mandate,
    attenuate_to_cart,
    attenuate_to_payment,
    build_envelope,
    canonicalize,
    did_hash,
    extract_public_key,
    generate_did,
    issue_intent_mandate,
    issue_task_mandate,
    load_identity_file,
    sign_message,
    validate_envelope,
    verify_mandate,
    verify_message,
)
from agent_mesh import commit_token
from agent_mesh.did import identity_file_content
from agent_mesh.keys import b64encode, private_key_seed, private_key_to_pkcs8
from agent_mesh.timestamp import now_ms, to_iso_string

IMPORTS = "import { MeshPromise, MandatePromise } from 'DIST/promise/index.js';\n"


def seed_hex(ident: dict) -> str:
    return private_key_seed(ident["private_key"]).hex()


# ---------------------------------------------------------------------------------------------------------------
# Envelopes


def test_python_envelope_validated_by_typescript(node_eval) -> None:  # type: ignore[no-untyped-def]
    alice = generate_did("alice", namespace="py")
    bob = generate_did("bob", namespace="ts")
    env = build_envelope(
        "MeshRequest",
        alice["did"],
        bob["did"],
        {"capability": "echo", "params": {"text": "h\u00e9llo \U0001f600", "n": 1.5, "big": 1e21}},
        None,
        alice["private_key"],
    )
    tampered = {**env, "body": {**env["body"], "params": {"text": "changed"}}}
    result = node_eval(
        IMPORTS
        + """
        const store = MeshPromise.createMemoryNonceStore();
        const r = [];
        r.push(await MeshPromise.validateEnvelope(input.env, input.pub, input.me, store));
        r.push(await MeshPromise.validateEnvelope(input.env, input.pub, input.me, store));
        r.push(await MeshPromise.validateEnvelope(input.tampered, input.pub, input.me, MeshPromise.createMemoryNonceStore()));
        r.push(await MeshPromise.validateEnvelope(input.env, input.pub, 'did:mesh:someone.else', MeshPromise.createMemoryNonceStore()));
        r.push(await MeshPromise.validateEnvelope(input.env, input.wrongPub, input.me, MeshPromise.createMemoryNonceStore()));
        out(r);
        """,
        {
            "env": env,
            "tampered": tampered,
            "pub": alice["public_key_b64"],
            "wrongPub": bob["public_key_b64"],
            "me": bob["did"],
        },
    )
    assert result == [
        [True, None],
        [False, "REPLAYED"],
        [False, "SIGNATURE_INVALID"],
        [False, "WRONG_RECIPIENT"],
        [False, "SIGNATURE_INVALID"],
    ]


def test_typescript_envelope_validated_by_python(node_eval) -> None:  # type: ignore[no-untyped-def]
    alice = generate_did("alice", namespace="ts")
    bob = generate_did("bob", namespace="py")
    env = node_eval(
        IMPORTS
        + """
        const env = await MeshPromise.buildEnvelope({ type: 'MeshResponse', from: input.from, to: input.to,
          body: { capability: 'echo', result: { text: 'gr\\u00fc\\u00dfe \\u{1F600}', list: [1, 2.25, null, true], n: 1e-7 } },
          privateKey: unhex(input.seed), correlationId: 'corr-1', ttlSeconds: 120 });
        out(env);
        """,
        {"from": alice["did"], "to": bob["did"], "seed": seed_hex(alice)},
    )
    assert env["correlationId"] == "corr-1" and env["body"]["result"]["n"] == 1e-7
    reg = NonceRegistry()
    assert validate_envelope(env, alice["public_key_bytes"], bob["did"], reg) == (True, None)
    assert validate_envelope(env, alice["public_key_bytes"], bob["did"], reg) == (False, "REPLAYED")
    tampered = {**env, "body": {**env["body"], "result": "changed"}}
    assert validate_envelope(tampered, alice["public_key_bytes"], bob["did"], NonceRegistry()) == (
        False,
        "SIGNATURE_INVALID",
    )
    assert validate_envelope(env, alice["public_key_bytes"], alice["did"], NonceRegistry()) == (
        False,
        "WRONG_RECIPIENT",
    )
    expired_now = now_ms() + 10 * 60_000
    assert validate_envelope(env, alice["public_key_bytes"], bob["did"], NonceRegistry(), now_ms=expired_now) == (
        False,
        "EXPIRED",
    )


def test_envelope_verdicts_agree_on_malformed_input(node_eval) -> None:  # type: ignore[no-untyped-def]
    """One set of edge-case envelopes, judged by both: the codes must be equal."""
    alice = generate_did("alice")
    bob = generate_did("bob")
    env = build_envelope("MeshRequest", alice["did"], bob["did"], {"capability": "x"}, None, alice["private_key"])
    created = env["createdAt"]
    cases = {
        "valid": env,
        "extra member": {**env, "x": 1},
        "upper-case from": {**env, "from": alice["did"].upper()},
        "nonce too short": {**env, "nonce": "abc"},
        "created +02:00": {**env, "createdAt": created.replace("Z", "+02:00")},
        "created +00:00 (python isoformat)": {**env, "createdAt": created.replace("Z", "+00:00")},
        "proof created differs": {**env, "proof": {**env["proof"], "created": to_iso_string(0)}},
        "proof by another method": {**env, "proof": {**env["proof"], "verificationMethod": bob["did"] + "#key-1"}},
        "extra proof member": {**env, "proof": {**env["proof"], "domain": "x"}},
        "body array": {**env, "body": [1]},
        "expires before created": {**env, "expiresAt": to_iso_string(0)},
        "ttl over a day": {**env, "expiresAt": to_iso_string(now_ms() + 2 * 86_400_000)},
        "type too long": {**env, "type": "t" * 129},
        "astral type within 128 UTF-16 units": {**env, "type": "\U0001f600" * 64},
        "astral type over 128 UTF-16 units": {**env, "type": "\U0001f600" * 65},
        "tampered signature": {**env, "proof": {**env["proof"], "proofValue": env["proof"]["proofValue"][:-2] + "11"}},
    }
    ts = node_eval(
        IMPORTS
        + """
        const r = {};
        for (const [name, env] of Object.entries(input.cases))
          r[name] = (await MeshPromise.validateEnvelope(env, input.pub, input.me, MeshPromise.createMemoryNonceStore()))[1];
        out(r);
        """,
        {"cases": cases, "pub": alice["public_key_b64"], "me": bob["did"]},
    )
    py = {
        name: validate_envelope(e, alice["public_key_b64"], bob["did"], NonceRegistry())[1] for name, e in cases.items()
    }
    assert py == ts
    assert py["valid"] is None and py["extra member"] == "MALFORMED" and py["tampered signature"] == "SIGNATURE_INVALID"


# ---------------------------------------------------------------------------------------------------------------
# Mandates


def _dids(*names: str) -> dict[str, dict]:
    return {n: generate_did(n, namespace="x") for n in names}


def test_python_mandate_chain_verified_by_typescript(node_eval) -> None:  # type: ignore[no-untyped-def]
    p = _dids("alice", "bob", "carol", "dave")
    intent = issue_intent_mandate(
        p["alice"]["did"],
        p["bob"]["did"],
        {"spend_limit_usd": 250.75, "allowed_merchants": ["shop", "cafe"]},
        p["alice"]["private_key"],
    )
    cart = attenuate_to_cart(
        intent, p["carol"]["did"], {"spendLimitUsd": 100.5, "allowedMerchants": ["shop"]}, p["bob"]["private_key"], 600
    )
    pay = attenuate_to_payment(cart, p["dave"]["did"], 0.1, "shop", p["carol"]["private_key"])
    task = issue_task_mandate(
        p["alice"]["did"],
        p["bob"]["did"],
        TaskConstraints(["search", "mail"], 1, human_gates=["mail"], action_limits={"search": 5}),
        p["alice"]["private_key"],
    )
    child = attenuate_task_mandate(
        task,
        p["carol"]["did"],
        {"allowed": ["search"], "maxDelegationDepth": 0, "humanGates": ["mail"], "actionLimits": {"search": 2}},
        p["bob"]["private_key"],
    )
    keys = {v["did"]: {"publicKey": v["public_key_b64"], "keyVersion": 1} for v in p.values()}
    r = node_eval(
        IMPORTS
        + """
        const v = async (t, o) => { const [ok, m, reason] = await MandatePromise.verifyMandate(t, input.keys, o);
          return ok ? { ok, kind: m.kind, grantor: m.grantor, grantee: m.grantee, depth: m.depth, cns: m.constraints, exp: m.expiresAt } : { ok, reason } };
        out({
          pay: await v(input.pay, { expectedGrantee: input.dave }),
          payWrongGrantee: await v(input.pay, { expectedGrantee: input.carol }),
          payTaskKind: await v(input.pay, { kinds: ['task'] }),
          rotated: (await MandatePromise.verifyMandate(input.pay, { ...input.keys, [input.bob]: { publicKey: input.keys[input.bob].publicKey, keyVersion: 2 } }))[2],
          task: await MandatePromise.verifyTaskMandate(input.child, { expectedGrantee: input.carol, keys: input.keys }),
          taskWrong: await MandatePromise.verifyTaskMandate(input.child, { expectedGrantee: input.dave, keys: input.keys }),
        });
        """,
        {
            "pay": pay.token,
            "child": child.token,
            "keys": keys,
            "dave": p["dave"]["did"],
            "carol": p["carol"]["did"],
            "bob": p["bob"]["did"],
        },
    )
    assert r["pay"] == {
        "ok": True,
        "kind": "payment",
        "grantor": p["carol"]["did"],
        "grantee": p["dave"]["did"],
        "depth": 2,
        "cns": {"amountUsd": 0.1, "merchant": "shop"},
        "exp": pay.expires_at,
    }
    assert r["payWrongGrantee"] == {"ok": False, "reason": "GRANTEE_MISMATCH"}
    assert r["payTaskKind"] == {"ok": False, "reason": "KIND_MISMATCH"}
    assert r["rotated"] == "KEY_ROTATED"
    assert r["task"] == {"valid": True, "reason": None}
    assert r["taskWrong"] == {"valid": False, "reason": "GRANTEE_MISMATCH"}


def test_typescript_mandate_chain_verified_by_python(node_eval) -> None:  # type: ignore[no-untyped-def]
    p = _dids("alice", "bob", "carol", "dave")
    seeds = {n: seed_hex(v) for n, v in p.items()}
    dids = {n: v["did"] for n, v in p.items()}
    r = node_eval(
        IMPORTS
        + """
        const { dids, seeds } = input;
        const intent = await MandatePromise.issueIntentMandate({ grantorDid: dids.alice, granteeDid: dids.bob, privateKey: unhex(seeds.alice),
          constraints: { spendLimitUsd: 1000, allowedMerchants: ['air', 'hotel'] } });
        const cart = await MandatePromise.attenuateToCart({ parent: intent.token, granteeDid: dids.carol, grantorPrivateKey: unhex(seeds.bob),
          narrowed: { spendLimitUsd: 412.5, allowedMerchants: ['air'] }, ttlSeconds: 900 });
        const pay = await MandatePromise.attenuateToPayment({ parent: cart, granteeDid: dids.dave, grantorPrivateKey: unhex(seeds.carol),
          amountUsd: 412.5, merchant: 'air' });
        const task = await MandatePromise.issueTaskMandate({ grantorDid: dids.alice, granteeDid: dids.bob, privateKey: unhex(seeds.alice),
          constraints: { allowed: ['book'], maxDelegationDepth: 0, computeLimit: { llmTokens: 10 } } });
        out({ cart: cart.token, pay: pay.token, task: task.token });
        """,
        {"dids": dids, "seeds": seeds},
    )
    keys = {v["did"]: v["public_key_bytes"] for v in p.values()}
    ok, m, reason = verify_mandate(r["pay"], keys, expected_grantee=dids["dave"])
    assert (ok, reason) == (True, None) and m is not None
    assert m.kind == "payment" and m.depth == 2 and m.constraints == {"amountUsd": 412.5, "merchant": "air"}
    assert m.parent is not None and m.parent.token == r["cart"]
    assert verify_mandate(r["pay"], keys, expected_grantee=dids["carol"]) == (False, None, "GRANTEE_MISMATCH")
    tampered = r["pay"][:-3] + ("AAA" if not r["pay"].endswith("AAA") else "BBA")
    assert verify_mandate(tampered, keys)[2] in ("SIGNATURE_INVALID", "MALFORMED")
    other = generate_did("alice", namespace="x")
    assert verify_mandate(r["pay"], {**keys, dids["alice"]: other["public_key_bytes"]})[2] == "SIGNATURE_INVALID"
    # a Python guard spends under the TypeScript chain, in micro-dollars
    guard = SpendingGuard(keys)
    assert guard.authorize(r["pay"], 412.5, "air", dids["dave"]).amount_micros == 412_500_000
    # Python attenuates below a TypeScript parent, and TypeScript verifies the mixed chain
    cart2 = attenuate_to_payment(r["cart"], dids["dave"], 12.25, "air", p["carol"]["private_key"])
    assert verify_mandate(cart2.token, keys, expected_grantee=dids["dave"])[0] is True
    mixed = node_eval(
        IMPORTS
        + "out((await MandatePromise.verifyMandate(input.token, input.keys, { expectedGrantee: input.dave })).filter((x, i) => i !== 1));",
        {"token": cart2.token, "keys": {d: {"publicKey": b64encode(k)} for d, k in keys.items()}, "dave": dids["dave"]},
    )
    assert mixed == [True, None]
    from agent_mesh import verify_task_mandate

    assert verify_task_mandate(r["task"], dids["bob"], keys) == {"valid": True, "reason": None}


def test_mandate_issued_in_both_languages_is_the_same_token(node_eval) -> None:  # type: ignore[no-untyped-def]
    """One grantor key, one time and one jti: both issuers write the same bytes (docs/protocol.md §9.1)."""
    alice = generate_did("alice")
    bob = generate_did("bob")
    cns = {
        "allowed": ["a", "b\u00e9"],
        "maxDelegationDepth": 3,
        "actionLimits": {"a": 2},
        "computeLimit": {"webRequests": 5},
        "sandbox": True,
    }
    ts = node_eval(
        """
        import * as Effect from 'effect/Effect';
        import * as TestClock from 'effect/TestClock';
        import * as TestContext from 'effect/TestContext';
        import { Mandate, Keys } from 'DIST/core/index.js';
        const prog = Effect.gen(function* () {
          yield* TestClock.setTime(input.now);
          return yield* Mandate.issueTaskMandate({ grantorDid: input.alice, granteeDid: input.bob, privateKey: unhex(input.seed), constraints: input.cns, ttlSeconds: 777 });
        });
        const m = await Effect.runPromise(prog.pipe(Effect.provide(Keys.Keys.noble), Effect.provide(TestContext.TestContext)));
        out(m.token);
        """,
        {"alice": alice["did"], "bob": bob["did"], "seed": seed_hex(alice), "cns": cns, "now": 1_767_225_600_000},
    )
    from agent_mesh import decode_unverified

    jti = decode_unverified(ts).jti
    py = issue_task_mandate(alice["did"], bob["did"], cns, alice["private_key"], 777, now_ms=1_767_225_600_000, jti=jti)
    assert py.token == ts


# ---------------------------------------------------------------------------------------------------------------
# Proofs, commit tokens, canonical JSON, identities


def test_proofs_both_ways(node_eval) -> None:  # type: ignore[no-untyped-def]
    alice = generate_did("alice")
    msg = {
        "@context": ["https://www.w3.org/ns/credentials/v2"],
        "n": 1,
        "f": 0.000001,
        "s": "\u2028\U0001f600",
        "nested": {"b": [], "a": {}},
    }
    py_signed = sign_message(msg, alice["private_key"], alice["did"] + "#key-1")
    r = node_eval(
        IMPORTS
        + """
        const pub = unhex(input.pub);
        const okPy = await MeshPromise.verifyMessage(input.signed, pub, { verificationMethod: input.vm });
        const badPy = await MeshPromise.verifyMessage({ ...input.signed, n: 2 }, pub);
        const tsSigned = await MeshPromise.signMessage(input.msg, unhex(input.seed), input.vm);
        out({ okPy, badPy, tsSigned });
        """,
        {
            "signed": py_signed,
            "pub": alice["public_key_bytes"].hex(),
            "vm": alice["did"] + "#key-1",
            "msg": msg,
            "seed": seed_hex(alice),
        },
    )
    assert r["okPy"] is True and r["badPy"] is False
    assert (
        verify_message(r["tsSigned"], alice["public_key_bytes"], verification_method=alice["did"] + "#key-1")
        == r["tsSigned"]
    )
    # same message, key and second: the same proof value
    again = sign_message(msg, alice["private_key"], alice["did"] + "#key-1", created=r["tsSigned"]["proof"]["created"])
    assert again["proof"] == r["tsSigned"]["proof"]


def test_commit_tokens_both_ways(node_eval) -> None:  # type: ignore[no-untyped-def]
    agent = generate_did("flights", namespace="travel")
    receipt = {
        "sagaId": "s-1",
        "step": "book",
        "capability": "book-flight",
        "amountUsd": "99.990",
        "resultDigest": commit_token.digest_result("booked \u00e9"),
        "at": to_iso_string(now_ms()),
        "issuer": agent["did"],
    }
    py_token = commit_token.sign(receipt, agent["private_key"])
    r = node_eval(
        """
        import * as Effect from 'effect/Effect';
        import { CommitToken, Keys } from 'DIST/core/index.js';
        const run = (e) => Effect.runPromise(Effect.either(e.pipe(Effect.provide(Keys.Keys.noble))));
        const v = await run(CommitToken.verify(input.token, unhex(input.pub)));
        const bad = await run(CommitToken.verify(input.token.slice(0, -2) + 'AA', unhex(input.pub)));
        const signed = await run(CommitToken.sign(input.receipt, unhex(input.seed)));
        const digest = await run(CommitToken.digestResult('booked \\u00e9'));
        out({ v: v.right ?? v.left.code, bad: bad.left?.code ?? 'accepted', signed: signed.right, digest: digest.right });
        """,
        {"token": py_token, "pub": agent["public_key_bytes"].hex(), "receipt": receipt, "seed": seed_hex(agent)},
    )
    assert r["v"] == {**receipt, "amountUsd": "99.99"}
    assert r["bad"] in ("SIGNATURE_INVALID", "MALFORMED_TOKEN")
    assert r["signed"] == py_token
    assert r["digest"] == receipt["resultDigest"]
    assert commit_token.verify(r["signed"], agent["public_key_bytes"])["amountUsd"] == "99.99"


def _random_json(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randint(-(2**60), 2**60)
    if kind == 2:
        return rng.choice([rng.uniform(-1e6, 1e6), rng.random() * 10 ** rng.randint(-30, 30), 1e21, 5e-324, 0.1 + 0.2])
    if kind in (3, 4):
        return "".join(
            chr(rng.choice([rng.randint(0, 0x7F), rng.randint(0x80, 0xD7FF), rng.randint(0xE000, 0x10FFFF)]))
            for _ in range(rng.randint(0, 8))
        )
    if kind in (5, 6):
        return {
            str(_random_json(rng, 9))
            if rng.random() < 0.5
            else chr(rng.randint(0x20, 0x10FFFF) if rng.random() < 0.5 else rng.randint(0x20, 0x7E))
            * rng.randint(1, 3): _random_json(rng, depth + 1)
            for _ in range(rng.randint(0, 5))
        }
    return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 5))]


def _no_surrogates(v: object) -> bool:
    s = json.dumps(v, ensure_ascii=False)
    return not any(0xD800 <= ord(c) <= 0xDFFF for c in s)


def test_canonical_json_agrees_with_typescript(node_eval) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(13)
    values = [v for v in (_random_json(rng) for _ in range(400)) if _no_surrogates(v)]
    ts = node_eval(
        """
        import { Canonical } from 'DIST/core/index.js';
        out(input.map((v) => Canonical.canonicalJson(v).right));
        """,
        values,
    )
    assert [canonicalize(v) for v in values] == ts


def test_identities_both_ways(node_eval, tmp_path: Path, repo_root: Path) -> None:  # type: ignore[no-untyped-def]
    py = generate_did("alice", "http://127.0.0.1:9999", "py")
    r = node_eval(
        IMPORTS
        + """
        const key = await MeshPromise.extractPublicKey(input.doc);
        const ts = await MeshPromise.generateDid('bob', 'http://127.0.0.1:8888', 'ts');
        const revoked = await MeshPromise.extractPublicKey({ ...input.doc, verificationMethod: [{ ...input.doc.verificationMethod[0], revoked: '2026-01-01T00:00:00Z' }] }).then(() => 'accepted', (e) => e.code);
        out({ key: hex(key), hash: MeshPromise.didHash(input.did), tsDoc: ts.document, tsDid: ts.did, tsKey: hex(ts.publicKeyBytes), revoked });
        """,
        {"doc": py["document"], "did": py["did"]},
    )
    assert (
        r["key"] == py["public_key_bytes"].hex() and r["hash"] == did_hash(py["did"]) and r["revoked"] == "KEY_REVOKED"
    )
    assert extract_public_key(r["tsDoc"]).hex() == r["tsKey"]
    # `mesh keygen` writes an identity file Python loads; Python's file has the same members in the same order
    out = tmp_path / "ts.identity.json"
    proc = subprocess.run(
        [
            "node",
            str(repo_root / "dist" / "bin" / "mesh.js"),
            "keygen",
            "carol",
            "--namespace",
            "ts",
            "--endpoint",
            "http://127.0.0.1:7777",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    loaded = load_identity_file(out)
    ts_file = json.loads(out.read_text())
    assert (
        loaded["did"] == "did:mesh:ts.carol"
        and loaded["document"]["service"][0]["serviceEndpoint"] == "http://127.0.0.1:7777"
    )
    assert list(identity_file_content(loaded)) == list(ts_file)
    assert b64encode(private_key_to_pkcs8(loaded["private_key"])) == ts_file["privateKeyPkcs8B64"]
    assert identity_file_content(loaded) == ts_file


@pytest.mark.parametrize("amount", [0.1, 412.5, 999999999.999999, 1e-6, 123456.000001])
def test_payment_amount_round_trips_through_typescript(node_eval, amount: float) -> None:  # type: ignore[no-untyped-def]
    p = _dids("alice", "bob", "carol")
    intent = issue_intent_mandate(
        p["alice"]["did"], p["bob"]["did"], {"spendLimitUsd": 999999999.999999}, p["alice"]["private_key"]
    )
    pay = attenuate_to_payment(intent, p["carol"]["did"], amount, "m", p["bob"]["private_key"])
    keys = {v["did"]: {"publicKey": v["public_key_b64"]} for v in p.values()}
    r = node_eval(
        IMPORTS
        + "const [ok, m, reason] = await MandatePromise.verifyMandate(input.t, input.k); out([ok, ok ? m.constraints.amountUsd : reason]);",
        {"t": pay.token, "k": keys},
    )
    assert r == [True, amount]


def test_approvals_both_ways(node_eval) -> None:  # type: ignore[no-untyped-def]
    """A grantor approving in Python resumes a TypeScript agent's gate, and the reverse (docs/protocol.md §11)."""
    from agent_mesh.approval import ApprovalError, sign_approval, verify_approval

    alice = generate_did("alice")
    py_approval = sign_approval("task-7", "send_email", alice["did"], alice["private_key"], "approve", 600)
    r = node_eval(
        """
        import * as Effect from 'effect/Effect';
        import { Approval, Keys, KeyResolver } from 'DIST/core/index.js';
        const resolver = KeyResolver.makeStatic({ [input.did]: { publicKey: unhex(input.pub), keyVersion: 1 } });
        const run = (e) => Effect.runPromise(Effect.either(e.pipe(Effect.provide(Keys.Keys.noble))));
        const expected = { taskId: 'task-7', capability: 'send_email', grantor: input.did };
        const ok = await run(Approval.verifyApproval(input.approval, expected, resolver));
        const mismatch = await run(Approval.verifyApproval(input.approval, { ...expected, capability: 'delete' }, resolver));
        const forged = await run(Approval.verifyApproval({ ...input.approval, decision: 'deny' }, expected, resolver));
        const ts = await run(Approval.signApproval({ taskId: 'task-8', capability: 'pay', decision: 'deny', ttlSeconds: 300 }, input.did, unhex(input.seed)));
        out({ ok: ok.right?.decision ?? ok.left.code, mismatch: mismatch.left?.code, forged: forged.left?.code, ts: ts.right });
        """,
        {"approval": py_approval, "did": alice["did"], "pub": alice["public_key_bytes"].hex(), "seed": seed_hex(alice)},
    )
    assert r == {"ok": "approve", "mismatch": "APPROVAL_MISMATCH", "forged": "APPROVAL_INVALID", "ts": r["ts"]}
    assert verify_approval(r["ts"], "task-8", "pay", alice["did"], alice["public_key_bytes"])["decision"] == "deny"
    with pytest.raises(ApprovalError) as e:
        verify_approval(r["ts"], "task-8", "pay", "did:mesh:bob", alice["public_key_bytes"])
    assert e.value.code == "APPROVAL_WRONG_SIGNER"

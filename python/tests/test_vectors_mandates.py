"""test/vectors/mandates.json (docs/protocol.md §9.11): every verdict, and the valid tokens reissued byte for byte."""

from __future__ import annotations

import pytest

from agent_mesh import mandate as M
from conftest import load_vector

DATA = load_vector("mandates.json")
VECTORS = DATA["vectors"]
SEEDS = {did: bytes.fromhex(k["seedHex"]) for did, k in DATA["keys"].items()}


def resolver(v: dict) -> M.StaticKeyResolver:
    return M.StaticKeyResolver(
        {
            did: M.ResolvedKey(bytes.fromhex(k["publicKeyHex"]), v.get("keyVersions", {}).get(did, 1))
            for did, k in DATA["keys"].items()
            if did not in v.get("omitKeys", [])
        }
    )


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
def test_mandate_vector(v: dict) -> None:
    now_ms = v.get("time", DATA["defaultTime"]) * 1000
    valid, mandate, reason = M.verify_mandate(
        v["token"], resolver(v), expected_grantee=v.get("expectedGrantee"), now_ms=now_ms
    )
    assert (valid, reason) == (v["valid"], v.get("reason"))
    if valid:
        assert mandate is not None and mandate.token == v["token"]
        if "expectedGrantee" in v:
            assert mandate.grantee == v["expectedGrantee"]
    else:
        assert mandate is None


def test_jwk_is_the_public_key() -> None:
    for k in DATA["keys"].values():
        assert M.b64url_decode(k["jwk"]["x"], canonical=True).hex() == k["publicKeyHex"]
        assert M.load_private_key(bytes.fromhex(k["seedHex"])) is not None


def _reissue(token: str) -> M.Mandate:
    m = M.decode_unverified(token)
    parent = _reissue(m.parent.token) if m.parent is not None else None
    kw = dict(key_version=m.key_version, now_ms=m.issued_at * 1000, jti=m.jti)
    ttl = m.expires_at - m.issued_at
    key = SEEDS[m.grantor]
    c = m.constraints
    if m.kind == "intent":
        return M.issue_intent_mandate(m.grantor, m.grantee, c, key, ttl, **kw)
    if m.kind == "cart":
        assert parent is not None
        return M.attenuate_to_cart(parent, m.grantee, c, key, ttl, **kw)
    if m.kind == "payment":
        assert parent is not None
        return M.attenuate_to_payment(parent.token, m.grantee, c["amountUsd"], c["merchant"], key, ttl, **kw)
    if m.kind == "task":
        if parent is None:
            return M.issue_task_mandate(m.grantor, m.grantee, c, key, ttl, **kw)
        return M.attenuate_task_mandate(parent, m.grantee, c, key, ttl, **kw)
    assert m.kind == "model-budget" and parent is None
    return M.issue_model_budget_mandate(m.grantor, m.grantee, c, key, ttl, **kw)


VALID = [v for v in VECTORS if v["valid"]]


@pytest.mark.parametrize("v", VALID, ids=[v["name"] for v in VALID])
def test_valid_tokens_reissued_byte_for_byte(v: dict) -> None:
    assert _reissue(v["token"]).token == v["token"]

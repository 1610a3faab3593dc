"""test/vectors/commit-tokens.json (docs/protocol.md §13.5): signing reproduces every token, invalid ones fail with
their code."""

from __future__ import annotations

import pytest

from agent_mesh import commit_token as C
from agent_mesh.keys import public_key_bytes
from agent_mesh.mandate import StaticKeyResolver
from conftest import load_vector

DATA = load_vector("commit-tokens.json")
SEED = bytes.fromhex(DATA["issuer"]["seedHex"])
PUB = bytes.fromhex(DATA["issuer"]["publicKeyHex"])


def test_issuer_key() -> None:
    assert public_key_bytes(SEED) == PUB


@pytest.mark.parametrize("t", DATA["tokens"], ids=[t["name"] for t in DATA["tokens"]])
def test_signed_token(t: dict) -> None:
    assert C.digest_result(t["result"]) == t["receipt"]["resultDigest"]
    assert C.sign(t["receipt"], SEED) == t["token"]
    assert C.verify(t["token"], PUB) == t["signed"]
    assert C.verify(t["token"], StaticKeyResolver({DATA["issuer"]["did"]: PUB})) == t["signed"]
    assert C.decode_unverified(t["token"]) == t["signed"]


@pytest.mark.parametrize("t", DATA["invalid"], ids=[t["name"] for t in DATA["invalid"]])
def test_invalid_token(t: dict) -> None:
    with pytest.raises(C.CommitTokenError) as e:
        C.verify(t["token"], PUB)
    assert e.value.code == t["expect"]


def test_other_failures() -> None:
    token = DATA["tokens"][0]["token"]
    with pytest.raises(C.CommitTokenError) as e:
        C.verify(token, public_key_bytes(b"\x09" * 32))
    assert e.value.code == "SIGNATURE_INVALID"
    with pytest.raises(C.CommitTokenError) as e:
        C.verify(token, StaticKeyResolver({}))
    assert e.value.code == "KEY_NOT_FOUND"
    with pytest.raises(C.CommitTokenError) as e:
        C.sign({**DATA["tokens"][0]["receipt"], "extra": "x"}, SEED)
    assert e.value.code == "INVALID_RECEIPT"
    with pytest.raises(C.CommitTokenError) as e:
        C.sign({**DATA["tokens"][0]["receipt"], "amountUsd": "0.1234567"}, SEED)
    assert e.value.code == "INVALID_RECEIPT"
    with pytest.raises(C.CommitTokenError) as e:
        C.verify(token + "x" * 9000, PUB)
    assert e.value.code == "MALFORMED_TOKEN"

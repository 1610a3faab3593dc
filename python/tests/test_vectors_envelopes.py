"""test/vectors/envelopes.json: each envelope validated for its recipient at its time with a fresh nonce store."""

from __future__ import annotations

import copy

import pytest

from agent_mesh.envelope import build_envelope, validate_envelope
from agent_mesh.nonce import NonceRegistry
from conftest import load_vector

VECTORS = load_vector("envelopes.json")["envelopes"]
SEEDS = {i["did"]: bytes.fromhex(i["seedHex"]) for i in load_vector("identities.json")["identities"]}


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
def test_envelope_vector(v: dict) -> None:
    registry = NonceRegistry(clock=lambda: v["nowMs"])
    result = validate_envelope(v["envelope"], v["senderPublicKeyB64"], v["recipient"], registry, now_ms=v["nowMs"])
    if v.get("validateTwice"):
        assert result == (True, None)
        result = validate_envelope(v["envelope"], v["senderPublicKeyB64"], v["recipient"], registry, now_ms=v["nowMs"])
    assert result == ((True, None) if v["expect"] is None else (False, v["expect"]))


def test_valid_vector_is_rebuilt_byte_for_byte() -> None:
    v = next(x for x in VECTORS if x["name"] == "valid request")["envelope"]
    from agent_mesh.timestamp import parse_utc_timestamp

    rebuilt = build_envelope(
        v["type"],
        v["from"],
        v["to"],
        copy.deepcopy(v["body"]),
        v["correlationId"],
        SEEDS[v["from"]],
        (parse_utc_timestamp(v["expiresAt"]) - parse_utc_timestamp(v["createdAt"])) / 1000,
        now_ms=parse_utc_timestamp(v["createdAt"]),
        envelope_id=v["id"],
        nonce=v["nonce"],
    )
    assert rebuilt == v
    assert list(rebuilt) == list(v)

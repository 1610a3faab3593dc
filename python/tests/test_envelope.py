"""Envelopes built and validated in Python: the validation order and every code of docs/protocol.md §5."""

from __future__ import annotations

import logging

import pytest

from agent_mesh import (
    EnvelopeError,
    InvalidDid,
    MalformedKey,
    NonceRegistry,
    build_envelope,
    generate_did,
    new_correlation_id,
    validate_envelope,
)
from agent_mesh.envelope import check_envelope
from agent_mesh.nonce import NonceRecordError
from agent_mesh.timestamp import parse_utc_timestamp

NOW = 1_767_268_800_000  # 2026-01-01T12:00:00Z
ALICE = generate_did("alice", namespace="acme")
BOB = generate_did("bob")


def env(**kw: object) -> dict:
    args = dict(
        type_="MeshRequest",
        from_did=ALICE["did"],
        to_did=BOB["did"],
        body={"capability": "echo", "params": {"x": 1}},
        correlation_id=None,
        private_key=ALICE["private_key"],
    )
    args.update(kw)
    return build_envelope(**args, now_ms=NOW)  # type: ignore[arg-type]


def check(e: dict, registry: NonceRegistry | None = None, now: int = NOW, key: object = None, **kw: object) -> tuple:
    return validate_envelope(
        e, ALICE["public_key_bytes"] if key is None else key, BOB["did"], registry or NonceRegistry(), now_ms=now, **kw
    )  # type: ignore[arg-type]


def test_built_envelope_shape() -> None:
    e = env(correlation_id="c-1")
    assert list(e) == ["type", "id", "from", "to", "correlationId", "nonce", "createdAt", "expiresAt", "body", "proof"]
    assert e["createdAt"] == "2026-01-01T12:00:00.000Z" and e["expiresAt"] == "2026-01-01T12:05:00.000Z"
    assert e["id"].startswith("urn:uuid:") and e["correlationId"] == "c-1"
    assert e["proof"]["created"] == e["createdAt"] and e["proof"]["verificationMethod"] == "did:mesh:acme.alice#key-1"
    assert len(e["nonce"]) == 22
    assert check(e) == (True, None)


def test_type_keyword_is_type_underscore() -> None:
    with pytest.raises(TypeError):
        build_envelope(
            type="MeshRequest",
            from_did=ALICE["did"],
            to_did=BOB["did"],
            body={},
            correlation_id=None,  # type: ignore[call-arg]
            private_key=ALICE["private_key"],
        )


def test_public_key_forms() -> None:
    e = env()
    assert check(e, key=ALICE["public_key_b64"]) == (True, None)
    assert check(e, key=ALICE["public_key"]) == (True, None)


def test_replay_and_fresh_nonces() -> None:
    reg = NonceRegistry()
    e = env()
    assert check(e, reg) == (True, None)
    assert check(e, reg) == (False, "REPLAYED")
    assert check(env(), reg) == (True, None)


def test_time_window_edges() -> None:
    e = env(ttl_seconds=60)
    exp = parse_utc_timestamp(e["expiresAt"])
    assert check(e, now=exp + 29_999) == (True, None)
    assert check(e, now=exp + 30_000) == (False, "EXPIRED")
    assert check(e, now=NOW - 30_000) == (True, None)
    assert check(e, now=NOW - 30_001) == (False, "NOT_YET_VALID")
    assert check(e, clock_tolerance_ms=0, now=exp) == (False, "EXPIRED")


def test_codes_in_order() -> None:
    e = env()
    assert check({**e, "extra": 1}) == (False, "MALFORMED")
    assert check({k: v for k, v in e.items() if k != "nonce"}) == (False, "MALFORMED")
    assert check({**e, "nonce": "short"}) == (False, "MALFORMED")
    assert check({**e, "from": "did:mesh:ACME.alice"}) == (False, "MALFORMED")  # DIDs on the wire are lower case
    assert check({**e, "proof": {**e["proof"], "created": "2026-01-01T12:00:01.000Z"}}) == (False, "MALFORMED")
    assert check({**e, "expiresAt": e["createdAt"]}) == (False, "MALFORMED")
    assert check({**e, "createdAt": "2026-02-30T00:00:00Z"}) == (False, "MALFORMED")
    assert check({**e, "body": []}) == (False, "MALFORMED")
    # wrong recipient before the time window: an expired envelope to someone else is WRONG_RECIPIENT
    assert validate_envelope(e, ALICE["public_key_bytes"], "did:mesh:carol", NonceRegistry(), now_ms=NOW + 10**9) == (
        False,
        "WRONG_RECIPIENT",
    )
    # time before signature: a tampered, expired envelope is EXPIRED
    assert check({**e, "body": {"capability": "x"}}, now=NOW + 10**9) == (False, "EXPIRED")
    assert check({**e, "body": {"capability": "x"}}) == (False, "SIGNATURE_INVALID")
    assert check(e, key=BOB["public_key_bytes"]) == (False, "SIGNATURE_INVALID")
    assert check(e, key=b"\x01" * 31) == (False, "SIGNATURE_INVALID")
    assert check(e, key="%%%") == (False, "SIGNATURE_INVALID")
    assert check(e, max_ttl_seconds=60) == (False, "TTL_TOO_LONG")


def test_recipient_is_compared_lower_case() -> None:
    assert validate_envelope(env(), ALICE["public_key_bytes"], "DID:MESH:BOB", NonceRegistry(), now_ms=NOW) == (
        True,
        None,
    )


def test_nonce_recorded_only_after_signature() -> None:
    reg = NonceRegistry()
    e = env()
    forged = {**e, "body": {"capability": "forged"}}
    assert check(forged, reg) == (False, "SIGNATURE_INVALID")
    assert check(e, reg) == (True, None)


def test_skip_signature_still_records_nonce(caplog: pytest.LogCaptureFixture) -> None:
    reg = NonceRegistry()
    forged = {**env(), "body": {"capability": "forged"}}
    with caplog.at_level(logging.WARNING):
        assert validate_envelope(forged, b"", BOB["did"], reg, True, now_ms=NOW) == (True, None)
    assert "NOT checked" in caplog.text
    assert validate_envelope(forged, b"", BOB["did"], reg, skip_signature=True, now_ms=NOW) == (False, "REPLAYED")


def test_nonce_store_full_and_quota() -> None:
    reg = NonceRegistry(capacity=2, per_sender_quota=2)
    assert check(env(), reg) == (True, None)
    assert check(env(), reg) == (True, None)
    assert check(env(), reg) == (False, "NONCE_QUOTA_EXCEEDED")
    reg = NonceRegistry(capacity=2, per_sender_quota=5)
    assert check(env(), reg) == (True, None)
    assert check(env(), reg) == (True, None)
    assert check(env(), reg) == (False, "NONCE_STORE_FULL")
    # once the held nonces expire they are swept and the store accepts again
    later = NOW + 10 * 60_000
    e = build_envelope("MeshRequest", ALICE["did"], BOB["did"], {}, None, ALICE["private_key"], now_ms=later)
    assert validate_envelope(e, ALICE["public_key_bytes"], BOB["did"], reg, now_ms=later) == (True, None)


def test_nonce_store_failure_fails_closed() -> None:
    class Broken(NonceRegistry):
        def record(self, *a: object, **k: object) -> None:
            raise OSError("database is down")

    assert check(env(), Broken()) == (False, "NONCE_STORE_UNAVAILABLE")


def test_registry_pair_recorded_again_after_retention() -> None:
    reg = NonceRegistry()
    reg.record("did:mesh:a", "n" * 16, 1000, now_ms=0)
    with pytest.raises(NonceRecordError) as e:
        reg.record("did:mesh:a", "n" * 16, 2000, now_ms=999)
    assert e.value.code == "REPLAYED"
    reg.record("did:mesh:a", "n" * 16, 3000, now_ms=1000)


def test_build_errors() -> None:
    with pytest.raises(EnvelopeError) as e:
        env(ttl_seconds=0)
    assert e.value.code == "TTL_TOO_LONG"
    with pytest.raises(EnvelopeError) as e:
        env(ttl_seconds=86_401)
    assert e.value.code == "TTL_TOO_LONG"
    assert env(ttl_seconds=86_400)["expiresAt"] == "2026-01-02T12:00:00.000Z"
    with pytest.raises(EnvelopeError) as e:
        env(type_="")
    assert e.value.code == "MALFORMED"
    with pytest.raises(EnvelopeError) as e:
        env(body={"x": float("nan")})
    assert e.value.code == "MALFORMED"
    with pytest.raises(InvalidDid):
        env(to_did="bob")
    with pytest.raises(MalformedKey):
        env(private_key=b"short")


def test_check_envelope_raises_with_code() -> None:
    with pytest.raises(EnvelopeError) as e:
        check_envelope(env(), ALICE["public_key_bytes"], "did:mesh:carol", NonceRegistry(), now_ms=NOW)
    assert e.value.code == "WRONG_RECIPIENT"


def test_correlation_id_is_a_uuid() -> None:
    import uuid

    assert uuid.UUID(new_correlation_id()).version == 4

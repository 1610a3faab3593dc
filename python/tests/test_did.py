"""DIDs, DID documents, didHash and identity files (docs/protocol.md §3, §8)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from agent_mesh import (
    IdentityFileError,
    InvalidDid,
    KeyRevoked,
    MalformedDidDocument,
    MalformedKey,
    did_hash,
    extract_public_key,
    generate_did,
    load_identity_file,
    save_identity_file,
)
from agent_mesh.did import normalize_did
from agent_mesh.keys import b64encode, import_public_key, public_key_multibase


def test_generate_did_identity_dict() -> None:
    ident = generate_did("Alice", "https://alice.example/agent", "acme")
    assert ident["did"] == "did:mesh:acme.alice"
    assert isinstance(ident["private_key"], Ed25519PrivateKey)
    assert isinstance(ident["public_key"], Ed25519PublicKey)
    assert len(ident["public_key_bytes"]) == 32
    doc = ident["document"]
    assert doc["id"] == "did:mesh:acme.alice"
    assert doc["verificationMethod"][0]["publicKeyMultibase"].startswith("z6Mk")
    assert doc["service"] == [
        {"id": "did:mesh:acme.alice#mesh", "type": "MeshAgent", "serviceEndpoint": "https://alice.example/agent"}
    ]
    assert "service" not in generate_did("bob")["document"]
    assert extract_public_key(doc) == ident["public_key_bytes"]
    assert generate_did("bob")["public_key_bytes"] != generate_did("bob")["public_key_bytes"]
    with pytest.raises(InvalidDid) as e:
        generate_did("bad name")
    assert e.value.code == "INVALID_DID"


def test_did_hash() -> None:
    assert did_hash("did:mesh:alice") == "y7mftsv4pls3arzqmbjjuhz7"
    assert did_hash("DID:MESH:ALICE") == "y7mftsv4pls3arzqmbjjuhz7"
    with pytest.raises(InvalidDid):
        did_hash("alice")


@pytest.mark.parametrize(
    "did",
    [
        "did:mesh:a",
        "did:mesh:-a",
        "did:mesh:a\n",
        "did:mesh:\u017fa",
        "did:mesh:a b",
        "did:key:z6Mk",
        "did:mesh:" + "a" * 248,
    ],
)
def test_not_dids(did: str) -> None:
    assert normalize_did(did) is None


def test_extract_public_key_failures() -> None:
    ident = generate_did("alice")
    doc = ident["document"]
    vm = doc["verificationMethod"][0]
    with pytest.raises(ValueError) as e:
        extract_public_key({**doc, "verificationMethod": [{**vm, "revoked": "2026-01-01T00:00:00Z"}]})
    assert isinstance(e.value, KeyRevoked) and e.value.code == "KEY_REVOKED"
    with pytest.raises(MalformedDidDocument):
        extract_public_key({**doc, "verificationMethod": [{**vm, "type": "Ed25519VerificationKey2020"}]})
    with pytest.raises(MalformedDidDocument):
        extract_public_key({**doc, "verificationMethod": [{**vm, "id": "did:mesh:alice#key-2"}]})
    assert (
        extract_public_key(
            {**doc, "verificationMethod": [{**vm, "id": "did:mesh:alice#key-2"}]}, "did:mesh:alice#key-2"
        )
        == ident["public_key_bytes"]
    )
    with pytest.raises(MalformedDidDocument):
        extract_public_key({**doc, "verificationMethod": [{**vm, "publicKeyMultibase": "zabc"}]})
    with pytest.raises(MalformedDidDocument):
        extract_public_key({"id": "did:mesh:alice"})
    small_order = bytes.fromhex("0100000000000000000000000000000000000000000000000000000000000000")
    with pytest.raises(MalformedKey) as e2:
        extract_public_key(
            {**doc, "verificationMethod": [{**vm, "publicKeyMultibase": public_key_multibase(small_order)}]}
        )
    assert e2.value.code == "INVALID_PUBLIC_KEY"


def test_import_public_key_refusals() -> None:
    for bad in (b"\x01" + b"\x00" * 31, b"\x00" * 31, "not a key", b64encode(b"\xff" * 31 + b"\x7f")):
        with pytest.raises(MalformedKey) as e:
            import_public_key(bad)
        assert e.value.code == "INVALID_PUBLIC_KEY"


def test_identity_file_round_trip(tmp_path: Path) -> None:
    ident = generate_did("alice", "http://127.0.0.1:7000", "acme")
    path = save_identity_file(ident, tmp_path / "alice.identity.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    content = json.loads(Path(path).read_text())
    assert list(content) == ["did", "didHash", "publicKeyB64", "privateKeyPkcs8B64", "didKey", "document"]
    assert Path(path).read_text().endswith("}\n")
    loaded = load_identity_file(path)
    assert loaded["did"] == ident["did"] and loaded["public_key_bytes"] == ident["public_key_bytes"]
    assert loaded["document"] == ident["document"]


def test_identity_file_is_created_exclusively(tmp_path: Path) -> None:
    ident = generate_did("alice")
    target = tmp_path / "id.json"
    target.write_text("keep")
    with pytest.raises(IdentityFileError) as e:
        save_identity_file(ident, target)
    assert e.value.code == "FILE_EXISTS"
    assert target.read_text() == "keep"
    dangling = tmp_path / "link.json"
    os.symlink(tmp_path / "nowhere", dangling)
    with pytest.raises(IdentityFileError) as e:
        save_identity_file(ident, dangling)
    assert e.value.code == "FILE_EXISTS"
    assert not (tmp_path / "nowhere").exists()
    # force replaces the link itself, never writing through it
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    link = tmp_path / "link2.json"
    os.symlink(victim, link)
    save_identity_file(ident, link, force=True)
    assert victim.read_text() == "untouched"
    assert not link.is_symlink() and load_identity_file(link)["did"] == ident["did"]


def test_identity_file_refusals(tmp_path: Path) -> None:
    ident = generate_did("alice")
    good = json.loads(Path(save_identity_file(ident, tmp_path / "a.json")).read_text())
    other = generate_did("alice")

    def load(content: object, raw: str | None = None) -> IdentityFileError | MalformedKey:
        p = tmp_path / "x.json"
        p.write_text(raw if raw is not None else json.dumps(content))
        with pytest.raises((IdentityFileError, MalformedKey)) as e:
            load_identity_file(p)
        return e.value

    assert load(None, raw='{"did":"did:mesh:alice","did":"did:mesh:bob"}').code == "IDENTITY_INVALID"
    assert load({k: v for k, v in good.items() if k != "didKey"}).code == "IDENTITY_INVALID"
    assert load({**good, "publicKeyB64": other["public_key_b64"]}).code == "IDENTITY_INVALID"
    assert load({**good, "document": other["document"]}).code == "IDENTITY_INVALID"
    assert load({**good, "did": "did:mesh:ALICE"}).code == "IDENTITY_INVALID"
    assert load({**good, "publicKeyB64": b64encode(b"\x01" + b"\x00" * 31)}).code == "INVALID_PUBLIC_KEY"

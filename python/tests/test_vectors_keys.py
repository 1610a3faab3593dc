"""test/vectors: rfc8032-ed25519, ed25519-speccheck, openssl-pkcs8, w3c-eddsa-jcs-2022, identities."""

from __future__ import annotations

import json

import pytest

from agent_mesh import base58, keys
from agent_mesh.did import extract_public_key, identity_from_key, make_did_document
from agent_mesh.proof import ProofInvalid, sign_message, verify_message
from conftest import load_vector

RFC8032 = load_vector("rfc8032-ed25519.json")["vectors"]
SPECCHECK = load_vector("ed25519-speccheck.json")
IDENTITIES = load_vector("identities.json")
# docs/protocol.md §2: cases 0–1 fail (small-order A), 2–3 pass, 4–5 fail (cofactored only), 6–7 fail (S ≥ L),
# 8–9 fail (non-canonical R).
SPECCHECK_VERDICTS = [False, False, True, True, False, False, False, False, False, False]


@pytest.mark.parametrize("v", RFC8032, ids=[v["name"] for v in RFC8032])
def test_rfc8032(v: dict) -> None:
    key = keys.load_private_key(bytes.fromhex(v["secretKey"]))
    assert keys.public_key_bytes(key).hex() == v["publicKey"]
    sig = keys.sign(key, bytes.fromhex(v["message"]))
    assert sig.hex() == v["signature"]
    assert keys.verify(bytes.fromhex(v["publicKey"]), bytes.fromhex(v["message"]), sig)
    assert not keys.verify(bytes.fromhex(v["publicKey"]), bytes.fromhex(v["message"]) + b"x", sig)


@pytest.mark.parametrize("i", range(len(SPECCHECK)))
def test_speccheck(i: int) -> None:
    c = SPECCHECK[i]
    got = keys.verify(bytes.fromhex(c["pub_key"]), bytes.fromhex(c["message"]), bytes.fromhex(c["signature"]))
    assert got is SPECCHECK_VERDICTS[i]


def test_public_key_not_32_bytes_is_malformed_key() -> None:
    with pytest.raises(keys.MalformedKey) as e:
        keys.verify(b"\x01" * 31, b"m", b"\x00" * 64)
    assert e.value.code == "MALFORMED_KEY"


def test_openssl_pkcs8() -> None:
    v = load_vector("openssl-pkcs8.json")
    key = keys.load_private_key(v["pkcs8DerB64"])
    assert keys.private_key_seed(key).hex() == v["seedHex"]
    assert keys.public_key_bytes(key).hex() == v["publicKeyHex"]
    # the same key from the raw DER bytes and from the seed
    assert keys.public_key_bytes(keys.b64decode(v["pkcs8DerB64"])).hex() == v["publicKeyHex"]
    assert keys.public_key_bytes(bytes.fromhex(v["seedHex"])).hex() == v["publicKeyHex"]


def test_pkcs8_v2_with_matching_and_mismatching_public_key() -> None:
    seed = bytes(range(32))
    pub = keys.public_key_bytes(seed)
    v2 = keys.PKCS8_V2_PREFIX + seed + b"\x81\x21\x00" + pub
    assert keys.public_key_bytes(v2) == pub
    other = keys.public_key_bytes(bytes(32))
    with pytest.raises(keys.MalformedKey) as e:
        keys.load_private_key(keys.PKCS8_V2_PREFIX + seed + b"\x81\x21\x00" + other)
    assert e.value.code == "MALFORMED_KEY"
    for bad in (b"\x00" * 31, b"\x00" * 33, "not base64!", keys.PKCS8_PREFIX + seed[:31]):
        with pytest.raises(keys.MalformedKey):
            keys.load_private_key(bad)


@pytest.mark.parametrize("ident", IDENTITIES["identities"], ids=[i["name"] for i in IDENTITIES["identities"]])
def test_identity(ident: dict) -> None:
    seed = bytes.fromhex(ident["seedHex"])
    assert keys.private_key_to_pkcs8(seed).hex() == ident["pkcs8Hex"]
    assert keys.public_key_bytes(bytes.fromhex(ident["pkcs8Hex"])).hex() == ident["publicKeyHex"]
    got = identity_from_key(ident["did"], seed, ident["baseAddress"])
    assert got["did"] == ident["did"]
    assert got["public_key_bytes"].hex() == ident["publicKeyHex"]
    assert got["public_key_b64"] == ident["publicKeyB64"]
    assert keys.public_key_multibase(got["public_key_bytes"]) == ident["publicKeyMultibase"]
    assert got["did_key"] == ident["didKey"]
    assert got["did_hash"] == ident["didHash"]
    # byte-exact: the document serializes as the vector's does
    assert json.dumps(got["document"]) == json.dumps(ident["document"])
    assert make_did_document(ident["did"], got["public_key_bytes"], ident["baseAddress"]) == ident["document"]
    assert extract_public_key(ident["document"]).hex() == ident["publicKeyHex"]
    assert keys.public_key_of_did_key(ident["didKey"]).hex() == ident["publicKeyHex"]
    assert keys.import_public_key(ident["publicKeyB64"]).hex() == ident["publicKeyHex"]
    assert keys.import_public_key(ident["publicKeyB64"].rstrip("=")).hex() == ident["publicKeyHex"]


@pytest.mark.parametrize("i", range(len(IDENTITIES["proofs"])))
def test_identity_proofs(i: int) -> None:
    p = IDENTITIES["proofs"][i]
    signer = next(x for x in IDENTITIES["identities"] if x["name"] == p["signer"])
    proof = p["signed"]["proof"]
    signed = sign_message(
        p["message"], bytes.fromhex(signer["seedHex"]), proof["verificationMethod"], created=proof["created"]
    )
    assert json.dumps(signed, sort_keys=True) == json.dumps(p["signed"], sort_keys=True)
    assert signed["proof"]["proofValue"] == proof["proofValue"]
    pub = bytes.fromhex(signer["publicKeyHex"])
    assert verify_message(p["signed"], pub, verification_method=proof["verificationMethod"]) == p["signed"]
    tampered = {**p["signed"], "extra": 1}
    with pytest.raises(ProofInvalid) as e:
        verify_message(tampered, pub)
    assert e.value.code == "SIGNATURE_INVALID"
    with pytest.raises(ProofInvalid) as e:
        verify_message(p["signed"], pub, verification_method="did:mesh:other#key-1")
    assert e.value.code == "VERIFICATION_METHOD_MISMATCH"
    unsigned_member = {**p["signed"], "proof": {**proof, "domain": "example.com"}}
    with pytest.raises(ProofInvalid) as e:
        verify_message(unsigned_member, pub)
    assert e.value.code == "SIGNATURE_INVALID"


def test_w3c_eddsa_jcs_2022() -> None:
    v = load_vector("w3c-eddsa-jcs-2022.json")
    pub_mb = base58.decode_multibase(v["keyPair"]["publicKeyMultibase"])
    assert pub_mb[:2] == b"\xed\x01"
    pub = pub_mb[2:]
    assert verify_message(v["signed"], pub) == v["signed"]
    # re-signing with the W3C secret key reproduces the proof value (Ed25519 is deterministic)
    secret = base58.decode_multibase(v["keyPair"]["privateKeyMultibase"])
    seed = secret[-32:]
    assert keys.public_key_bytes(seed) == pub
    proof = v["signed"]["proof"]
    resigned = sign_message(
        {k: x for k, x in v["signed"].items() if k != "proof"},
        seed,
        proof["verificationMethod"],
        created=proof["created"],
    )
    assert resigned["proof"]["proofValue"] == proof["proofValue"]
    bad_context = {**v["signed"], "proof": {**proof, "@context": ["https://example.org/other"]}}
    with pytest.raises(ProofInvalid) as e:
        verify_message(bad_context, pub)
    assert e.value.code == "MALFORMED_PROOF"

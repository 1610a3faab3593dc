"""mesh-sig (docs/protocol.md §10) against test/vectors/mesh-sig.json and rfc9421-b26.json, and the verifier's codes."""

import asyncio
import base64
import json
from pathlib import Path

import pytest

from agent_mesh import http_signature as hs
from agent_mesh import keys

VECTORS = Path(__file__).resolve().parents[2] / "test" / "vectors"
MESH_SIG = json.loads((VECTORS / "mesh-sig.json").read_text())
B26 = json.loads((VECTORS / "rfc9421-b26.json").read_text())
SEED = bytes.fromhex(MESH_SIG["seedHex"])
PUB = base64.b64decode(MESH_SIG["publicKeyB64"])
NOW_S = MESH_SIG["time"] // 1000
REQ = MESH_SIG["request"]
BODY = REQ["body"].encode()


def signed(**overrides):
    args = dict(nonce=MESH_SIG["nonce"], now=NOW_S)
    args.update(overrides)
    return hs.sign_request(REQ["method"], REQ["url"], BODY, SEED, MESH_SIG["keyId"], **args)


def check(headers, *, body=BODY, url=REQ["url"], method=REQ["method"], resolve=None, now_ms=None, **kw):
    def default_resolve(did):
        assert did == "did:mesh:acme.alice"
        return PUB

    return asyncio.run(
        hs.check_request(method, url, headers, body, resolve or default_resolve, now_ms=MESH_SIG["time"] if now_ms is None else now_ms, **kw)
    )


def code_of(headers, **kw):
    with pytest.raises(hs.HttpSignatureError) as e:
        check(headers, **kw)
    return e.value.code


def test_signer_reproduces_the_vector_headers_byte_for_byte():
    assert signed() == MESH_SIG["headers"]


def test_signature_base_of_the_vector():
    inner = hs.parse_dictionary(MESH_SIG["headers"]["signature-input"])["sig1"]
    base = hs.signature_base(REQ["method"], REQ["url"], MESH_SIG["headers"], inner)
    assert base == MESH_SIG["signatureBase"]


def test_the_vector_verifies():
    checked = check(MESH_SIG["headers"])
    assert (checked.did, checked.nonce, checked.created) == ("did:mesh:acme.alice", MESH_SIG["nonce"], NOW_S)


def test_rfc9421_b26_base_and_signature():
    r = B26["request"]
    dictionary = hs.parse_dictionary(B26["signatureInput"])
    inner = dictionary[B26["label"]]
    assert hs.serialize_dictionary(dictionary) == B26["signatureInput"]
    base = hs.signature_base(r["method"], r["url"], r["headers"], inner)
    assert base == B26["signatureBase"]
    sig = hs.parse_dictionary(B26["signature"])[B26["label"]].value
    pub = base64.b64decode(B26["publicKeyB64"])
    assert keys.verify(pub, base.encode(), sig)
    assert not keys.verify(pub, base.encode() + b" ", sig)
    # Ed25519 is deterministic: the key of Appendix B.1.4 makes the same signature.
    key = keys.load_private_key(B26["privateKeyPkcs8B64"])
    assert key.sign(base.encode()) == sig
    assert hs.content_digest(r["body"].encode()) == B26["contentDigestSha256"]


def test_target_uri_is_normalized_as_fetch_sends_it():
    assert hs.normalize_url("HTTPS://Agent.Example:443") == "https://agent.example/"
    assert hs.normalize_url("http://127.0.0.1:8080/v1/run?x=1") == "http://127.0.0.1:8080/v1/run?x=1"


@pytest.mark.parametrize(
    "mutate,code",
    [
        (lambda h: {k: v for k, v in h.items() if k != "signature"}, "SIGNATURE_MISSING"),
        (lambda h: {**h, "signature-input": h["signature-input"].replace('tag="mesh-sig"', 'tag="other"')}, "SIGNATURE_MISSING"),
        (lambda h: {**h, "signature-input": "sig1=(((("}, "SIGNATURE_MALFORMED"),
        (lambda h: {**h, "signature": "sig2=:AAAA:"}, "SIGNATURE_MALFORMED"),
        (lambda h: {**h, "signature-input": h["signature-input"].replace(' "content-digest"', "")}, "SIGNATURE_MALFORMED"),
        (lambda h: {**h, "signature-input": h["signature-input"].replace('"@method"', '"@method";req')}, "SIGNATURE_MALFORMED"),
        (lambda h: {**h, "signature-input": h["signature-input"].replace('alg="ed25519"', 'alg="rsa"')}, "SIGNATURE_MALFORMED"),
        (lambda h: {**h, "signature-input": h["signature-input"].replace("#key-1", "#key-2")}, "SIGNATURE_MALFORMED"),
        (lambda h: {**h, "content-digest": hs.content_digest(b"other")}, "DIGEST_MISMATCH"),
        (lambda h: {k: v for k, v in h.items() if k != "content-digest"}, "DIGEST_MISMATCH"),
    ],
)
def test_refusals(mutate, code):
    assert code_of(mutate(dict(MESH_SIG["headers"]))) == code


def test_another_url_method_or_key_is_signature_invalid():
    h = MESH_SIG["headers"]
    assert code_of(h, url="https://other.example/v1/run") == "SIGNATURE_INVALID"
    assert code_of(h, method="PUT") == "SIGNATURE_INVALID"
    other = keys.public_key_bytes(bytes(32))
    assert code_of(h, resolve=lambda did: other) == "SIGNATURE_INVALID"


def test_time_window():
    h = MESH_SIG["headers"]
    assert code_of(h, now_ms=MESH_SIG["time"] - 31_000) == "SIGNATURE_NOT_YET_VALID"
    check(h, now_ms=MESH_SIG["time"] - 29_000)
    assert code_of(h, now_ms=MESH_SIG["time"] + 90_000) == "SIGNATURE_EXPIRED"
    check(h, now_ms=MESH_SIG["time"] + 89_000)
    # maxAge caps a long lifetime
    long = signed(ttl_seconds=3600)
    assert code_of(long, now_ms=MESH_SIG["time"] + 331_000) == "SIGNATURE_EXPIRED"


def test_resolver_answers():
    def unknown(did):
        raise hs.KeyNotFound(did)

    def down(did):
        raise hs.ResolverUnavailable("down")

    assert code_of(MESH_SIG["headers"], resolve=unknown) == "KEY_NOT_FOUND"
    assert code_of(MESH_SIG["headers"], resolve=down) == "RESOLVER_UNAVAILABLE"


def test_allow_list_is_asked_before_the_key():
    asked = []

    def resolve(did):
        asked.append(did)
        return PUB

    with pytest.raises(hs.CallerNotAllowed):
        check(MESH_SIG["headers"], resolve=resolve, is_allowed=lambda did: False)
    assert asked == []


def test_nonce_store_replay_and_quota():
    store = hs.SignatureNonceStore(capacity=10, per_sender_quota=2)
    checked = check(MESH_SIG["headers"])
    now = MESH_SIG["time"]
    hs.record_nonce(checked, store, now)
    with pytest.raises(hs.HttpSignatureError) as e:
        hs.record_nonce(checked, store, now)
    assert e.value.code == "REPLAYED"
    store.record("did:mesh:acme.alice", "n2", now + 60_000, now)
    with pytest.raises(hs.HttpSignatureError) as e:
        store.record("did:mesh:acme.alice", "n3", now + 60_000, now)
    assert e.value.code == "NONCE_QUOTA_EXCEEDED" and e.value.status == 429 and e.value.retry_after_seconds >= 1
    store.record("did:mesh:bob", "n3", now + 60_000, now)


def test_other_signatures_on_the_request_are_ignored():
    h = dict(MESH_SIG["headers"])
    h["signature-input"] = 'other=("@method");created=1;keyid="x", ' + h["signature-input"]
    h["signature"] = "other=:AAAA:, " + h["signature"]
    assert check(h).did == "did:mesh:acme.alice"

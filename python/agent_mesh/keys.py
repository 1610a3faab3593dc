"""Ed25519 keys (docs/protocol.md §2): import from a raw 32-byte seed or PKCS#8 (v1 or v2, bytes or base64), the
public forms (``publicKeyB64``, SPKI, multibase ``z6Mk…``, ``did:key``), signing, and the strict verification rule.

Private keys are ``cryptography``'s ``Ed25519PrivateKey``; public keys travel as raw 32 bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Union

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from . import base58

__all__ = [
    "MalformedKey",
    "PrivateKeyInput",
    "PublicKeyInput",
    "L",
    "generate_private_key",
    "load_private_key",
    "private_key_seed",
    "private_key_to_pkcs8",
    "public_key_bytes",
    "public_key_b64",
    "import_public_key",
    "is_acceptable_public_key",
    "public_key_multibase",
    "decode_public_key_multibase",
    "did_key",
    "public_key_of_did_key",
    "sign",
    "verify",
    "sha256",
    "b64encode",
    "b64decode",
    "b64url_encode",
    "b64url_decode",
]


class MalformedKey(ValueError):
    """A key that could not be read (``MALFORMED_KEY``) or a public key refused at the door (``INVALID_PUBLIC_KEY``)."""

    def __init__(self, message: str, code: str = "MALFORMED_KEY") -> None:
        super().__init__(message)
        self.code = code


PrivateKeyInput = Union[Ed25519PrivateKey, bytes, bytearray, str]
PublicKeyInput = Union[Ed25519PublicKey, bytes, bytearray, str]

# RFC 8410 DER prefixes.
PKCS8_PREFIX = bytes.fromhex("302e020100300506032b657004220420")
PKCS8_V2_PREFIX = bytes.fromhex("3051020101300506032b657004220420")
SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")
# multicodec ed25519-pub as a varint.
ED25519_PUB_PREFIX = bytes([0xED, 0x01])

L = 2**252 + 27742317777372353535851937790883648493

_SMALL_ORDER = {
    bytes.fromhex(h)
    for h in (
        "0100000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000080",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000000000000000000080",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
    )
}
_P = 2**255 - 19

_B64_RE = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_B64URL_RE = re.compile(r"[A-Za-z0-9_-]*")


def b64encode(data: bytes) -> str:
    """Standard base64 with padding (RFC 4648 §4)."""
    return base64.b64encode(bytes(data)).decode("ascii")


def b64decode(s: str) -> bytes:
    """Standard base64, padding optional; raises ``ValueError`` on anything else."""
    s = s.strip()
    if not _B64_RE.fullmatch(s):
        raise ValueError("not base64")
    core = s.rstrip("=")
    if len(core) % 4 == 1:
        raise ValueError("not base64")
    try:
        return base64.b64decode(core + "=" * (-len(core) % 4), validate=True)
    except binascii.Error as e:
        raise ValueError("not base64") from e


def b64url_encode(data: bytes) -> str:
    """base64url without padding (RFC 4648 §5)."""
    return base64.urlsafe_b64encode(bytes(data)).rstrip(b"=").decode("ascii")


def b64url_decode(s: str, canonical: bool = False) -> bytes:
    """base64url without padding; with ``canonical`` the text must be exactly what ``b64url_encode`` writes."""
    if not isinstance(s, str) or not _B64URL_RE.fullmatch(s) or len(s) % 4 == 1:
        raise ValueError("not unpadded base64url")
    out = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    if canonical and b64url_encode(out) != s:
        raise ValueError("not canonical base64url")
    return out


def sha256(data: bytes) -> bytes:
    """SHA-256."""
    return hashlib.sha256(data).digest()


def generate_private_key() -> Ed25519PrivateKey:
    """A fresh key from the platform CSPRNG."""
    return Ed25519PrivateKey.generate()


def _parse_private_bytes(b: bytes) -> tuple[bytes, bytes | None] | None:
    if len(b) == 32:
        return b, None
    if len(b) == 48 and b.startswith(PKCS8_PREFIX):
        return b[16:], None
    # v2 with the public key as [1] IMPLICIT BIT STRING: 16 + 32 + 2 + 1 + 32 = 83 bytes.
    if len(b) == 83 and b.startswith(PKCS8_V2_PREFIX) and b[48:50] == b"\x81\x21" and b[50] == 0:
        return b[16:48], b[51:]
    return None


def load_private_key(key: PrivateKeyInput) -> Ed25519PrivateKey:
    """An ``Ed25519PrivateKey`` from a key object, a raw 32-byte seed, a PKCS#8 DER blob (v1 or v2), or base64 of
    either; ``MalformedKey`` (``MALFORMED_KEY``) for anything else or a v2 blob whose public key does not match."""
    if isinstance(key, Ed25519PrivateKey):
        return key
    if isinstance(key, str):
        try:
            raw = b64decode(key)
        except ValueError as e:
            raise MalformedKey("private key string is not base64") from e
    elif isinstance(key, (bytes, bytearray, memoryview)):
        raw = bytes(key)
    else:
        raise MalformedKey(f"unsupported private key input: {type(key).__name__}")
    parsed = _parse_private_bytes(raw)
    if parsed is None:
        raise MalformedKey(f"not an Ed25519 seed or PKCS#8 key ({len(raw)} bytes)")
    seed, embedded = parsed
    pk = Ed25519PrivateKey.from_private_bytes(seed)
    if embedded is not None and embedded != public_key_bytes(pk):
        raise MalformedKey("PKCS#8 public key does not match its private key")
    return pk


def private_key_seed(key: PrivateKeyInput) -> bytes:
    """The RFC 8032 32-byte seed of a key."""
    return load_private_key(key).private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )


def private_key_to_pkcs8(key: PrivateKeyInput) -> bytes:
    """The PKCS#8 v1 DER encoding (RFC 8410), 48 bytes, as the TypeScript side writes it."""
    return PKCS8_PREFIX + private_key_seed(key)


def public_key_bytes(key: PrivateKeyInput | Ed25519PublicKey) -> bytes:
    """The raw 32-byte public key of a private key (any accepted form) or of an ``Ed25519PublicKey``."""
    if isinstance(key, Ed25519PublicKey):
        pub = key
    else:
        pub = load_private_key(key).public_key()
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_key_b64(key: PrivateKeyInput | Ed25519PublicKey) -> str:
    """``publicKeyB64``: standard base64 of the raw public key."""
    return b64encode(public_key_bytes(key))


def _non_canonical_y(enc: bytes) -> bool:
    return int.from_bytes(enc, "little") & ((1 << 255) - 1) >= _P


def is_acceptable_public_key(pub: bytes) -> bool:
    """True for a key accepted where keys enter from outside: 32 bytes, canonical, not of small order."""
    return len(pub) == 32 and not _non_canonical_y(pub) and bytes(pub) not in _SMALL_ORDER


def import_public_key(key: PublicKeyInput) -> bytes:
    """The raw bytes of a public key given as raw 32 bytes, ``publicKeyB64`` (padding optional), SPKI DER (bytes or
    base64) or an ``Ed25519PublicKey``; ``MalformedKey`` with code ``INVALID_PUBLIC_KEY`` unless acceptable (§2)."""
    raw: bytes | None = None
    if isinstance(key, Ed25519PublicKey):
        raw = public_key_bytes(key)
    elif isinstance(key, str):
        s = key.strip()
        if re.fullmatch(r"[A-Za-z0-9+/]{43}=?", s):
            b = b64decode(s)
            # the unused low bits must be zero: keys are compared as bytes, never as text
            if len(b) == 32 and b64encode(b)[:43] == s[:43]:
                raw = b
        elif len(s) == 60:
            try:
                b = b64decode(s)
            except ValueError:
                b = b""
            if len(b) == 44 and b.startswith(SPKI_PREFIX):
                raw = b[12:]
    elif isinstance(key, (bytes, bytearray, memoryview)):
        b = bytes(key)
        if len(b) == 44:
            raw = b[12:] if b.startswith(SPKI_PREFIX) else None
        else:
            raw = b
    if raw is None or len(raw) != 32:
        raise MalformedKey("public key must be 32 raw bytes, publicKeyB64 or an Ed25519 SPKI", "INVALID_PUBLIC_KEY")
    if not is_acceptable_public_key(raw):
        raise MalformedKey("public key is a small-order point or not canonically encoded", "INVALID_PUBLIC_KEY")
    return raw


def public_key_multibase(public_key: bytes) -> str:
    """multicodec ed25519-pub (``ed 01``) + key, multibase base58btc: ``z6Mk…``."""
    return base58.encode_multibase(ED25519_PUB_PREFIX + bytes(public_key))


def decode_public_key_multibase(value: str) -> bytes | None:
    """The raw key inside a ``z6Mk…`` value, or None when it is not an Ed25519 Multikey."""
    try:
        b = base58.decode_multibase(value)
    except ValueError:
        return None
    return b[2:] if len(b) == 34 and b[:2] == ED25519_PUB_PREFIX else None


def did_key(public_key: bytes) -> str:
    """The ``did:key`` form of a public key (``did:key:z6Mk…``)."""
    return "did:key:" + public_key_multibase(public_key)


def public_key_of_did_key(did: str) -> bytes:
    """The public key of an Ed25519 ``did:key``; ``MalformedKey`` (``INVALID_PUBLIC_KEY``) for anything else."""
    key = decode_public_key_multibase(did[8:]) if isinstance(did, str) and did.startswith("did:key:") else None
    if key is None:
        raise MalformedKey("not an Ed25519 did:key", "INVALID_PUBLIC_KEY")
    if not is_acceptable_public_key(key):
        raise MalformedKey("public key is a small-order point or not canonically encoded", "INVALID_PUBLIC_KEY")
    return key


def sign(private_key: PrivateKeyInput, message: bytes) -> bytes:
    """The 64-byte RFC 8032 signature of a message."""
    return load_private_key(private_key).sign(bytes(message))


def _raw_public(public_key: PublicKeyInput) -> bytes:
    if isinstance(public_key, Ed25519PublicKey):
        return public_key_bytes(public_key)
    if isinstance(public_key, str):
        try:
            return b64decode(public_key)
        except ValueError as e:
            raise MalformedKey("public key string is not base64") from e
    return bytes(public_key)


def verify(public_key: PublicKeyInput, message: bytes, signature: bytes) -> bool:
    """Verifies under the strict rule of docs/protocol.md §2 (S < L, canonical key, no small-order key,
    cofactorless equation); False for any bad signature, ``MalformedKey`` for a public key that is not 32 bytes."""
    pub = _raw_public(public_key)
    if len(pub) != 32:
        raise MalformedKey(f"public key must be 32 bytes, got {len(pub)}")
    sig = bytes(signature)
    if len(sig) != 64:
        return False
    if int.from_bytes(sig[32:], "little") >= L:
        return False
    if _non_canonical_y(pub) or pub in _SMALL_ORDER:
        return False
    try:
        key = Ed25519PublicKey.from_public_bytes(pub)
        # OpenSSL: cofactorless equation, R compared as bytes.
        key.verify(sig, bytes(message))
        return True
    except (InvalidSignature, ValueError):
        return False

"""base58btc (the Bitcoin alphabet) and its multibase form ``z…`` (docs/protocol.md §1)."""

from __future__ import annotations

__all__ = ["ALPHABET", "encode", "decode", "encode_multibase", "decode_multibase"]

ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_INDEX = {c: i for i, c in enumerate(ALPHABET)}


def encode(data: bytes) -> str:
    """base58btc of bytes, without the multibase prefix; each leading zero byte becomes a ``1``."""
    data = bytes(data)
    zeros = len(data) - len(data.lstrip(b"\0"))
    n = int.from_bytes(data, "big")
    digits: list[str] = []
    while n:
        n, r = divmod(n, 58)
        digits.append(ALPHABET[r])
    return "1" * zeros + "".join(reversed(digits))


def decode(s: str) -> bytes:
    """Bytes of a base58btc string (no prefix); raises ``ValueError`` on a character outside the alphabet."""
    zeros = len(s) - len(s.lstrip("1"))
    n = 0
    for i, c in enumerate(s):
        d = _INDEX.get(c)
        if d is None:
            raise ValueError(f"invalid base58 character at {i}")
        n = n * 58 + d
    body = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    return b"\0" * zeros + body


def encode_multibase(data: bytes) -> str:
    """Multibase base58btc: ``z`` followed by the base58btc text."""
    return "z" + encode(data)


def decode_multibase(s: str) -> bytes:
    """Bytes of a multibase base58btc string; raises ``ValueError`` unless it starts with ``z``."""
    if not isinstance(s, str) or not s.startswith("z"):
        raise ValueError("not multibase base58btc (no 'z' prefix)")
    return decode(s[1:])

"""RFC 8785 JSON Canonicalization Scheme (JCS) and strict I-JSON parsing (docs/protocol.md §1).

JCS is what gets signed everywhere in the mesh, so it must be byte-exact with the TypeScript side: numbers are
written as ECMAScript's ``Number.prototype.toString`` writes them, member names are sorted by UTF-16 code units,
and strings escape only what RFC 8785 §3.2.2.2 says.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = [
    "NotCanonicalizable",
    "StrictJsonError",
    "canonicalize",
    "canonical_bytes",
    "stringify",
    "format_number",
    "parse_json_strict",
]


class NotCanonicalizable(ValueError):
    """A value with no JCS form: NaN, ±Infinity, a lone surrogate, a non-string key, or a non-JSON type."""

    code = "NOT_CANONICALIZABLE"


class StrictJsonError(ValueError):
    """A JSON text refused as I-JSON; ``reason`` is ``syntax``, ``duplicate``, ``proto`` or ``depth``."""

    def __init__(self, reason: str, member: str | None = None, message: str | None = None) -> None:
        self.reason = reason
        self.member = member
        if message is None:
            message = {
                "syntax": "not valid JSON",
                "duplicate": f"duplicate member name {json.dumps(member)}",
                "proto": "a member named __proto__ is not accepted",
                "depth": "nested too deeply",
            }[reason]
        super().__init__(message)


_ESCAPES = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r", 0x22: '\\"', 0x5C: "\\\\"}

# Integers beyond 2**53 are read by JavaScript as the nearest double; writing them the same way keeps one value one
# signature on both sides.
_SAFE_INT = 2**53

# Below Python's default recursion limit; every HTTP surface refuses JSON nested past 256 (docs/protocol.md §12).
_MAX_DEPTH = 512


def format_number(x: int | float) -> str:
    """ECMAScript ``Number.prototype.toString`` of a finite number (RFC 8785 §3.2.2.3)."""
    if isinstance(x, bool):
        raise NotCanonicalizable("a boolean is not a number")
    if isinstance(x, int):
        if -_SAFE_INT <= x <= _SAFE_INT:
            return str(x)
        try:
            x = float(x)
        except OverflowError as e:
            raise NotCanonicalizable("integer out of the range of a double") from e
    if not math.isfinite(x):
        raise NotCanonicalizable(f"{x!r} has no JSON form")
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    # repr gives the shortest digits that round-trip, as ECMAScript requires; only the layout differs.
    r = repr(abs(x))
    mantissa, _, exp_part = r.partition("e")
    exp = int(exp_part) if exp_part else 0
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    # position of the decimal point relative to the first significant digit
    lead_zeros = len(int_part + frac_part) - len((int_part + frac_part).lstrip("0"))
    n = len(int_part) - lead_zeros + exp
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        power = n - 1
        es = ("+" if power >= 0 else "-") + str(abs(power))
        out = (digits if k == 1 else digits[0] + "." + digits[1:]) + "e" + es
    return sign + out


def _string(s: str, out: list[str]) -> None:
    buf = ['"']
    for ch in s:
        c = ord(ch)
        if c < 0x20 or c == 0x22 or c == 0x5C:
            buf.append(_ESCAPES.get(c) or f"\\u{c:04x}")
        elif 0xD800 <= c <= 0xDFFF:
            raise NotCanonicalizable("a lone surrogate has no JCS form")
        else:
            buf.append(ch)
    buf.append('"')
    out.append("".join(buf))


def _utf16_key(s: str) -> bytes:
    return s.encode("utf-16-be", "surrogatepass")


def _write(v: Any, out: list[str], depth: int, sort: bool = True) -> None:
    if depth > _MAX_DEPTH:
        raise NotCanonicalizable("nested too deeply (or a cycle)")
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, str):
        _string(v, out)
    elif isinstance(v, (int, float)):
        out.append(format_number(v))
    elif isinstance(v, dict):
        for k in v:
            if not isinstance(k, str):
                raise NotCanonicalizable(f"member name {k!r} is not a string")
        out.append("{")
        first = True
        for k in sorted(v, key=_utf16_key) if sort else v:
            if not first:
                out.append(",")
            first = False
            _string(k, out)
            out.append(":")
            _write(v[k], out, depth + 1, sort)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(",")
            _write(item, out, depth + 1, sort)
        out.append("]")
    else:
        raise NotCanonicalizable(f"{type(v).__name__} has no JSON form")


def _run(value: Any, sort: bool) -> str:
    out: list[str] = []
    try:
        _write(value, out, 0, sort)
    except RecursionError as e:  # a caller already deep in its own stack
        raise NotCanonicalizable("nested too deeply (or a cycle)") from e
    return "".join(out)


def canonicalize(value: Any) -> str:
    """The JCS string of a JSON value; raises ``NotCanonicalizable`` when it has none."""
    return _run(value, True)


def stringify(value: Any) -> str:
    """ECMAScript ``JSON.stringify`` of a JSON value, compact, members in insertion order: how issuers write JWS
    headers and payloads (docs/protocol.md §9.1), so Python and TypeScript issue the same bytes."""
    return _run(value, False)


def canonical_bytes(value: Any) -> bytes:
    """The UTF-8 bytes of the JCS form of a JSON value."""
    return canonicalize(value).encode("utf-8")


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k == "__proto__":
            raise StrictJsonError("proto", k)
        if k in out:
            raise StrictJsonError("duplicate", k)
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise StrictJsonError("syntax", message=f"{name} is not JSON")


def parse_json_strict(text: str | bytes, max_depth: int = 256) -> Any:
    """Parses I-JSON (RFC 7493): refuses a duplicate member name (in any spelling), a ``__proto__`` member,
    NaN/Infinity and nesting deeper than ``max_depth``."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise StrictJsonError("syntax", message="not UTF-8") from e
    try:
        value = json.loads(text, object_pairs_hook=_pairs_hook, parse_constant=_no_constant)
    except StrictJsonError:
        raise
    except (ValueError, RecursionError) as e:
        raise StrictJsonError("syntax", message=f"not valid JSON: {e}") from e
    if _depth(value, 0, max_depth) > max_depth:
        raise StrictJsonError("depth")
    return value


def _depth(v: Any, d: int, limit: int) -> int:
    if d > limit:
        return d
    if isinstance(v, dict):
        return max((_depth(x, d + 1, limit) for x in v.values()), default=d + 1)
    if isinstance(v, list):
        return max((_depth(x, d + 1, limit) for x in v), default=d + 1)
    return d

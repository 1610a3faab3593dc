"""RFC 8785 canonical JSON, base58btc, UTC timestamps and money: the small exact pieces everything signs with."""

from __future__ import annotations

import math

import pytest

from agent_mesh import base58
from agent_mesh.jcs import (
    NotCanonicalizable,
    StrictJsonError,
    canonicalize,
    format_number,
    parse_json_strict,
    stringify,
)
from agent_mesh.money import InvalidAmount, format_usd_string, parse_usd
from agent_mesh.timestamp import parse_utc_timestamp, to_date_time_seconds, to_iso_string

# RFC 8785 Appendix B: IEEE 754 bit patterns and their ECMAScript text.
RFC8785_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize("bits,text", RFC8785_NUMBERS)
def test_rfc8785_numbers(bits: str, text: str) -> None:
    import struct

    assert format_number(struct.unpack(">d", bytes.fromhex(bits))[0]) == text


def test_rfc8785_structure() -> None:
    # RFC 8785 §3.2.3: members sorted by UTF-16 code units (the astral U+1F600 sorts before U+FB33).
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    keys = [k for k in parse_json_strict(canonicalize(value))]
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
    assert (
        canonicalize({"b": [1, 2.5, True, None], "a": '\u00e9\n\u001f"\\/'})
        == '{"a":"\u00e9\\n\\u001f\\"\\\\/","b":[1,2.5,true,null]}'
    )
    assert canonicalize({"n": 1e21, "m": 1e-7, "i": 10**30}) == '{"i":1e+30,"m":1e-7,"n":1e+21}'
    assert stringify({"b": 1.0, "a": [2]}) == '{"b":1,"a":[2]}'


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "\ud800", {"k": {1, 2}}, {1: "x"}, b"bytes"])
def test_not_canonicalizable(bad: object) -> None:
    with pytest.raises(NotCanonicalizable) as e:
        canonicalize(bad)
    assert e.value.code == "NOT_CANONICALIZABLE"


@pytest.mark.parametrize(
    "text,reason",
    [
        ('{"to":1,"t\\u006f":2}', "duplicate"),
        ('{"a":{"__proto__":1}}', "proto"),
        ("NaN", "syntax"),
        ("{", "syntax"),
        ("[" * 300 + "]" * 300, "depth"),
    ],
)
def test_strict_json_refusals(text: str, reason: str) -> None:
    with pytest.raises(StrictJsonError) as e:
        parse_json_strict(text)
    assert e.value.reason == reason


def test_cycles_and_deep_nesting_are_refused_not_crashed() -> None:
    cycle: dict[str, object] = {}
    cycle["self"] = cycle
    deep: list[object] = []
    x = deep
    for _ in range(2000):
        x.append([])
        x = x[0]  # type: ignore[assignment]
    for bad in (cycle, deep):
        with pytest.raises(NotCanonicalizable):
            canonicalize(bad)
        with pytest.raises(NotCanonicalizable):
            stringify(bad)


def test_proto_as_a_value_is_ordinary_text() -> None:
    assert parse_json_strict('{"a":"__proto__"}') == {"a": "__proto__"}


def test_base58() -> None:
    assert base58.encode(b"") == ""
    assert base58.encode(b"\0\0\x01") == "112"
    assert base58.encode(b"hello world") == "StV1DL6CwTryKyV"
    assert base58.decode("StV1DL6CwTryKyV") == b"hello world"
    with pytest.raises(ValueError):
        base58.decode("0OIl")
    with pytest.raises(ValueError):
        base58.decode_multibase("StV1")


@pytest.mark.parametrize(
    "text,ms",
    [
        ("2026-01-01T12:00:00.000Z", 1767268800000),
        ("2026-01-01t12:00:00z", 1767268800000),
        ("2026-01-01T12:00:00+00:00", 1767268800000),
        ("2026-01-01T12:00:00-00:00", 1767268800000),
        ("2026-01-01T12:00:00.123456789Z", 1767268800123),
        ("2024-02-29T00:00:00Z", 1709164800000),
    ],
)
def test_timestamps_read(text: str, ms: int) -> None:
    assert parse_utc_timestamp(text) == ms


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-01T12:00:00+02:00",
        "2026-02-30T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01T12:00:60Z",
        "2025-02-29T00:00:00Z",
        "2026-01-01 12:00:00Z",
        "2026-01-01T12:00:00Z\n",
        "\u0662026-01-01T12:00:00Z",
    ],
)
def test_timestamps_refused(text: str) -> None:
    assert parse_utc_timestamp(text) is None


def test_timestamps_written() -> None:
    assert to_iso_string(1767268800123) == "2026-01-01T12:00:00.123Z"
    assert to_iso_string(0) == "1970-01-01T00:00:00.000Z"
    assert to_date_time_seconds(1767268800999) == "2026-01-01T12:00:00Z"


def test_money() -> None:
    assert parse_usd(0.1) == 100_000
    assert parse_usd("412.50") == 412_500_000
    assert parse_usd(999_999_999.999999) == 999_999_999_999_999
    assert parse_usd("1.5e3") == 1_500_000_000
    assert (
        format_usd_string(412_500_000) == "412.5" and format_usd_string(1) == "0.000001" and format_usd_string(0) == "0"
    )
    for bad in (0.1 + 0.2, -1, 1e9, "1e-7", math.nan, True, "1,5", "0x10"):
        with pytest.raises(InvalidAmount) as e:
            parse_usd(bad)  # type: ignore[arg-type]
        assert e.value.code == "INVALID_AMOUNT"

"""Money (docs/protocol.md §9.2): USD travels as a decimal JSON number and is an integer count of micro-dollars
inside. A decimal is read from its shortest round-trip text (ECMAScript ``Number#toString``), never through float
arithmetic, so ``0.1`` is exactly 100 000 micros and ``0.1 + 0.2`` is refused rather than rounded into a payment."""

from __future__ import annotations

import math
import re
from decimal import Decimal

from .jcs import format_number

__all__ = ["InvalidAmount", "MICROS_PER_USD", "MAX_MICROS", "parse_usd", "is_usd", "format_usd_string", "format_usd"]

MICROS_PER_USD = 1_000_000
MAX_MICROS = 999_999_999_999_999

_DECIMAL = re.compile(r"([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?", re.ASCII)


class InvalidAmount(ValueError):
    """A USD amount that is not a non-negative decimal with at most six decimals within range (``INVALID_AMOUNT``)."""

    code = "INVALID_AMOUNT"


def parse_usd(value: int | float | str | Decimal) -> int:
    """Micro-dollars of a USD amount (a number, or its decimal text), exactly: no rounding, at most six decimals,
    not negative, finite, at most ``MAX_MICROS``. Raises ``InvalidAmount``."""
    if isinstance(value, bool):
        raise InvalidAmount(f"amount {value!r} is not a number")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidAmount(f"amount {value!r} is not a finite number")
        if value < 0:
            raise InvalidAmount(f"amount {format_number(value)} is negative")
        # the shortest decimal that round-trips: the decimal the JSON text carried
        text = format_number(value)
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise InvalidAmount(f"amount {value} is not a finite number")
        text = format(value, "f")
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise InvalidAmount(f"amount {value!r} is not a number")
    m = _DECIMAL.fullmatch(text)
    if m is None:
        raise InvalidAmount(f"amount {text!r} is not a non-negative decimal")
    exponent = int(m.group(3)) if m.group(3) is not None else 0
    if abs(exponent) > 30:
        raise InvalidAmount(f"amount {text} is out of range")
    digits = m.group(1) + (m.group(2) or "")
    point_at = len(m.group(1)) + exponent
    if point_at < 0:
        digits = "0" * (-point_at) + digits
        point_at = 0
    if point_at > len(digits):
        digits = digits + "0" * (point_at - len(digits))
    whole = digits[:point_at].lstrip("0") or "0"
    fraction = digits[point_at:].rstrip("0")
    if len(fraction) > 6:
        raise InvalidAmount(f"amount {text} has more than six decimals")
    if len(whole) > 9:
        raise InvalidAmount(f"amount {text} is above the largest amount, 999999999.999999")
    return int(whole) * MICROS_PER_USD + int(fraction.ljust(6, "0"))


def is_usd(value: object) -> bool:
    """True when the input is a number that is a valid USD amount."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        parse_usd(value)
        return True
    except InvalidAmount:
        return False


def format_usd_string(micros: int) -> str:
    """Micro-dollars as a decimal string with no trailing zeros (``"12.5"``, ``"0.000001"``, ``"3"``)."""
    whole, frac = divmod(int(micros), MICROS_PER_USD)
    fraction = str(frac).rjust(6, "0").rstrip("0")
    return f"{whole}.{fraction}" if fraction else str(whole)


def format_usd(micros: int) -> int | float:
    """Micro-dollars as the JSON number for that decimal (an int when whole, so it serializes as JavaScript does)."""
    s = format_usd_string(micros)
    return float(s) if "." in s else int(s)

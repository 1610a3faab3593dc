"""RFC 3339 UTC timestamps (docs/protocol.md §1): written as ECMAScript's ``toISOString`` writes them, read in any
UTC form (``T``/``t``, ``Z``/``z``, ``+00:00``/``-00:00``, a fraction of any length); another offset, an impossible
date or a leap second is refused, never converted."""

from __future__ import annotations

import re
import time
from typing import Any

__all__ = [
    "UTC_TIMESTAMP",
    "parse_utc_timestamp",
    "is_utc_timestamp",
    "to_iso_string",
    "to_date_time_seconds",
    "now_ms",
]

UTC_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,32}))?(?:[Zz]|[+-]00:00)",
    re.ASCII,
)
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _is_leap(y: int) -> bool:
    return (y % 4 == 0 and y % 100 != 0) or y % 400 == 0


def _days_from_civil(y: int, m: int, d: int) -> int:
    # Howard Hinnant's days_from_civil: proleptic Gregorian, any year (Python's datetime stops at year 1).
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


def parse_utc_timestamp(s: Any) -> int | None:
    """Epoch milliseconds of a UTC RFC 3339 timestamp (fraction truncated to the millisecond), or None."""
    if not isinstance(s, str):
        return None
    m = UTC_TIMESTAMP.fullmatch(s)
    if m is None:
        return None
    y, mo, d, h, mi, sec = (int(m.group(i)) for i in range(1, 7))
    if (
        not 1 <= mo <= 12
        or d < 1
        or d > (29 if mo == 2 and _is_leap(y) else _DAYS[mo - 1])
        or h > 23
        or mi > 59
        or sec > 59
    ):
        return None
    frac = m.group(7)
    ms = 0 if frac is None else int(frac[:3].ljust(3, "0"))
    return ((_days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60_000 + sec * 1000 + ms


def is_utc_timestamp(s: Any) -> bool:
    """True for a UTC RFC 3339 timestamp ``parse_utc_timestamp`` reads."""
    return parse_utc_timestamp(s) is not None


def to_iso_string(ms: int) -> str:
    """``Date.prototype.toISOString`` of epoch milliseconds: ``2026-01-01T12:00:00.000Z``."""
    ms = int(ms)
    days, rem = divmod(ms, 86_400_000)
    y, mo, d = _civil_from_days(days)
    h, rem = divmod(rem, 3_600_000)
    mi, rem = divmod(rem, 60_000)
    sec, milli = divmod(rem, 1000)
    year = f"{y:04d}" if 0 <= y <= 9999 else (f"+{y:06d}" if y > 0 else f"-{-y:06d}")
    return f"{year}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{sec:02d}.{milli:03d}Z"


def to_date_time_seconds(ms: int) -> str:
    """UTC with second precision, as proofs made by ``sign_message`` carry it: ``2026-01-01T12:00:00Z``."""
    return to_iso_string((int(ms) // 1000) * 1000).replace(".000Z", "Z")


def now_ms() -> int:
    """The wall clock in epoch milliseconds."""
    return time.time_ns() // 1_000_000

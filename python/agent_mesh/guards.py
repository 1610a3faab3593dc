"""Enforcement of mandates at the point of use (docs/protocol.md §9.9): ``SpendingGuard`` for payments under
intent → cart → payment chains, ``TaskGuard`` for actions under task mandates. Limits are charged against a counter
of every link of the chain at once, all or nothing, in integers (micro-dollars for money), so no float ever decides
a payment and siblings delegated from one parent together stay within it."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .mandate import (
    DEFAULT_CLOCK_TOLERANCE_SECONDS,
    KeysInput,
    Mandate,
    MandateInvalid,
    chain_of,
    check_mandate,
    to_key_source,
)
from .money import InvalidAmount, parse_usd
from .timestamp import now_ms as _wall_ms

__all__ = [
    "SpendingConstraintViolation",
    "TaskConstraintViolation",
    "CounterLimitReached",
    "CounterCharge",
    "CounterStore",
    "Authorization",
    "SpendingGuard",
    "TaskGuard",
    "counter_scope",
    "SPEND_COUNTER",
]

SPEND_COUNTER = "spend:usdMicros"
_MAX_SAFE = 2**53 - 1


class SpendingConstraintViolation(Exception):
    """A payment refused under its mandate: ``code`` is ``MANDATE_INVALID`` (with ``reason``), ``LIMIT_EXCEEDED``,
    ``MERCHANT_NOT_ALLOWED`` or ``INVALID_AMOUNT``."""

    def __init__(self, code: str, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


class TaskConstraintViolation(Exception):
    """An action refused under its task mandate: ``code`` is ``MANDATE_INVALID`` (with ``reason``),
    ``CAPABILITY_NOT_PERMITTED``, ``REVERSIBILITY_VIOLATION``, ``HUMAN_GATE_REQUIRED``, ``ACTION_LIMIT_EXCEEDED``,
    ``COMPUTE_LIMIT_EXCEEDED``, ``DATA_ACCESS_VIOLATION``, ``SANDBOX_REQUIRED`` or ``DELEGATION_DEPTH_EXCEEDED``."""

    def __init__(self, code: str, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


class CounterLimitReached(Exception):
    """A charge would take a counter past its limit; nothing was charged."""

    code = "COUNTER_LIMIT_REACHED"

    def __init__(self, scope: str, counter: str, amount: int, limit: int) -> None:
        super().__init__(f"{counter} of {scope}: {amount} would pass {limit}")
        self.scope = scope
        self.counter = counter
        self.amount = amount
        self.limit = limit


@dataclass(frozen=True)
class CounterCharge:
    """Add ``amount`` to the counter (``scope``, ``counter``) unless that would take it past ``limit``."""

    scope: str
    counter: str
    amount: int
    limit: int


def counter_scope(m: Mandate) -> str:
    """The counter scope of a mandate: its grantor and ``jti`` (a ``jti`` is chosen by its grantor)."""
    return f"{m.grantor} {m.jti}"


def _safe(n: Any) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and -_MAX_SAFE <= n <= _MAX_SAFE


class CounterStore:
    """In-memory counters; a charge checks and applies under one lock, so it is atomic. Not durable."""

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self._clock = clock or _wall_ms
        self._counters: dict[tuple[str, str], list[int]] = {}
        self._lock = threading.Lock()
        self._since_sweep = 0

    def charge(self, charges: Sequence[CounterCharge], retain_until_ms: int) -> None:
        """Applies every charge or none; raises the first ``CounterLimitReached``."""
        for c in charges:
            if not _safe(c.amount) or c.amount < 0 or not _safe(c.limit) or c.amount > c.limit:
                raise CounterLimitReached(c.scope, c.counter, c.amount, c.limit)
        with self._lock:
            now = self._clock()
            self._since_sweep += 1
            if self._since_sweep >= 1024:
                self._since_sweep = 0
                for k in [k for k, v in self._counters.items() if v[1] <= now]:
                    del self._counters[k]
            nxt: dict[tuple[str, str], int] = {}
            for c in charges:
                key = (c.scope, c.counter)
                after = nxt.get(key, self._counters.get(key, [0, 0])[0]) + c.amount
                if after > c.limit:
                    raise CounterLimitReached(c.scope, c.counter, c.amount, c.limit)
                nxt[key] = after
            for key, used in nxt.items():
                until = max(self._counters.get(key, [0, 0])[1], retain_until_ms)
                self._counters[key] = [used, until]

    def adjust(self, adjustments: Sequence[tuple[str, str, int, int]], retain_until_ms: int) -> None:
        """Moves counters (scope, counter, delta, limit) by delta, clamped to 0 … limit; never fails on a limit."""
        with self._lock:
            for scope, counter, delta, limit in adjustments:
                if not _safe(delta) or not _safe(limit) or limit < 0 or delta == 0:
                    continue
                key = (scope, counter)
                used, until = self._counters.get(key, [0, 0])
                used = max(0, used + delta) if delta < 0 else max(used, min(limit, used + delta))
                self._counters[key] = [used, max(until, retain_until_ms)]

    def used(self, scope: str, counter: str) -> int:
        """The current value of a counter (0 when never charged)."""
        with self._lock:
            return self._counters.get((scope, counter), [0, 0])[0]


@dataclass(frozen=True)
class Authorization:
    """An authorized payment: the verified mandate and the exact amount charged."""

    mandate: Mandate
    amount_micros: int


class SpendingGuard:
    """Authorizes payments: the chain must verify for the presenter (kinds intent, cart, payment), the merchant must
    be allowed by every link, and the amount is charged against every link's limit, cumulatively."""

    def __init__(
        self, keys: KeysInput, store: CounterStore | None = None, clock: Callable[[], int] | None = None
    ) -> None:
        source = to_key_source(keys)
        if isinstance(source, bytes):
            raise TypeError("a guard needs a key map or a KeyResolver, not a single key")
        self._keys = source
        self._clock = clock or _wall_ms
        self.store = store or CounterStore(self._clock)

    def authorize(self, token: str, amount_usd: float | int | str, merchant: str, presenter: str) -> Authorization:
        """Verifies the mandate for the presenter and charges the amount; raises ``SpendingConstraintViolation``."""
        try:
            mandate = check_mandate(
                token, self._keys, expected_grantee=presenter, kinds=["intent", "cart", "payment"], now_ms=self._clock()
            )
        except MandateInvalid as e:
            raise SpendingConstraintViolation("MANDATE_INVALID", f"{e.reason}: {e}", e.reason) from e
        try:
            amount = parse_usd(amount_usd)
        except InvalidAmount as e:
            raise SpendingConstraintViolation("INVALID_AMOUNT", str(e)) from e
        chain = chain_of(mandate)
        for m in chain:
            c = m.constraints
            allowed = (
                c["merchant"] == merchant
                if m.kind == "payment"
                else ("allowedMerchants" not in c or merchant in c["allowedMerchants"])
            )
            if not allowed:
                raise SpendingConstraintViolation(
                    "MERCHANT_NOT_ALLOWED", f"merchant {merchant!r} is not allowed by mandate {m.jti}"
                )
        charges = [
            CounterCharge(
                counter_scope(m),
                SPEND_COUNTER,
                amount,
                parse_usd(m.constraints["amountUsd"] if m.kind == "payment" else m.constraints["spendLimitUsd"]),
            )
            for m in chain
        ]
        try:
            self.store.charge(charges, chain[0].expires_at * 1000)
        except CounterLimitReached as e:
            raise SpendingConstraintViolation(
                "LIMIT_EXCEEDED", f"{amount_usd} USD would pass the limit of mandate {e.scope} ({e.limit} micro-USD)"
            ) from e
        return Authorization(mandate, amount)


def _is_count(n: Any) -> bool:
    return n is None or (_safe(n) and n >= 0)


class TaskGuard:
    """Checks actions against task mandates (docs/protocol.md §9.9.2) and charges their limits on every link."""

    def __init__(
        self, keys: KeysInput, store: CounterStore | None = None, clock: Callable[[], int] | None = None
    ) -> None:
        source = to_key_source(keys)
        if isinstance(source, bytes):
            raise TypeError("a guard needs a key map or a KeyResolver, not a single key")
        self._keys = source
        self._clock = clock or _wall_ms
        self.store = store or CounterStore(self._clock)

    def _verify(self, token: str, presenter: str) -> Mandate:
        try:
            return check_mandate(
                token,
                self._keys,
                expected_grantee=presenter,
                kinds=["task"],
                clock_tolerance_seconds=DEFAULT_CLOCK_TOLERANCE_SECONDS,
                now_ms=self._clock(),
            )
        except MandateInvalid as e:
            code = "DELEGATION_DEPTH_EXCEEDED" if e.reason == "DEPTH_EXCEEDED" else "MANDATE_INVALID"
            raise TaskConstraintViolation(code, f"{e.reason}: {e}", e.reason) from e

    @staticmethod
    def _compute_charges(mandate: Mandate, llm_tokens: int | None, web_requests: int | None) -> list[CounterCharge]:
        out: list[CounterCharge] = []
        for m in chain_of(mandate):
            limits = m.constraints.get("computeLimit") or {}
            for r, n in (("llmTokens", llm_tokens or 0), ("webRequests", web_requests or 0)):
                if r in limits and n > 0:
                    out.append(CounterCharge(counter_scope(m), f"compute:{r}", n, limits[r]))
        return out

    def _charge(self, mandate: Mandate, charges: list[CounterCharge], cap: str | None) -> None:
        if not charges:
            return
        try:
            self.store.charge(charges, chain_of(mandate)[0].expires_at * 1000)
        except CounterLimitReached as e:
            if e.counter.startswith("action:"):
                raise TaskConstraintViolation(
                    "ACTION_LIMIT_EXCEEDED", f"{cap} would exceed its limit of {e.limit} (mandate {e.scope})"
                ) from e
            raise TaskConstraintViolation(
                "COMPUTE_LIMIT_EXCEEDED",
                f"{e.counter[len('compute:') :]} would exceed its limit of {e.limit} (mandate {e.scope})",
            ) from e

    def check(
        self,
        token: str,
        *,
        presenter: str,
        capability: str,
        reversible: bool,
        sandboxed: bool,
        data_scopes: Sequence[str] = (),
        llm_tokens: int | None = None,
        web_requests: int | None = None,
        human_approved: bool = False,
    ) -> Mandate:
        """Checks the action against the mandate and charges its limits; raises ``TaskConstraintViolation`` with the
        code of the first rule broken. ``human_approved`` only after recording an approval for this very action."""
        mandate = self._verify(token, presenter)
        # the verified chain narrows link by link, so the leaf's lists decide; only counters need every link
        c = mandate.constraints
        cap = capability
        if cap in c.get("blocked", []):
            raise TaskConstraintViolation("CAPABILITY_NOT_PERMITTED", f"{cap} is blocked")
        if cap not in c["allowed"]:
            raise TaskConstraintViolation("CAPABILITY_NOT_PERMITTED", f"{cap} is not allowed")
        if c.get("reversibleOnly") is True and not reversible:
            raise TaskConstraintViolation(
                "REVERSIBILITY_VIOLATION", f"{cap} is irreversible and the mandate allows reversible actions only"
            )
        if c.get("sandbox") is True and not sandboxed:
            raise TaskConstraintViolation("SANDBOX_REQUIRED", "the mandate requires a sandboxed runtime")
        granted = c.get("dataAccess", [])
        for scope in data_scopes:
            if scope not in granted:
                raise TaskConstraintViolation("DATA_ACCESS_VIOLATION", f"data scope {scope!r} is not granted")
        if cap in c.get("humanGates", []) and human_approved is not True:
            raise TaskConstraintViolation("HUMAN_GATE_REQUIRED", f"{cap} needs a human approval")
        if not _is_count(llm_tokens) or not _is_count(web_requests):
            raise TaskConstraintViolation(
                "COMPUTE_LIMIT_EXCEEDED", "llm_tokens and web_requests must be non-negative integers"
            )
        charges: list[CounterCharge] = []
        for m in chain_of(mandate):
            limits = m.constraints.get("actionLimits") or {}
            if cap in limits:
                charges.append(CounterCharge(counter_scope(m), f"action:{cap}", 1, limits[cap]))
        charges.extend(self._compute_charges(mandate, llm_tokens, web_requests))
        self._charge(mandate, charges, cap)
        return mandate

    def reserve_compute(
        self, token: str, presenter: str, llm_tokens: int | None = None, web_requests: int | None = None
    ) -> Mandate:
        """Reserves compute the presenter is about to spend on its own account, against every link's
        ``computeLimit``."""
        mandate = self._verify(token, presenter)
        if not _is_count(llm_tokens) or not _is_count(web_requests):
            raise TaskConstraintViolation(
                "COMPUTE_LIMIT_EXCEEDED", "llm_tokens and web_requests must be non-negative integers"
            )
        self._charge(mandate, self._compute_charges(mandate, llm_tokens, web_requests), None)
        return mandate

    def settle_compute(self, mandate: Mandate, reserved: Mapping[str, int], spent: Mapping[str, float]) -> None:
        """Settles a reservation (``{"llmTokens": n, "webRequests": n}``) with what was spent: the unused part goes
        back, an overrun is charged as far as each link's limit."""
        adjustments = []
        for m in chain_of(mandate):
            limits = m.constraints.get("computeLimit") or {}
            for r in ("llmTokens", "webRequests"):
                delta = max(0, math.ceil(spent.get(r, 0) or 0)) - (reserved.get(r, 0) or 0)
                if r in limits and delta != 0:
                    adjustments.append((counter_scope(m), f"compute:{r}", delta, limits[r]))
        if adjustments:
            self.store.adjust(adjustments, chain_of(mandate)[0].expires_at * 1000)

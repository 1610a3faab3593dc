"""The ``cns`` claim of a mandate, per kind (docs/protocol.md §9.3, §9.4): its JSON shape, how it is checked, and
the narrowing rule an attenuated child must satisfy against its parent. Validation is strict: an unknown member, a
wrong type or an out-of-range number is a problem, because a constraint a verifier silently ignored would widen
the authority.

Constraints travel as JSON dicts with the wire names (``spendLimitUsd``, ``maxDelegationDepth``, …); the dataclasses
here are the snake_case way to write them in Python and turn into those dicts with ``to_json()``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .money import InvalidAmount, format_usd, parse_usd

__all__ = [
    "MANDATE_KINDS",
    "TASK_TYPES",
    "MAX_LIST_ENTRIES",
    "MAX_COUNT",
    "CHILD_KINDS",
    "SpendingConstraints",
    "TaskConstraints",
    "ModelBudgetConstraints",
    "constraints_json",
    "constraints_problem",
    "narrowing_violation",
    "normalize_task",
    "usd_micros",
]

MANDATE_KINDS = ("intent", "cart", "payment", "task", "model-budget")
TASK_TYPES = ("REASONING", "CODE", "EXTRACTION", "CREATIVE", "CLASSIFICATION", "SUMMARIZATION")
MAX_COUNT = 2**53 - 1
MAX_LIST_ENTRIES = 64

CHILD_KINDS: dict[str, tuple[str, ...]] = {
    "intent": ("cart", "payment"),
    "cart": ("payment",),
    "payment": (),
    "task": ("task",),
    "model-budget": ("model-budget",),
}


@dataclass
class SpendingConstraints:
    """Constraints of an intent or cart mandate: ``spendLimitUsd`` and, optionally, ``allowedMerchants``."""

    spend_limit_usd: float | int
    allowed_merchants: Sequence[str] | None = None

    def to_json(self) -> dict[str, Any]:
        """The wire form."""
        out: dict[str, Any] = {"spendLimitUsd": self.spend_limit_usd}
        if self.allowed_merchants is not None:
            out["allowedMerchants"] = list(self.allowed_merchants)
        return out


@dataclass
class TaskConstraints:
    """Constraints of a task mandate (docs/protocol.md §9.3.3); ``sandbox`` is the spec's sandbox flag."""

    allowed: Sequence[str]
    max_delegation_depth: int
    blocked: Sequence[str] | None = None
    reversible_only: bool | None = None
    human_gates: Sequence[str] | None = None
    action_limits: Mapping[str, int] | None = None
    compute_limit: Mapping[str, int] | None = None
    data_access: Sequence[str] | None = None
    sandbox: bool | None = None

    def to_json(self) -> dict[str, Any]:
        """The wire form (members left None are omitted; issuing writes them at their defaults)."""
        out: dict[str, Any] = {"allowed": list(self.allowed)}
        for name, key in (
            ("blocked", "blocked"),
            ("reversible_only", "reversibleOnly"),
            ("human_gates", "humanGates"),
            ("action_limits", "actionLimits"),
            ("compute_limit", "computeLimit"),
            ("data_access", "dataAccess"),
            ("sandbox", "sandbox"),
        ):
            v = getattr(self, name)
            if v is not None:
                out[key] = list(v) if isinstance(v, (list, tuple)) else (dict(v) if isinstance(v, Mapping) else v)
        out["maxDelegationDepth"] = self.max_delegation_depth
        return out


@dataclass
class ModelBudgetConstraints:
    """Constraints of a model-budget mandate (JSON names in snake_case, as the spec has them)."""

    token_budget: int
    cost_budget_usd: float | int
    quality_threshold: float | int
    task_type: str
    expected_steps: int

    def to_json(self) -> dict[str, Any]:
        """The wire form."""
        return {
            "token_budget": self.token_budget,
            "cost_budget_usd": self.cost_budget_usd,
            "quality_threshold": self.quality_threshold,
            "task_type": self.task_type,
            "expected_steps": self.expected_steps,
        }


_SNAKE_TO_WIRE = {
    "spend_limit_usd": "spendLimitUsd",
    "allowed_merchants": "allowedMerchants",
    "amount_usd": "amountUsd",
    "reversible_only": "reversibleOnly",
    "human_gates": "humanGates",
    "action_limits": "actionLimits",
    "compute_limit": "computeLimit",
    "data_access": "dataAccess",
    "max_delegation_depth": "maxDelegationDepth",
    "llm_tokens": "llmTokens",
    "web_requests": "webRequests",
}


def _plain(v: Any) -> Any:
    # Tuples and other sequences and mappings become the lists and dicts JSON has, so validation sees JSON.
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def constraints_json(c: Any) -> Any:
    """The wire form of constraints given as a dataclass or a dict (snake_case keys of the spending and task kinds
    are accepted and renamed; members whose value is None are dropped)."""
    if hasattr(c, "to_json"):
        return _plain(c.to_json())
    if not isinstance(c, Mapping):
        return c
    out: dict[str, Any] = {}
    for k, v in c.items():
        if v is None:
            continue
        key = _SNAKE_TO_WIRE.get(k, k) if isinstance(k, str) else k
        if key == "computeLimit" and isinstance(v, Mapping):
            v = {_SNAKE_TO_WIRE.get(x, x): y for x, y in v.items() if y is not None}
        out[key] = _plain(v)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Validation


def _is_number(u: Any) -> bool:
    return isinstance(u, (int, float)) and not isinstance(u, bool)


def _is_count(u: Any) -> bool:
    # JavaScript's Number.isSafeInteger: 5.0 counts, 5.5 and 2**53 do not.
    if not _is_number(u):
        return False
    if isinstance(u, float) and not u.is_integer():
        return False
    return bool(0 <= u <= MAX_COUNT)


def _js_len(s: str) -> int:
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def _check_name(u: Any) -> bool:
    return isinstance(u, str) and 0 < _js_len(u) <= 256


def _check_name_list(u: Any, where: str) -> str | None:
    if not isinstance(u, list):
        return f"{where} must be an array of names"
    if len(u) > MAX_LIST_ENTRIES:
        return f"{where} has {len(u)} entries, more than {MAX_LIST_ENTRIES}"
    for x in u:
        if not _check_name(x):
            return f"{where} must hold non-empty strings of at most 256 characters"
    return None


def _check_usd(u: Any, where: str) -> str | None:
    if isinstance(u, str):
        # Issuers write a decimal string as its number (``with_canonical_usd``); only a token can still hold one.
        try:
            parse_usd(u)
        except InvalidAmount as e:
            return f"{where}: {e}"
        return f"{where} must be a JSON number in a token, not a string"
    if not _is_number(u):
        return f'{where} must be a USD amount: a number or a decimal string such as "5.00"' 
    try:
        parse_usd(u)
    except InvalidAmount as e:
        return f"{where}: {e}"
    return None


def _shown_name(k: Any) -> str:
    # A plain name as it is; anything else quoted, as the TypeScript message does.
    return k if isinstance(k, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", k) else json.dumps(k)


def _only_keys(o: Mapping[str, Any], allowed: Sequence[str], where: str) -> str | None:
    for k in o:
        if k not in allowed:
            return f"{where}: unknown member {_shown_name(k)}; allowed: {', '.join(allowed)}"
    return None


_SPENDING_KEYS = ("spendLimitUsd", "allowedMerchants")
_PAYMENT_KEYS = ("amountUsd", "merchant")
_TASK_KEYS = (
    "allowed",
    "blocked",
    "reversibleOnly",
    "humanGates",
    "actionLimits",
    "computeLimit",
    "dataAccess",
    "sandbox",
    "maxDelegationDepth",
)
_COMPUTE_KEYS = ("llmTokens", "webRequests")
_MODEL_KEYS = ("token_budget", "cost_budget_usd", "quality_threshold", "task_type", "expected_steps")


def _first(*checks: Any) -> str | None:
    for c in checks:
        r = c() if callable(c) else c
        if r is not None:
            return str(r)
    return None


_USD_MEMBERS = {"intent": ("spendLimitUsd",), "cart": ("spendLimitUsd",), "payment": ("amountUsd",), "task": (), "model-budget": ("cost_budget_usd",)}


def with_canonical_usd(kind: str, cns: Any) -> Any:
    """The constraints an issuer signs: each USD member given as a number or as the decimal string Money reads
    (``"5.00"``) written as the JSON number of its canonical form; anything else left for ``constraints_problem``."""
    if not isinstance(cns, dict):
        return cns
    out = dict(cns)
    for k in _USD_MEMBERS.get(kind, ()):
        v = out.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            continue
        try:
            out[k] = format_usd(parse_usd(v))
        except InvalidAmount:
            continue
    return out


def constraints_problem(kind: str, cns: Any) -> str | None:
    """Why ``cns`` (wire form) is not valid for ``kind``, or None when it is."""
    if not isinstance(cns, dict):
        return "constraints must be an object"
    if kind in ("intent", "cart"):
        return _first(
            lambda: _only_keys(cns, _SPENDING_KEYS, "constraints"),
            lambda: _check_usd(cns.get("spendLimitUsd"), "spendLimitUsd"),
            lambda: (
                None if "allowedMerchants" not in cns else _check_name_list(cns["allowedMerchants"], "allowedMerchants")
            ),
        )
    if kind == "payment":
        return _first(
            lambda: _only_keys(cns, _PAYMENT_KEYS, "constraints"),
            lambda: _check_usd(cns.get("amountUsd"), "amountUsd"),
            lambda: None if _check_name(cns.get("merchant")) else "merchant must be a non-empty string",
        )
    if kind == "task":
        problem = _first(
            lambda: _only_keys(cns, _TASK_KEYS, "constraints"),
            lambda: _check_name_list(cns.get("allowed"), "allowed"),
            lambda: None if "blocked" not in cns else _check_name_list(cns["blocked"], "blocked"),
            lambda: None if "humanGates" not in cns else _check_name_list(cns["humanGates"], "humanGates"),
            lambda: None if "dataAccess" not in cns else _check_name_list(cns["dataAccess"], "dataAccess"),
            lambda: (
                None
                if "reversibleOnly" not in cns or isinstance(cns["reversibleOnly"], bool)
                else "reversibleOnly must be a boolean"
            ),
            lambda: None if "sandbox" not in cns or isinstance(cns["sandbox"], bool) else "sandbox must be a boolean",
            lambda: (
                None
                if _is_count(cns.get("maxDelegationDepth"))
                else "maxDelegationDepth must be a non-negative integer"
            ),
        )
        if problem is not None:
            return problem
        if "actionLimits" in cns:
            al = cns["actionLimits"]
            if not isinstance(al, dict):
                return "actionLimits must be an object"
            for entries, k in enumerate(al, start=1):
                if entries > MAX_LIST_ENTRIES:
                    return f"actionLimits has more than {MAX_LIST_ENTRIES} entries"
                if not _check_name(k) or k == "__proto__":
                    return "actionLimits keys must be capability names"
                if not _is_count(al[k]):
                    return f"actionLimits.{k} must be a non-negative integer"
        if "computeLimit" in cns:
            cl = cns["computeLimit"]
            if not isinstance(cl, dict):
                return "computeLimit must be an object"
            p = _only_keys(cl, _COMPUTE_KEYS, "computeLimit")
            if p is not None:
                return p
            for k in _COMPUTE_KEYS:
                if k in cl and not _is_count(cl[k]):
                    return f"computeLimit.{k} must be a non-negative integer"
        return None
    if kind == "model-budget":
        q: Any = cns.get("quality_threshold")
        return _first(
            lambda: _only_keys(cns, _MODEL_KEYS, "constraints"),
            lambda: None if _is_count(cns.get("token_budget")) else "token_budget must be a non-negative integer",
            lambda: _check_usd(cns.get("cost_budget_usd"), "cost_budget_usd"),
            lambda: None if _is_number(q) and 0 <= q <= 1 else "quality_threshold must be a number in 0..1",
            lambda: (
                None
                if isinstance(cns.get("task_type"), str) and cns["task_type"] in TASK_TYPES
                else f"task_type must be one of {', '.join(TASK_TYPES)}"
            ),
            lambda: None if _is_count(cns.get("expected_steps")) else "expected_steps must be a non-negative integer",
        )
    return "unknown kind"


def usd_micros(usd: Any) -> int:
    """Micros of a USD number already validated by ``constraints_problem``."""
    return parse_usd(usd)


# ---------------------------------------------------------------------------------------------------------------
# Narrowing


def _subset(child: Sequence[str], parent: Sequence[str]) -> str | None:
    for x in child:
        if x not in parent:
            return x
    return None


def _widened(message: str) -> tuple[str, str]:
    return ("ATTENUATION_WIDENED", message)


def _merchants_problem(parent: Mapping[str, Any], merchants: Sequence[str] | None) -> tuple[str, str] | None:
    if "allowedMerchants" not in parent:
        return None
    if merchants is None:
        return _widened("allowedMerchants: the parent restricts merchants, the child does not")
    extra = _subset(merchants, parent["allowedMerchants"])
    return None if extra is None else _widened(f"merchant {extra!r} is not allowed by the parent")


def narrowing_violation(
    parent_kind: str, parent: Mapping[str, Any], child_kind: str, child: Mapping[str, Any]
) -> tuple[str, str] | None:
    """``(reason, message)`` when ``child`` is wider than ``parent`` (both already valid), the kind transition is not
    allowed (``CHAIN_BROKEN``) or the parent allows no more delegation (``DEPTH_EXCEEDED``); None when within."""
    if child_kind not in CHILD_KINDS.get(parent_kind, ()):
        return ("CHAIN_BROKEN", f"a {parent_kind} mandate cannot be attenuated into a {child_kind} mandate")
    if child_kind == "cart":
        if usd_micros(child["spendLimitUsd"]) > usd_micros(parent["spendLimitUsd"]):
            return _widened(f"spendLimitUsd {child['spendLimitUsd']} exceeds the parent's {parent['spendLimitUsd']}")
        return _merchants_problem(parent, child.get("allowedMerchants"))
    if child_kind == "payment":
        if usd_micros(child["amountUsd"]) > usd_micros(parent["spendLimitUsd"]):
            return _widened(
                f"amountUsd {child['amountUsd']} exceeds the parent's spendLimitUsd {parent['spendLimitUsd']}"
            )
        return _merchants_problem(parent, [child["merchant"]])
    if child_kind == "task":
        return _task_narrowing(parent, child)
    if child_kind == "model-budget":
        return _model_budget_narrowing(parent, child)
    return ("CHAIN_BROKEN", "an intent mandate is always a root")


def _task_narrowing(p: Mapping[str, Any], c: Mapping[str, Any]) -> tuple[str, str] | None:
    if p["maxDelegationDepth"] < 1:
        return ("DEPTH_EXCEEDED", "the parent allows no further delegation (maxDelegationDepth 0)")
    if c["maxDelegationDepth"] > p["maxDelegationDepth"] - 1:
        return _widened(
            f"maxDelegationDepth {c['maxDelegationDepth']} must be below the parent's {p['maxDelegationDepth']}"
        )
    x = _subset(c["allowed"], p["allowed"])
    if x is not None:
        return _widened(f"allowed: {x!r} is not allowed by the parent")
    x = _subset(p.get("blocked", []), c.get("blocked", []))
    if x is not None:
        return _widened(f"blocked: the child unblocks {x!r}")
    x = _subset(p.get("humanGates", []), c.get("humanGates", []))
    if x is not None:
        return _widened(f"humanGates: the child drops the gate on {x!r}")
    if p.get("reversibleOnly") is True and c.get("reversibleOnly") is not True:
        return _widened("reversibleOnly: set on the parent, cleared on the child")
    if p.get("sandbox") is True and c.get("sandbox") is not True:
        return _widened("sandbox: set on the parent, cleared on the child")
    x = _subset(c.get("dataAccess", []), p.get("dataAccess", []))
    if x is not None:
        return _widened(f"dataAccess: scope {x!r} is not granted by the parent")
    pl = p.get("actionLimits", {})
    cl = c.get("actionLimits", {})
    for cap, limit in pl.items():
        cv = cl.get(cap)
        if cv is None or cv > limit:
            return _widened(f"actionLimits.{cap}: {'unlimited' if cv is None else cv} exceeds the parent's {limit}")
    pc = p.get("computeLimit", {})
    cc = c.get("computeLimit", {})
    for k in _COMPUTE_KEYS:
        pv = pc.get(k)
        cv = cc.get(k)
        if pv is not None and (cv is None or cv > pv):
            return _widened(f"computeLimit.{k}: {'unlimited' if cv is None else cv} exceeds the parent's {pv}")
    return None


def _model_budget_narrowing(p: Mapping[str, Any], c: Mapping[str, Any]) -> tuple[str, str] | None:
    if c["token_budget"] > p["token_budget"]:
        return _widened(f"token_budget {c['token_budget']} exceeds the parent's {p['token_budget']}")
    if usd_micros(c["cost_budget_usd"]) > usd_micros(p["cost_budget_usd"]):
        return _widened(f"cost_budget_usd {c['cost_budget_usd']} exceeds the parent's {p['cost_budget_usd']}")
    if c["quality_threshold"] < p["quality_threshold"]:
        return _widened(f"quality_threshold {c['quality_threshold']} is below the parent's {p['quality_threshold']}")
    if c["task_type"] != p["task_type"]:
        return _widened(f"task_type {c['task_type']} differs from the parent's {p['task_type']}")
    if c["expected_steps"] > p["expected_steps"]:
        return _widened(f"expected_steps {c['expected_steps']} exceeds the parent's {p['expected_steps']}")
    return None


def normalize_task(c: Mapping[str, Any]) -> dict[str, Any]:
    """Task constraints (wire form) with every optional member at its default, as written into an issued token."""
    cl = c.get("computeLimit") or {}
    compute: dict[str, Any] = {}
    if cl.get("llmTokens") is not None:
        compute["llmTokens"] = cl["llmTokens"]
    if cl.get("webRequests") is not None:
        compute["webRequests"] = cl["webRequests"]
    return {
        "allowed": list(c["allowed"]),
        "blocked": list(c.get("blocked") or []),
        "reversibleOnly": c.get("reversibleOnly", False) if c.get("reversibleOnly") is not None else False,
        "humanGates": list(c.get("humanGates") or []),
        "actionLimits": dict(c.get("actionLimits") or {}),
        "computeLimit": compute,
        "dataAccess": list(c.get("dataAccess") or []),
        "sandbox": c.get("sandbox") if c.get("sandbox") is not None else False,
        "maxDelegationDepth": c["maxDelegationDepth"],
    }

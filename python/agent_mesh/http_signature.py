"""mesh-sig: RFC 9421 HTTP Message Signatures as docs/protocol.md §10 profiles them.

A caller signs ``@method``, ``@target-uri`` and an RFC 9530 ``content-digest`` of the body with its ``did:mesh``
Ed25519 key; a verifier checks, in the order §10.3 gives, the fields, the time window, the digest, the key, the
signature, and only then records the nonce, so forged traffic cannot burn a caller's nonces. ``check_request``
stops before the nonce so a server can authorize the signer first; ``record_nonce`` then records it.

The RFC 8941 structured fields the profile needs (dictionaries, inner lists, items with parameters) are parsed and
serialized here: no package for them is available on the machines this runs on, and the subset is small.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import re
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence, Union
from urllib.parse import urlsplit, urlunsplit

from . import keys
from .did import normalize_did, verification_method_id
from .keys import PrivateKeyInput

MESH_SIG_TAG = "mesh-sig"
"""The ``tag`` parameter that marks a mesh-sig signature among any others on a request."""

REQUIRED_COMPONENTS = ("@method", "@target-uri", "content-digest")
"""The components every mesh-sig signature covers (more are allowed)."""

MESH_SIG_ALG = "ed25519"
DEFAULT_SIGNATURE_TTL_SECONDS = 60
DEFAULT_MAX_AGE_SECONDS = 300
DEFAULT_CLOCK_TOLERANCE_MS = 30_000

REFUSAL_CODES = frozenset(
    {
        "SIGNATURE_MISSING",
        "SIGNATURE_MALFORMED",
        "SIGNATURE_INVALID",
        "SIGNATURE_EXPIRED",
        "SIGNATURE_NOT_YET_VALID",
        "DIGEST_MISMATCH",
        "REPLAYED",
        "KEY_NOT_FOUND",
    }
)
"""Codes of a request that does not hold (HTTP 401)."""
UNAVAILABLE_CODES = frozenset({"RESOLVER_UNAVAILABLE", "NONCE_STORE_FULL", "NONCE_STORE_UNAVAILABLE"})
"""Codes of a verifier that cannot decide (HTTP 503)."""
THROTTLED_CODES = frozenset({"NONCE_QUOTA_EXCEEDED"})
"""Codes of a signer over its nonce quota (HTTP 429)."""


class HttpSignatureError(Exception):
    """A signed request was refused; ``code`` says why (docs/protocol.md §10.4)."""

    def __init__(self, code: str, message: str, retry_after_seconds: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after_seconds = retry_after_seconds

    @property
    def status(self) -> int:
        """The HTTP status an agent server answers this refusal with."""
        return 401 if self.code in REFUSAL_CODES else 429 if self.code in THROTTLED_CODES else 503


class CallerNotAllowed(Exception):
    """The keyid names a DID the verifier's ``is_allowed`` refuses (HTTP 403); its key was not looked up."""

    code = "CALLER_NOT_ALLOWED"

    def __init__(self, did: str) -> None:
        super().__init__(f"{did} is not an allowed caller")
        self.did = did
        self.message = str(self)


class KeyNotFound(Exception):
    """A key resolver knows no live key for the DID (unknown or revoked)."""


class ResolverUnavailable(Exception):
    """A key resolver could not answer."""


# --- keys -------------------------------------------------------------------------------------------------------


def _verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Ed25519 under the strict rule of docs/protocol.md §2; a key that is not 32 bytes verifies nothing."""
    try:
        return keys.verify(public_key, message, signature)
    except keys.MalformedKey:
        return False


# --- RFC 8941 structured fields ---------------------------------------------------------------------------------


class Token(str):
    """An sf-token (as opposed to an sf-string)."""


@dataclass(frozen=True)
class Item:
    """A bare item with its parameters (an ordered list of name, value pairs)."""

    value: Any
    params: tuple[tuple[str, Any], ...] = ()

    def param(self, name: str) -> Any:
        """The value of a parameter, or None."""
        for k, v in self.params:
            if k == name:
                return v
        return None


@dataclass(frozen=True)
class InnerList:
    """An inner list of items with its parameters."""

    items: tuple[Item, ...]
    params: tuple[tuple[str, Any], ...] = ()

    def param(self, name: str) -> Any:
        """The value of a parameter, or None."""
        for k, v in self.params:
            if k == name:
                return v
        return None


class StructuredFieldError(ValueError):
    """The text is not an RFC 8941 structured field of the expected kind."""


_KEY_START = re.compile(r"[a-z*]")
_KEY_CHARS = re.compile(r"[a-z0-9_\-.*]*")
_TOKEN = re.compile(r"[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*")
_B64 = re.compile(r"[A-Za-z0-9+/=]*")


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def skip_sp(self) -> None:
        while self.peek() == " ":
            self.i += 1

    def skip_ows(self) -> None:
        while self.peek() in (" ", "\t"):
            self.i += 1

    def key(self) -> str:
        if not _KEY_START.match(self.peek()):
            raise StructuredFieldError(f"a key at {self.i}")
        m = _KEY_CHARS.match(self.s, self.i + 1)
        assert m is not None
        out = self.s[self.i : m.end()]
        self.i = m.end()
        return out

    def params(self) -> tuple[tuple[str, Any], ...]:
        out: dict[str, Any] = {}
        while self.peek() == ";":
            self.i += 1
            self.skip_sp()
            k = self.key()
            v: Any = True
            if self.peek() == "=":
                self.i += 1
                v = self.bare()
            out[k] = v
        return tuple(out.items())

    def bare(self) -> Any:
        c = self.peek()
        if c == "-" or c.isdigit():
            return self.number()
        if c == '"':
            return self.string()
        if c == ":":
            return self.bytes_()
        if c == "?":
            return self.boolean()
        if c and (c.isalpha() or c == "*"):
            m = _TOKEN.match(self.s, self.i)
            assert m is not None
            self.i = m.end()
            return Token(m.group(0))
        raise StructuredFieldError(f"a bare item at {self.i}")

    def number(self) -> Any:
        m = re.compile(r"-?(\d+)(\.(\d+))?").match(self.s, self.i)
        if m is None:
            raise StructuredFieldError("a number")
        whole, frac = m.group(1), m.group(3)
        if m.group(2) is None:
            if len(whole) > 15:
                raise StructuredFieldError("an integer of more than 15 digits")
            self.i = m.end()
            return int(m.group(0))
        if len(whole) > 12 or frac is None or len(frac) > 3:
            raise StructuredFieldError("a decimal out of range")
        self.i = m.end()
        return float(m.group(0))

    def string(self) -> str:
        self.i += 1
        out = []
        while True:
            c = self.peek()
            if c == "":
                raise StructuredFieldError("an unterminated string")
            self.i += 1
            if c == "\\":
                n = self.peek()
                if n not in ('"', "\\"):
                    raise StructuredFieldError("a bad escape in a string")
                out.append(n)
                self.i += 1
            elif c == '"':
                return "".join(out)
            elif ord(c) < 0x20 or ord(c) > 0x7E:
                raise StructuredFieldError("a character outside VCHAR in a string")
            else:
                out.append(c)

    def bytes_(self) -> bytes:
        self.i += 1
        m = _B64.match(self.s, self.i)
        assert m is not None
        end = m.end()
        if self.s[end : end + 1] != ":":
            raise StructuredFieldError("an unterminated byte sequence")
        text = m.group(0)
        self.i = end + 1
        try:
            bare = text.rstrip("=")
            return base64.b64decode(bare + "=" * (-len(bare) % 4), validate=True)
        except ValueError as e:
            raise StructuredFieldError("a byte sequence that is not base64") from e

    def boolean(self) -> bool:
        v = self.s[self.i + 1 : self.i + 2]
        if v not in ("0", "1"):
            raise StructuredFieldError("a boolean")
        self.i += 2
        return v == "1"

    def item_or_inner(self) -> Item | InnerList:
        if self.peek() == "(":
            self.i += 1
            items: list[Item] = []
            while True:
                self.skip_sp()
                if self.peek() == ")":
                    self.i += 1
                    return InnerList(tuple(items), self.params())
                items.append(Item(self.bare(), self.params()))
                if self.peek() not in (" ", ")"):
                    raise StructuredFieldError("an inner list item not followed by a space or )")
        return Item(self.bare(), self.params())

    def dictionary(self) -> dict[str, Item | InnerList]:
        out: dict[str, Item | InnerList] = {}
        self.skip_sp()
        if self.peek() == "":
            return out
        while True:
            k = self.key()
            if self.peek() == "=":
                self.i += 1
                out[k] = self.item_or_inner()
            else:
                out[k] = Item(True, self.params())
            self.skip_ows()
            if self.peek() == "":
                return out
            if self.peek() != ",":
                raise StructuredFieldError(f"a comma at {self.i}")
            self.i += 1
            self.skip_ows()
            if self.peek() == "":
                raise StructuredFieldError("a trailing comma")


def parse_dictionary(text: str) -> dict[str, Item | InnerList]:
    """An RFC 8941 dictionary (later members of one name win, as the RFC says)."""
    return _Parser(text).dictionary()


def serialize_bare(value: Any) -> str:
    """An RFC 8941 bare item."""
    if isinstance(value, bool):
        return "?1" if value else "?0"
    if isinstance(value, Token):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = f"{round(value, 3):.3f}".rstrip("0")
        return text + "0" if text.endswith(".") else text
    if isinstance(value, str):
        if any(ord(c) < 0x20 or ord(c) > 0x7E for c in value):
            raise StructuredFieldError("a string with a character outside VCHAR")
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (bytes, bytearray)):
        return ":" + base64.b64encode(bytes(value)).decode("ascii") + ":"
    raise StructuredFieldError(f"cannot serialize {type(value).__name__}")


def serialize_params(params: Iterable[tuple[str, Any]]) -> str:
    """RFC 8941 parameters."""
    return "".join(f";{k}" if v is True else f";{k}={serialize_bare(v)}" for k, v in params)


def serialize_item(item: Item) -> str:
    """An RFC 8941 item with its parameters."""
    return serialize_bare(item.value) + serialize_params(item.params)


def serialize_inner_list(inner: InnerList) -> str:
    """An RFC 8941 inner list with its parameters."""
    return "(" + " ".join(serialize_item(i) for i in inner.items) + ")" + serialize_params(inner.params)


def serialize_dictionary(members: Mapping[str, Item | InnerList]) -> str:
    """An RFC 8941 dictionary."""
    parts = []
    for k, m in members.items():
        if isinstance(m, InnerList):
            parts.append(f"{k}={serialize_inner_list(m)}")
        elif m.value is True:
            parts.append(k + serialize_params(m.params))
        else:
            parts.append(f"{k}={serialize_item(m)}")
    return ", ".join(parts)


# --- the signature base -----------------------------------------------------------------------------------------

Headers = Mapping[str, Union[str, Sequence[str]]]

_FIELD_NAME = re.compile(r"^[a-z0-9!#$%&'*+.^_`|~-]+$")
_DERIVED = ("@method", "@target-uri", "@authority", "@scheme", "@path", "@query", "@request-target")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalize_url(url: str) -> str:
    """The URL as WHATWG ``URL`` serializes it, for the cases that matter here: lower-case scheme and host, no
    default port, ``/`` for an empty path, no fragment (``fetch`` never sends one)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    if parts.username is not None:
        cred = parts.username + (f":{parts.password}" if parts.password is not None else "")
        netloc = f"{cred}@{netloc}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def _field_value(headers: Headers, name: str) -> str | None:
    value = None
    for k, v in headers.items():
        if k.lower() == name:
            lines = [v] if isinstance(v, str) else list(v)
            value = (value or []) + lines
    if not value:
        return None
    return ", ".join(line.strip() for line in value)


def _derived(name: str, method: str, url: str) -> str:
    if name == "@method":
        return method
    if name == "@target-uri":
        return url
    parts = urlsplit(url)
    if name == "@authority":
        host = (parts.hostname or "").lower()
        if ":" in host:
            host = f"[{host}]"
        port = parts.port
        return host if port is None or _DEFAULT_PORTS.get(parts.scheme.lower()) == port else f"{host}:{port}"
    if name == "@scheme":
        return parts.scheme.lower()
    path = parts.path or "/"
    if name == "@path":
        return path
    if name == "@query":
        return f"?{parts.query}" if parts.query else "?"
    return path + (f"?{parts.query}" if parts.query else "")


def _covered_names(inner: InnerList) -> list[str]:
    names: list[str] = []
    for item in inner.items:
        name = item.value
        if (
            not isinstance(name, str)
            or isinstance(name, Token)
            or item.params
            or not (name in _DERIVED or _FIELD_NAME.fullmatch(name))
        ):
            raise HttpSignatureError("SIGNATURE_MALFORMED", f"unsupported covered component {serialize_item(item)}")
        if name in names:
            raise HttpSignatureError("SIGNATURE_MALFORMED", f'component "{name}" is covered twice')
        names.append(name)
    return names


def signature_base(method: str, url: str, headers: Headers, inner: InnerList) -> str:
    """The RFC 9421 §2.5 signature base of a request for one Signature-Input member. A covered field the request
    lacks is SIGNATURE_INVALID; a component this profile does not derive is SIGNATURE_MALFORMED."""
    lines = []
    for name in _covered_names(inner):
        value = _derived(name, method, url) if name.startswith("@") else _field_value(headers, name)
        if value is None:
            raise HttpSignatureError("SIGNATURE_INVALID", f"covered field {name} is absent from the request")
        if "\r" in value or "\n" in value:
            raise HttpSignatureError("SIGNATURE_MALFORMED", f"covered component {name} holds a line break")
        lines.append(f'"{name}": {value}')
    lines.append(f'"@signature-params": {serialize_inner_list(inner)}')
    return "\n".join(lines)


def content_digest(body: bytes) -> str:
    """The RFC 9530 ``Content-Digest`` of a body: ``sha-256=:<base64>:``."""
    return f"sha-256=:{base64.b64encode(hashlib.sha256(body).digest()).decode('ascii')}:"


def new_nonce() -> str:
    """128 CSPRNG bits, base64url without padding."""
    return base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode("ascii")


def sign_request(
    method: str,
    url: str,
    body: bytes,
    private_key: PrivateKeyInput,
    key_id: str,
    *,
    ttl_seconds: int = DEFAULT_SIGNATURE_TTL_SECONDS,
    nonce: str | None = None,
    label: str = "sig1",
    now: float | None = None,
) -> dict[str, str]:
    """Signs a request; returns the headers to add: ``content-digest``, ``signature-input``, ``signature``.
    ``now`` is epoch seconds (default: the system clock)."""
    if not isinstance(ttl_seconds, int) or isinstance(ttl_seconds, bool) or ttl_seconds <= 0:
        raise ValueError(f"ttl_seconds must be a positive whole number, got {ttl_seconds!r}")
    key = keys.load_private_key(private_key)
    created = int(time.time() if now is None else now)
    digest = content_digest(body)
    inner = InnerList(
        tuple(Item(n) for n in REQUIRED_COMPONENTS),
        (
            ("created", created),
            ("expires", created + ttl_seconds),
            ("nonce", nonce if nonce is not None else new_nonce()),
            ("alg", MESH_SIG_ALG),
            ("keyid", key_id),
            ("tag", MESH_SIG_TAG),
        ),
    )
    base = signature_base(method, normalize_url(url), {"content-digest": digest}, inner)
    signature = key.sign(base.encode("utf-8"))
    return {
        "content-digest": digest,
        "signature-input": serialize_dictionary({label: inner}),
        "signature": serialize_dictionary({label: Item(signature)}),
    }


# --- verification -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CheckedSignature:
    """A signature that verified; its nonce is still to be recorded until ``retain_until_ms``."""

    did: str
    key_id: str
    created: int
    nonce: str
    retain_until_ms: int


ResolveKey = Callable[[str], Union[bytes, Awaitable[bytes]]]
"""The current raw public key of a DID; raises ``KeyNotFound`` or ``ResolverUnavailable``."""


def _parse(value: str, name: str) -> dict[str, Item | InnerList]:
    try:
        return parse_dictionary(value)
    except StructuredFieldError as e:
        raise HttpSignatureError("SIGNATURE_MALFORMED", f"{name} is not a structured-field dictionary") from e


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


async def check_request(
    method: str,
    url: str,
    headers: Headers,
    body: bytes,
    resolve_key: ResolveKey,
    *,
    clock_tolerance_ms: int = DEFAULT_CLOCK_TOLERANCE_MS,
    max_age_seconds: int = DEFAULT_MAX_AGE_SECONDS,
    is_allowed: Callable[[str], bool] | None = None,
    now_ms: int | None = None,
) -> CheckedSignature:
    """Verifies the mesh-sig signature of a request (steps 1–7 of docs/protocol.md §10.3), not the nonce.
    ``url`` is the absolute target URI the verifier rebuilds from its own base URL. Raises ``HttpSignatureError``,
    or ``CallerNotAllowed`` when ``is_allowed`` refuses the keyid's DID (asked before the key is resolved)."""
    input_field = _field_value(headers, "signature-input")
    signature_field = _field_value(headers, "signature")
    if input_field is None or signature_field is None:
        raise HttpSignatureError("SIGNATURE_MISSING", "the request has no Signature and Signature-Input fields")
    inputs = _parse(input_field, "Signature-Input")
    signatures = _parse(signature_field, "Signature")

    picked = next(
        ((label, m) for label, m in inputs.items() if isinstance(m, InnerList) and m.param("tag") == MESH_SIG_TAG),
        None,
    )
    if picked is None:
        raise HttpSignatureError("SIGNATURE_MISSING", f'no signature with tag="{MESH_SIG_TAG}"')
    label, inner = picked
    sig_member = signatures.get(label)
    if not isinstance(sig_member, Item) or not isinstance(sig_member.value, bytes):
        raise HttpSignatureError("SIGNATURE_MALFORMED", f"Signature has no byte sequence for {label}")
    signature = sig_member.value

    names = _covered_names(inner)
    uncovered = [n for n in REQUIRED_COMPONENTS if n not in names]
    if uncovered:
        raise HttpSignatureError("SIGNATURE_MALFORMED", f"{label} does not cover {', '.join(uncovered)}")
    created, expires = inner.param("created"), inner.param("expires")
    nonce, alg, key_id = inner.param("nonce"), inner.param("alg"), inner.param("keyid")
    if not _is_int(created) or not _is_int(expires):
        raise HttpSignatureError("SIGNATURE_MALFORMED", "created and expires must be integers")
    if expires <= created:
        raise HttpSignatureError("SIGNATURE_MALFORMED", "expires must be after created")
    if not isinstance(nonce, str) or isinstance(nonce, Token) or not 1 <= len(nonce) <= 256:
        raise HttpSignatureError("SIGNATURE_MALFORMED", "nonce must be a string of 1 to 256 characters")
    if alg is not None and (alg != MESH_SIG_ALG or isinstance(alg, Token)):
        raise HttpSignatureError("SIGNATURE_MALFORMED", f'alg must be "{MESH_SIG_ALG}"')
    did = None
    if isinstance(key_id, str) and not isinstance(key_id, Token) and key_id.endswith("#key-1"):
        did = normalize_did(key_id[: -len("#key-1")])
    if did is None:
        raise HttpSignatureError("SIGNATURE_MALFORMED", "keyid must be a did:mesh verification method, <did>#key-1")
    if is_allowed is not None and not is_allowed(did):
        raise CallerNotAllowed(did)

    now = int(time.time() * 1000) if now_ms is None else now_ms
    if created * 1000 > now + clock_tolerance_ms:
        raise HttpSignatureError("SIGNATURE_NOT_YET_VALID", f"created {created * 1000 - now} ms in the future")
    valid_until = min(expires, created + max_age_seconds) * 1000
    if valid_until <= now - clock_tolerance_ms:
        raise HttpSignatureError(
            "SIGNATURE_EXPIRED",
            f"expired {now - valid_until} ms ago" if expires * 1000 == valid_until else f"created more than {max_age_seconds} s ago",
        )

    digest_field = _field_value(headers, "content-digest")
    if digest_field is None:
        raise HttpSignatureError("DIGEST_MISMATCH", "the request has no Content-Digest")
    sha = _parse(digest_field, "Content-Digest").get("sha-256")
    if not isinstance(sha, Item) or not isinstance(sha.value, bytes):
        raise HttpSignatureError("DIGEST_MISMATCH", "Content-Digest has no sha-256 byte sequence")
    if not secrets.compare_digest(sha.value, hashlib.sha256(body).digest()):
        raise HttpSignatureError("DIGEST_MISMATCH", "Content-Digest sha-256 is not the digest of the body")

    try:
        key = resolve_key(did)
        if inspect.isawaitable(key):
            key = await key
    except KeyNotFound as e:
        raise HttpSignatureError("KEY_NOT_FOUND", str(e) or f"no key for {did}") from e
    except ResolverUnavailable as e:
        raise HttpSignatureError("RESOLVER_UNAVAILABLE", str(e) or "the key resolver could not answer") from e
    except Exception as e:  # a resolver that throws cannot decide: fail closed, retryable
        raise HttpSignatureError("RESOLVER_UNAVAILABLE", f"the key resolver failed: {type(e).__name__}") from e

    base = signature_base(method, url, headers, inner)
    if not _verify(bytes(key), base.encode("utf-8"), signature):  # type: ignore[arg-type]
        raise HttpSignatureError("SIGNATURE_INVALID", f"{label} does not verify under the key of {did}")
    return CheckedSignature(did, key_id, created, nonce, valid_until + clock_tolerance_ms)


class SignatureNonceStore:
    """Bounded in-memory nonce store for mesh-sig (docs/protocol.md §6, §10.3 step 9): at most ``capacity`` live
    (DID, nonce) pairs, ``per_sender_quota`` per DID; a live nonce is never forgotten to make room."""

    def __init__(self, capacity: int = 100_000, per_sender_quota: int | None = None) -> None:
        self.capacity = capacity
        self.per_sender_quota = per_sender_quota if per_sender_quota is not None else max(1, capacity // 16)
        self._held: dict[tuple[str, str], int] = {}
        self._per_sender: dict[str, int] = {}
        self._lock = threading.Lock()

    def _sweep(self, now_ms: int) -> None:
        for pair, until in list(self._held.items()):
            if until <= now_ms:
                del self._held[pair]
                self._per_sender[pair[0]] -= 1
                if self._per_sender[pair[0]] == 0:
                    del self._per_sender[pair[0]]

    def record(self, sender: str, nonce: str, retain_until_ms: int, now_ms: int | None = None) -> None:
        """Records the pair until ``retain_until_ms``, or raises ``HttpSignatureError`` (REPLAYED, NONCE_QUOTA_EXCEEDED,
        NONCE_STORE_FULL)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            held = self._held.get((sender, nonce))
            if held is not None and held > now:
                raise HttpSignatureError("REPLAYED", f"nonce {nonce} from {sender} was already used")
            if held is not None or len(self._held) >= self.capacity or self._per_sender.get(sender, 0) >= self.per_sender_quota:
                self._sweep(now)
            if self._per_sender.get(sender, 0) >= self.per_sender_quota:
                earliest = min(u for (s, _), u in self._held.items() if s == sender)
                raise HttpSignatureError(
                    "NONCE_QUOTA_EXCEEDED",
                    f"{sender} holds its quota of {self.per_sender_quota} live nonces; retry when earlier signatures expire",
                    max(1, -(-(earliest - now) // 1000)),
                )
            if len(self._held) >= self.capacity:
                raise HttpSignatureError("NONCE_STORE_FULL", f"nonce store holds {self.capacity} live nonces")
            self._held[(sender, nonce)] = retain_until_ms
            self._per_sender[sender] = self._per_sender.get(sender, 0) + 1


def record_nonce(checked: CheckedSignature, store: Any, now_ms: int | None = None) -> None:
    """Records the nonce of a checked signature (step 9): REPLAYED if used, NONCE_QUOTA_EXCEEDED past the quota.
    ``store`` is a ``SignatureNonceStore`` or any object whose ``record(sender, nonce, retain_until_ms, now_ms)``
    raises an error with a ``code`` (``agent_mesh.nonce.NonceRegistry`` does)."""
    try:
        store.record(checked.did, checked.nonce, checked.retain_until_ms, now_ms)
    except HttpSignatureError:
        raise
    except Exception as e:
        code = getattr(e, "code", None)
        if code in ("REPLAYED", "NONCE_QUOTA_EXCEEDED", "NONCE_STORE_FULL"):
            raise HttpSignatureError(code, str(e), 1 if code == "NONCE_QUOTA_EXCEEDED" else None) from e
        raise HttpSignatureError("NONCE_STORE_UNAVAILABLE", f"the nonce store failed: {type(e).__name__}") from e


async def verify_request(
    method: str,
    url: str,
    headers: Headers,
    body: bytes,
    resolve_key: ResolveKey,
    store: SignatureNonceStore,
    **options: Any,
) -> CheckedSignature:
    """``check_request`` then ``record_nonce``."""
    checked = await check_request(method, url, headers, body, resolve_key, **options)
    record_nonce(checked, store, options.get("now_ms"))
    return checked

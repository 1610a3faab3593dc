"""The agent server: an async handler wrapped into an HTTP agent that speaks the TypeScript agent server's wire
format (docs/agent.md): ``POST /v1/run`` (JSON, or Server-Sent Events with ``Accept: text/event-stream`` and
reconnects by ``Last-Event-ID``), ``POST /v1/resume``, ``GET /health`` and the signed
``GET /.well-known/mesh-agent.json``; auth ``none``, ``bearer`` or ``mesh-sig`` (docs/protocol.md §10); memory
``none``, ``session`` or ``persistent``. Errors are ``{ _tag, error, code, correlationId }`` with the statuses of
docs/agent.md §8.

Why Starlette on uvicorn (the ``server`` extra): it is a small, well-kept ASGI stack whose streaming responses
notice a client that goes away without stopping the work behind them, which is exactly what a streamed run needs
(the run belongs to the server, not to the connection); uvicorn runs it on one asyncio loop we can start on a
socket we bound ourselves (port 0) and stop cleanly from tests. aiohttp would bring a second HTTP client beside
httpx; sse-starlette is not needed, since the frames must match the TypeScript server's byte for byte and are
written here in a few lines.

Not served here (the TypeScript server has them): human gates (a handler cannot pause, so ``/v1/resume`` always
answers 404 ``TASK_NOT_FOUND``), task-mandate guards and a handler's own cost report; commit tokens sign the
step's ``amountUsd`` (or ``"0"``). Replies kept for ``Idempotency-Key``, streamed runs and mesh-sig nonces live in
the process's memory, not in a database, so they do not survive a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import inspect
import json
import os
import logging
import re
import socket
import sqlite3
import threading
import time
import uuid
from collections import OrderedDict
from urllib.parse import urlsplit
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Literal, Mapping, Union

from . import http_signature as hs
from . import keys
from .did import did_hash, import_identity, normalize_did, verification_method_id
from .jcs import StrictJsonError, parse_json_strict
from .sse import CONTENT_TYPE as SSE_CONTENT_TYPE
from .sse import RESPONSE_HEADERS as SSE_HEADERS
from .sse import encode_event, is_event_stream

try:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route
except ImportError as e:  # pragma: no cover - the extra is missing
    raise ImportError("agent_mesh.server needs the server extra: pip install 'agent-mesh[server]'") from e

log = logging.getLogger("agent_mesh.server")

VERSION = "1.0.0"
MESH_PROTOCOL_VERSION = "1.0"
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
MAX_SESSIONS = 1000
MAX_TURNS = 100
MAX_RETAINED_RUNS = 1000
MAX_RUN_RETAINED_BYTES = 4 * 1024 * 1024
_SESSION_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_EVENT_ID = re.compile(r"^([0-9a-f-]{36}):(\d{1,9})$")
_CORRELATION_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")
_ROLES = ("system", "user", "assistant")
_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")

AuthMode = Literal["none", "bearer", "mesh-sig"]
MemoryMode = Literal["none", "session", "persistent"]
Handler = Callable[..., Union[Awaitable[str], AsyncIterator[str], str]]
"""``handler(message, session_id, history, context)`` → a reply (async function) or text chunks (async
generator); it may also take ``caller`` and ``capability`` keyword arguments."""


class AgentError(Exception):
    """An error answered on the wire as ``{ _tag, error, code, correlationId }`` plus ``message`` and extras."""

    def __init__(self, status: int, tag: str, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.tag = tag
        self.code = code
        self.message = message
        self.extra = extra

    def body(self, correlation_id: str) -> dict[str, Any]:
        """The wire object (the same in a JSON answer and in a stream's ``error`` event). The serving layer's own
        refusals (bad JSON, media type, size, route) carry the four wire fields only, as the TypeScript server's do."""
        own = {} if self.tag in _SERVING_TAGS else {"message": self.message, **self.extra}
        return {"_tag": self.tag, "code": self.code, **own, "error": self.message, "correlationId": correlation_id}


_SERVING_TAGS = frozenset({"InvalidJson", "UnsupportedMediaType", "PayloadTooLarge", "RouteNotFound", "InternalError"})


def _is_usd(value: Any) -> bool:
    from .money import parse_usd

    try:
        return isinstance(value, str) and parse_usd(value) >= 0
    except Exception:
        return False


def _bad_request(message: str) -> AgentError:
    return AgentError(400, "AgentBadRequest", "INVALID_REQUEST", message)


def _decode_error(message: str, path: list[Any] | None = None, kind: str = "Type") -> AgentError:
    # The TypeScript server answers a payload its schema refuses with HttpApi's own decode error, which lists the
    # issues ({ _tag, path, message }) beside its message.
    return AgentError(400, "HttpApiDecodeError", "INVALID_REQUEST", message, issues=[{"_tag": kind, "path": path or [], "message": message}])


def _unauthorized(code: str, message: str) -> AgentError:
    return AgentError(401, "AgentUnauthorized", code, message)


def _signature_error(e: hs.HttpSignatureError) -> AgentError:
    if e.code in hs.REFUSAL_CODES:
        return _unauthorized(e.code, e.message)
    if e.code in hs.THROTTLED_CODES:
        return AgentError(429, "AgentRateLimited", e.code, e.message, retryAfterSeconds=e.retry_after_seconds or 1)
    return AgentError(503, "AgentUnavailable", e.code, e.message)


@dataclass(frozen=True)
class Caller:
    """Who is calling, as authenticated: ``auth`` mode, ``did`` (mesh-sig only) and a stable ``principal``."""

    auth: str
    principal: str
    did: str | None = None


ANONYMOUS = Caller("none", "anonymous")


# --- memory -----------------------------------------------------------------------------------------------------


class _SessionMemory:
    """Sessions in memory: 1000 sessions, least recently used forgotten, 100 turns each."""

    mode = "session"

    def __init__(self) -> None:
        self._sessions: OrderedDict[tuple[str, str], list[dict[str, str]]] = OrderedDict()

    def load(self, owner: str, session_id: str) -> list[dict[str, str]]:
        turns = self._sessions.get((owner, session_id))
        if turns is None:
            return []
        self._sessions.move_to_end((owner, session_id))
        return list(turns)

    def append(self, owner: str, session_id: str, added: list[dict[str, str]]) -> None:
        turns = self._sessions.setdefault((owner, session_id), [])
        turns.extend(added)
        del turns[:-MAX_TURNS]
        self._sessions.move_to_end((owner, session_id))
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)


class _PersistentMemory:
    """Sessions in SQLite (stdlib ``sqlite3``): they survive restarts; the last 100 turns are loaded."""

    mode = "persistent"

    def __init__(self, path: str, agent: str) -> None:
        self._agent = agent
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock, self._db:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS mesh_memory (agent TEXT, owner TEXT, session_id TEXT, seq INTEGER PRIMARY KEY AUTOINCREMENT, role TEXT, content TEXT)"
            )

    def load(self, owner: str, session_id: str) -> list[dict[str, str]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT role, content FROM (SELECT seq, role, content FROM mesh_memory WHERE agent = ? AND owner = ? AND session_id = ? ORDER BY seq DESC LIMIT ?) ORDER BY seq",
                (self._agent, owner, session_id, MAX_TURNS),
            ).fetchall()
        return [{"role": r, "content": c} for r, c in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def append(self, owner: str, session_id: str, added: list[dict[str, str]]) -> None:
        with self._lock, self._db:
            self._db.executemany(
                "INSERT INTO mesh_memory (agent, owner, session_id, role, content) VALUES (?, ?, ?, ?, ?)",
                [(self._agent, owner, session_id, t["role"], t["content"]) for t in added],
            )


def _default_database(name: str) -> str:
    """``.mesh/agents/<name>.db``, where the TypeScript agent server keeps its database too."""
    import os

    os.makedirs(os.path.join(".mesh", "agents"), exist_ok=True)
    return os.path.join(".mesh", "agents", re.sub(r"[^A-Za-z0-9._-]", "-", name) + ".db")


# --- streamed runs ----------------------------------------------------------------------------------------------


@dataclass
class _Run:
    id: str
    principal: str
    frames: list[bytes] = field(default_factory=list)
    first: int = 0
    sent: int = 0
    bytes: int = 0
    done: bool = False
    finished_at: float = 0.0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def push(self, event: str, data: Any) -> None:
        frame = encode_event(json.dumps(data, ensure_ascii=False, separators=(",", ":")), event, f"{self.id}:{self.sent}").encode("utf-8")
        self.sent += 1
        self.frames.append(frame)
        self.bytes += len(frame)
        # A long run keeps only its latest events for reconnects.
        while self.bytes > MAX_RUN_RETAINED_BYTES and len(self.frames) > 1:
            self.bytes -= len(self.frames.pop(0))
            self.first += 1
        self.changed.set()


async def _follow(run: _Run, start: int) -> AsyncIterator[bytes]:
    nxt = start
    while True:
        if nxt < run.first:
            return
        while nxt < run.sent:
            yield run.frames[nxt - run.first]
            nxt += 1
        if run.done:
            return
        run.changed.clear()
        if nxt < run.sent or run.done:
            continue
        await run.changed.wait()


# --- Host and Origin (docs/protocol.md §12) ---------------------------------------------------------------------

_IPV4 = re.compile(r"^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$")
_CORS_METHODS = "GET, POST, PUT, PATCH, DELETE"


def _host_name(host: str) -> str:
    h = host.lower()
    if h.startswith("["):
        end = h.find("]")
        return h if end < 0 else h[: end + 1]
    colon = h.rfind(":")
    return h if colon < 0 else h[:colon]


class _HostGuard:
    """Which ``Host`` and ``Origin`` the server answers, as the TypeScript serving layer decides it: a DNS name must
    be ``localhost`` or listed (DNS rebinding), an IP literal or no Host passes; an ``Origin`` whose authority is not
    the request's own Host must be listed (``Origin: null`` never is); ``"*"`` accepts any."""

    def __init__(self, asgi: Any, agent: "AgentApp", allowed_hosts: Iterable[str], allowed_origins: Iterable[str]) -> None:
        self.asgi = asgi
        self.agent = agent
        hosts = [h.strip().lower() for h in allowed_hosts]
        self.any_host = "*" in hosts
        self.names = {"localhost"} | {h for h in hosts if h and h != "*" and _host_name(h) == h}
        self.exact = {h for h in hosts if h and h != "*" and _host_name(h) != h}
        origins = [o.strip().lower().rstrip("/") for o in allowed_origins]
        self.any_origin = "*" in origins
        self.origins = set(origins)

    def host_allowed(self, host: str | None) -> bool:
        if self.any_host or host is None:
            return True
        name = _host_name(host)
        return name in self.names or name.startswith("[") or bool(_IPV4.fullmatch(name)) or host.lower() in self.exact

    def origin(self, value: str, host: str | None) -> str:
        o = value.lower()
        sep = o.find("://")
        if sep > 0 and host is not None and o[sep + 3 :] == host.lower():
            return "same"
        return "allowed" if self.any_origin or o in self.origins else "refused"

    async def _refuse(self, send: Any, status: int, tag: str, message: str, code: str, cid: str) -> None:
        body = json.dumps({"_tag": tag, "error": message, "code": code, "correlationId": cid}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"x-correlation-id", cid.encode()),
                   (b"x-content-type-options", b"nosniff"), (b"cache-control", b"no-store")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.asgi(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        given = headers.get("x-correlation-id")
        cid = given if given is not None and _CORRELATION_ID.fullmatch(given) else str(uuid.uuid4())
        host = headers.get("host")
        if not self.host_allowed(host):
            return await self._refuse(send, 421, "HostNotAllowed", "this server does not answer for the requested host", "HOST_NOT_ALLOWED", cid)
        origin = headers.get("origin")
        if origin is None:
            return await self.asgi(scope, receive, send)
        verdict = self.origin(origin, host)
        if verdict == "refused":
            return await self._refuse(send, 403, "OriginNotAllowed", "cross-origin requests from this origin are not allowed", "ORIGIN_NOT_ALLOWED", cid)
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            out = [(b"access-control-allow-origin", origin.encode("latin-1")), (b"access-control-allow-methods", _CORS_METHODS.encode()),
                   (b"access-control-max-age", b"600"), (b"vary", b"Origin, Access-Control-Request-Method, Access-Control-Request-Headers"),
                   (b"x-content-type-options", b"nosniff"), (b"cache-control", b"no-store"), (b"content-length", b"0")]
            if "access-control-request-headers" in headers:
                out.append((b"access-control-allow-headers", headers["access-control-request-headers"].encode("latin-1")))
            await send({"type": "http.response.start", "status": 204, "headers": out})
            return await send({"type": "http.response.body", "body": b""})
        if verdict == "same":
            return await self.asgi(scope, receive, send)

        async def with_cors(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"access-control-allow-origin", origin.encode("latin-1")),
                                                  (b"access-control-expose-headers", b"x-correlation-id, retry-after"), (b"vary", b"Origin")]}
            await send(message)

        await self.asgi(scope, receive, with_cors)


# --- the application --------------------------------------------------------------------------------------------


@dataclass
class AgentOptions:
    """The server's settings (the keyword arguments of ``serve`` / ``create_app``)."""

    name: str
    did: str | None = None
    private_key: keys.PrivateKeyInput | None = None
    auth: AuthMode = "none"
    bearer_tokens: Iterable[str] | None = None
    verify_bearer: Callable[[str], Union[bool, Awaitable[bool]]] | None = None
    allowed_callers: Iterable[str] | None = None
    resolve_caller_key: Callable[[str], Any] | None = None
    hub_url: str | None = None
    memory: MemoryMode = "none"
    database: str | None = None
    public_url: str | None = None
    capabilities: Iterable[str] = ()
    clock_tolerance_ms: int = hs.DEFAULT_CLOCK_TOLERANCE_MS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    run_retention_seconds: float = 300.0
    max_live_runs: int = 256
    nonce_store: hs.SignatureNonceStore | None = None
    idempotency_ttl_seconds: float = 24 * 3600.0
    #: What one caller may hold for ``Idempotency-Key`` at once (live keys, bytes of stored replies), and the server
    #: in all; a new key beyond is 429 ``IDEMPOTENCY_QUOTA_EXCEEDED`` (a caller) or 503 ``STORE_UNAVAILABLE`` (all).
    idempotency_max_keys_per_caller: int = 1_000
    idempotency_max_bytes_per_caller: int = 8 * 1024 * 1024
    idempotency_max_keys: int = 10_000
    idempotency_max_bytes: int = 64 * 1024 * 1024
    allowed_hosts: Iterable[str] = ()
    allowed_origins: Iterable[str] = ()


class AgentConfigError(ValueError):
    """The options do not describe a server that can run (``INVALID_CONFIG``)."""

    code = "INVALID_CONFIG"


class AgentApp:
    """The ASGI application of one agent (``app.asgi``); ``serve`` runs it on uvicorn."""

    def __init__(self, handler: Handler, options: AgentOptions) -> None:
        o = options
        if o.auth not in ("none", "bearer", "mesh-sig"):
            raise AgentConfigError(f"auth must be none, bearer or mesh-sig, got {o.auth!r}")
        if o.memory not in ("none", "session", "persistent"):
            raise AgentConfigError(f"memory must be none, session or persistent, got {o.memory!r}")
        if o.auth == "bearer" and not o.bearer_tokens and o.verify_bearer is None:
            raise AgentConfigError("auth bearer needs bearer_tokens or verify_bearer")
        if o.auth == "mesh-sig" and o.resolve_caller_key is None and o.hub_url is None:
            raise AgentConfigError("auth mesh-sig needs resolve_caller_key or hub_url")
        self.handler = handler
        self.options = o
        wanted = o.did or "did:mesh:" + re.sub(r"[^a-z0-9:._-]", "-", o.name.lower())
        did = normalize_did(wanted)
        if did is None:
            raise AgentConfigError(f"{wanted} is not a did:mesh DID" + ("" if o.did else "; pass did"))
        if o.private_key is None:
            log.warning("agent %s: no private_key given; signing as %s with a fresh key nobody can resolve", o.name, did)
            self.identity = import_identity(did, keys.generate_private_key())
        else:
            self.identity = import_identity(did, o.private_key)
        self.did = did
        self.did_hash = did_hash(did)
        self.base_url: str | None = o.public_url.rstrip("/") if o.public_url else None
        self._tokens = [hashlib.sha256(t.encode()).digest() for t in (o.bearer_tokens or [])]
        self._allowed = None if o.allowed_callers is None else {normalize_did(d) or d for d in o.allowed_callers}
        self._nonces = o.nonce_store or hs.SignatureNonceStore()
        self._hub: Any = None
        self._idempotent: dict[tuple[str, str], tuple[str, asyncio.Task[tuple[int, str]], float]] = {}
        self._runs: dict[str, _Run] = {}
        self._started = time.monotonic()
        self._discovery: dict[str, Any] | None = None
        self._capabilities = list(o.capabilities)
        if o.memory == "session":
            self._memory: _SessionMemory | _PersistentMemory | None = _SessionMemory()
        elif o.memory == "persistent":
            self._memory = _PersistentMemory(o.database or _default_database(o.name), did)
        else:
            self._memory = None
        params = inspect.signature(handler).parameters
        self._extra = {n for n in ("caller", "capability") if n in params} | (
            {"caller", "capability"} if any(p.kind is p.VAR_KEYWORD for p in params.values()) else set()
        )
        self.starlette = Starlette(
            routes=[
                Route("/v1/run", self._run, methods=["POST"]),
                Route("/v1/resume", self._resume, methods=["POST"]),
                Route("/health", self._health, methods=["GET"]),
                Route("/.well-known/mesh-agent.json", self._discover, methods=["GET"]),
            ],
            lifespan=self._lifespan,
        )
        self.starlette.add_exception_handler(404, self._not_found)  # type: ignore[arg-type]
        self.starlette.add_exception_handler(405, self._not_found)  # type: ignore[arg-type]
        # The host of the public URL is one the server answers for, as the TypeScript agent server adds it.
        public_host = [urlsplit(self.base_url).netloc] if self.base_url else []
        self.guard = _HostGuard(self.starlette, self, [*o.allowed_hosts, *public_host], o.allowed_origins)
        self.asgi = self.guard

    @contextlib.asynccontextmanager
    async def _lifespan(self, _: Any) -> AsyncIterator[None]:
        yield
        # Streamed runs still in progress end with an error event; the hub client's connections are let go.
        for run in self._runs.values():
            if run.task is not None and not run.task.done():
                run.task.cancel()
        if self._hub is not None:
            await self._hub.aclose()
        if isinstance(self._memory, _PersistentMemory):
            self._memory.close()

    # --- helpers ---

    @staticmethod
    def _cid(request: Request) -> str:
        given = request.headers.get("x-correlation-id")
        return given if given is not None and _CORRELATION_ID.fullmatch(given) else str(uuid.uuid4())

    @staticmethod
    def _json(status: int, body: Any, cid: str, extra: Mapping[str, str] | None = None) -> Response:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        headers = {"x-correlation-id": cid, "x-content-type-options": "nosniff", "cache-control": "no-store", **(extra or {})}
        return Response(text, status_code=status, media_type="application/json", headers=headers)

    def _error(self, e: AgentError, cid: str) -> Response:
        extra = {}
        retry = e.extra.get("retryAfterSeconds")
        if isinstance(retry, (int, float)):
            extra["retry-after"] = str(max(0, int(-(-retry // 1))))
        return self._json(e.status, e.body(cid), cid, extra)

    async def _not_found(self, request: Request, exc: Exception) -> Response:
        cid = self._cid(request)
        body = {"_tag": "RouteNotFound", "error": f"no route for {request.method} {request.url.path}", "code": "ROUTE_NOT_FOUND", "correlationId": cid}
        return self._json(404, body, cid)

    def _url(self, request: Request) -> str:
        if self.base_url is None:
            server = request.scope.get("server") or ("127.0.0.1", 80)
            self.base_url = f"http://{server[0]}:{server[1]}"
        return self.base_url

    async def _body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.options.max_body_bytes:
            raise AgentError(413, "PayloadTooLarge", "PAYLOAD_TOO_LARGE", f"request body exceeds {self.options.max_body_bytes} bytes")
        chunks = bytearray()
        async for chunk in request.stream():
            chunks += chunk
            if len(chunks) > self.options.max_body_bytes:
                raise AgentError(413, "PayloadTooLarge", "PAYLOAD_TOO_LARGE", f"request body exceeds {self.options.max_body_bytes} bytes")
        return bytes(chunks)

    @staticmethod
    def _parse(request: Request, body: bytes) -> Any:
        if len(body) == 0:
            return None
        ctype = request.headers.get("content-type")
        if ctype is not None:
            t = ctype.split(";")[0].strip().lower()
            if not (t == "application/json" or (t.startswith("application/") and t.endswith("+json"))):
                raise AgentError(415, "UnsupportedMediaType", "UNSUPPORTED_MEDIA_TYPE", "request body must be application/json")
        try:
            return parse_json_strict(body)
        except StrictJsonError as e:
            raise AgentError(400, "InvalidJson", "INVALID_JSON", f"request body is not I-JSON: {e}") from e

    async def _resolve(self, did: str) -> bytes:
        o = self.options
        if o.resolve_caller_key is not None:
            got = o.resolve_caller_key(did)
            if inspect.isawaitable(got):
                got = await got
            if got is None:
                raise hs.KeyNotFound(f"no key for {did}")
            key = keys.b64decode(got) if isinstance(got, str) else bytes(got)
            # A small-order or non-canonical key is no usable key (docs/protocol.md §2): nothing may verify under it.
            if not keys.is_acceptable_public_key(key):
                raise hs.KeyNotFound(f"INVALID_PUBLIC_KEY: the key of {did} is not an acceptable Ed25519 public key")
            return key
        if self._hub is None:
            # Made on first use, inside the server's own event loop, which its connection pool belongs to.
            from .hub import AsyncHubClient

            self._hub = AsyncHubClient(o.hub_url)
        return await self._hub.resolve_key(did)

    async def _authenticate(self, request: Request, body: bytes) -> Caller:
        o = self.options
        if o.auth == "none":
            return ANONYMOUS
        if o.auth == "bearer":
            m = re.fullmatch(r"Bearer\s+(\S+)\s*", request.headers.get("authorization", ""), re.IGNORECASE)
            if m is None:
                raise _unauthorized("AUTH_REQUIRED", "send Authorization: Bearer <token>")
            digest = hashlib.sha256(m.group(1).encode()).digest()
            ok = False
            for d in self._tokens:  # every token compared, so timing says nothing about which matched
                ok = hmac.compare_digest(d, digest) or ok
            if not ok and o.verify_bearer is not None:
                try:
                    v = o.verify_bearer(m.group(1))
                    ok = (await v if inspect.isawaitable(v) else v) is True
                except Exception:
                    log.warning("verify_bearer raised; refusing the token")
                    ok = False
            if not ok:
                raise _unauthorized("INVALID_TOKEN", "the bearer token is not accepted")
            return Caller("bearer", f"bearer:{digest.hex()[:16]}")
        # mesh-sig: the URL the caller signed is this agent's own, never one built from the Host header.
        target = self._url(request) + request.scope.get("raw_path", request.url.path.encode()).decode("latin-1")
        query = request.scope.get("query_string", b"")
        if query:
            target += "?" + query.decode("latin-1")
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.scope["headers"]]
        grouped: dict[str, list[str]] = {}
        for k, v in headers:
            grouped.setdefault(k.lower(), []).append(v)
        try:
            checked = await hs.check_request(
                request.method,
                hs.normalize_url(target),
                grouped,
                body,
                self._resolve,
                clock_tolerance_ms=o.clock_tolerance_ms,
                is_allowed=None if self._allowed is None else (lambda did: did in self._allowed),  # type: ignore[operator]
            )
            hs.record_nonce(checked, self._nonces)
        except hs.CallerNotAllowed as e:
            raise AgentError(403, "AgentForbidden", "CALLER_NOT_ALLOWED", e.message) from e
        except hs.HttpSignatureError as e:
            raise _signature_error(e) from e
        return Caller("mesh-sig", checked.did, checked.did)

    def _decode_run(self, payload: Any) -> dict[str, Any]:
        if not isinstance(payload, dict):
            raise _decode_error("Expected the run request, an object")
        if "message" not in payload:
            raise _decode_error("is missing", ["message"], "Missing")
        if not isinstance(payload["message"], str):
            raise _decode_error("Expected string", ["message"])
        sid = payload.get("sessionId")
        if "sessionId" in payload and (not isinstance(sid, str) or not _SESSION_ID.fullmatch(sid)):
            raise _decode_error("Expected a string matching the pattern ^[A-Za-z0-9._:-]{1,128}$", ["sessionId"], "Refinement")
        history = payload.get("history")
        if "history" in payload:
            if not isinstance(history, list):
                raise _decode_error("Expected an array of { role, content }", ["history"])
            for i, t in enumerate(history):
                if not isinstance(t, dict) or t.get("role") not in _ROLES or not isinstance(t.get("content"), str):
                    raise _decode_error('Expected { role: "system" | "user" | "assistant", content: string }', ["history", i])
        if "context" in payload and not isinstance(payload["context"], dict):
            raise _decode_error("Expected an object", ["context"])
        if "mandate" in payload and not isinstance(payload["mandate"], str):
            raise _decode_error("Expected string", ["mandate"])
        cap = payload.get("capability")
        if "capability" in payload and (not isinstance(cap, str) or not 1 <= len(cap) <= 200):
            raise _decode_error("Expected a string of 1 to 200 characters", ["capability"], "Refinement")
        commit = payload.get("commit")
        if "commit" in payload and (
            not isinstance(commit, dict)
            or not all(isinstance(commit.get(k), str) and 1 <= len(commit[k]) <= 200 for k in ("sagaId", "step"))
        ):
            raise _decode_error("Expected { sagaId, step, amountUsd? }", ["commit"])
        if isinstance(commit, dict) and "amountUsd" in commit and not _is_usd(commit["amountUsd"]):
            raise _decode_error("a non-negative USD decimal with at most six decimals", ["commit", "amountUsd"], "Refinement")
        if cap is not None and self._capabilities and cap not in self._capabilities:
            raise _bad_request(f"capability {cap} is not one this agent declares")
        return payload

    @staticmethod
    def _grantor_of(token: str) -> str | None:
        try:
            segment = token.split(".")[1]
            payload = json.loads(keys.b64url_decode(segment))
            iss = payload.get("iss")
            return (normalize_did(iss) or iss) if isinstance(iss, str) else None
        except Exception:
            return None

    async def _call_handler(self, payload: dict[str, Any], caller: Caller, history: list[dict[str, str]], emit: Callable[[str], None]) -> str:
        kwargs: dict[str, Any] = {}
        if "caller" in self._extra:
            kwargs["caller"] = caller
        if "capability" in self._extra:
            kwargs["capability"] = payload.get("capability")
        try:
            out = self.handler(payload["message"], payload["_session"], history, payload.get("context") or {}, **kwargs)
            if inspect.isasyncgen(out) or hasattr(out, "__aiter__"):
                parts = []
                async for chunk in out:  # type: ignore[union-attr]
                    text = str(chunk)
                    parts.append(text)
                    emit(text)
                reply = "".join(parts)
            else:
                if inspect.isawaitable(out):
                    out = await out
                if not isinstance(out, str):
                    raise TypeError(f"the handler returned {type(out).__name__}, not str")
                reply = out
                # A reply given whole reaches a streaming caller as one chunk before `done`, as it does from a
                # TypeScript agent (docs/agent.md): a client that prints chunks prints it.
                emit(reply)
        except AgentError:
            raise
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the handler failed")
            raise AgentError(500, "HandlerFailed", "HANDLER_FAILED", "the agent's handler failed") from None
        if self._memory is not None:
            turns = [{"role": "user", "content": payload["message"]}, {"role": "assistant", "content": reply}]
            try:
                self._memory.append(caller.principal, payload["_session"], turns)
            except Exception as e:
                raise AgentError(503, "AgentUnavailable", "STORE_UNAVAILABLE", f"the memory store failed: {type(e).__name__}") from None
        return reply

    def _prune(self) -> None:
        now = time.monotonic()
        for run in list(self._runs.values()):
            if run.done and (now - run.finished_at > self.options.run_retention_seconds or len(self._runs) > MAX_RETAINED_RUNS):
                del self._runs[run.id]

    def _start_stream(self, payload: dict[str, Any], caller: Caller, history: list[dict[str, str]], cid: str) -> Response:
        self._prune()
        live = sum(1 for r in self._runs.values() if not r.done)
        if live >= self.options.max_live_runs:
            raise AgentError(503, "AgentUnavailable", "AGENT_BUSY", f"{live} streamed runs are in progress; retry shortly", retryAfterSeconds=1)
        run = _Run(str(uuid.uuid4()), caller.principal)
        self._runs[run.id] = run

        async def work() -> None:
            try:
                reply = await self._call_handler(payload, caller, history, lambda text: run.push("chunk", {"text": text}))
                run.push("done", self._reply(payload, reply))
            except AgentError as e:
                run.push("error", e.body(cid))
            except asyncio.CancelledError:
                run.push("error", AgentError(500, "HandlerFailed", "HANDLER_FAILED", "the server stopped").body(cid))
            finally:
                run.done = True
                run.finished_at = time.monotonic()
                run.changed.set()

        # The run belongs to the server: a client that goes away stops reading, not the work.
        run.task = asyncio.get_running_loop().create_task(work())
        return self._stream_response(run, 0, cid)

    @staticmethod
    def _stream_response(run: _Run, start: int, cid: str) -> Response:
        headers = {**SSE_HEADERS, "x-correlation-id": cid, "x-content-type-options": "nosniff"}
        return StreamingResponse(_follow(run, start), media_type=SSE_CONTENT_TYPE, headers=headers)

    def _reconnect(self, last_event_id: str, caller: Caller, cid: str) -> Response:
        m = _EVENT_ID.fullmatch(last_event_id)
        if m is None:
            raise _bad_request("Last-Event-ID is not an event id of this server")
        run = self._runs.get(m.group(1))
        if run is None:
            raise AgentError(404, "AgentNotFound", "RUN_NOT_FOUND", "that run is unknown or no longer kept")
        if run.principal != caller.principal:
            raise AgentError(403, "AgentForbidden", "NOT_RUN_OWNER", "that run was started by another caller")
        start = int(m.group(2)) + 1
        if start > run.sent:
            raise _bad_request("Last-Event-ID names an event this run has not sent")
        if start < run.first:
            raise AgentError(404, "AgentNotFound", "RUN_NOT_FOUND", f"events before {run.first} of that run are no longer kept")
        return self._stream_response(run, start, cid)

    # --- endpoints ---

    async def _run(self, request: Request) -> Response:
        cid = self._cid(request)
        try:
            body = await self._body(request)
            parsed = self._parse(request, body)
            caller = await self._authenticate(request, body)
            payload = self._decode_run(parsed)
            streaming = is_event_stream(request.headers.get("accept"))
            last = request.headers.get("last-event-id")
            if last is not None:
                if not streaming:
                    raise _bad_request("Last-Event-ID continues a stream: send Accept: text/event-stream")
                return self._reconnect(last, caller, cid)
            key = request.headers.get("idempotency-key")
            if key is not None:
                return await self._once(caller, key, parsed, streaming, lambda: self._plain(payload, caller), cid)
            return await self._answer(payload, caller, streaming, cid)
        except AgentError as e:
            return self._error(e, cid)

    async def _task(self, payload: dict[str, Any], caller: Caller) -> tuple[dict[str, Any], list[dict[str, str]]]:
        """The run a request starts: its mandate checked against the caller, its session's history loaded."""
        mandate = payload.get("mandate")
        if isinstance(mandate, str) and caller.did is not None:
            grantor = self._grantor_of(mandate)
            if grantor is not None and grantor != caller.did:
                raise AgentError(403, "AgentForbidden", "MANDATE_GRANTOR_MISMATCH", f"the mandate was granted by {grantor}, not by the caller {caller.did}")
        payload = {**payload, "_session": payload.get("sessionId") or str(uuid.uuid4())}
        if payload.get("commit") is not None:
            # The receipt names a capability: the one asked for, else the agent's only one; refused before any work.
            capability = payload.get("capability") or (self._capabilities[0] if len(self._capabilities) == 1 else None)
            if capability is None:
                raise _bad_request("a commit token names a capability: send capability (the agent declares none or several)")
            payload["_commit"], payload["_capability"] = payload["commit"], capability
        if self._memory is None:
            return payload, list(payload.get("history") or [])
        try:
            return payload, self._memory.load(caller.principal, payload["_session"])
        except Exception as e:
            raise AgentError(503, "AgentUnavailable", "STORE_UNAVAILABLE", f"the memory store failed: {type(e).__name__}") from None

    async def _answer(self, payload: dict[str, Any], caller: Caller, streaming: bool, cid: str) -> Response:
        if streaming:
            task, history = await self._task(payload, caller)
            return self._start_stream(task, caller, history, cid)
        status, text = await self._plain(payload, caller)
        return self._text(status, text, cid)

    async def _plain(self, payload: dict[str, Any], caller: Caller) -> tuple[int, str]:
        """A plain (unstreamed) run, as the status and the JSON text sent."""
        task, history = await self._task(payload, caller)
        reply = await self._call_handler(task, caller, history, lambda _: None)
        return 200, json.dumps(self._reply(task, reply), ensure_ascii=False, separators=(",", ":"))

    def _reply(self, task: dict[str, Any], message: str) -> dict[str, Any]:
        out: dict[str, Any] = {"message": message, "sessionId": task["_session"]}
        if task.get("_commit") is not None:
            out["commitToken"] = self._commit_token(task, message)
        return out

    def _commit_token(self, task: dict[str, Any], message: str) -> str:
        """The agent's signed receipt for the step (docs/protocol.md §13), over the reply's ``message``."""
        from . import commit_token
        from .timestamp import to_iso_string

        commit = task["_commit"]
        receipt = {
            "sagaId": commit["sagaId"],
            "step": commit["step"],
            "capability": task["_capability"],
            "amountUsd": commit.get("amountUsd", "0"),
            "resultDigest": commit_token.digest_result(message),
            "at": to_iso_string(int(time.time() * 1000)),
            "issuer": self.did,
        }
        try:
            return commit_token.sign(receipt, self.identity["private_key"])
        except Exception:
            log.exception("the commit token could not be signed")
            raise AgentError(500, "HandlerFailed", "HANDLER_FAILED", "the agent could not sign the commit token") from None

    @staticmethod
    def _text(status: int, text: str, cid: str, replayed: bool = False) -> Response:
        headers = {"x-correlation-id": cid, "x-content-type-options": "nosniff", "cache-control": "no-store"}
        if replayed:
            headers["idempotent-replayed"] = "true"
        return Response(text, status_code=status, media_type="application/json", headers=headers)

    @staticmethod
    def _stored_bytes(entry: tuple[str, asyncio.Task[tuple[int, str]], float]) -> int:
        task = entry[1]
        if not task.done() or task.cancelled() or task.exception() is not None:
            return 0
        return len(task.result()[1].encode("utf-8"))

    def _admit_key(self, principal: str, now: float) -> None:
        """Refuses a new key when its caller, or the server, holds its bound of live keys or stored reply bytes."""
        o = self.options
        mine = [e for (p, _), e in self._idempotent.items() if p == principal]
        if len(mine) >= o.idempotency_max_keys_per_caller or sum(map(self._stored_bytes, mine)) >= o.idempotency_max_bytes_per_caller:
            retry = max(1.0, min(e[2] for e in mine) - now)
            raise AgentError(
                429,
                "AgentRateLimited",
                "IDEMPOTENCY_QUOTA_EXCEEDED",
                f"this caller holds its quota of {o.idempotency_max_keys_per_caller} idempotency keys or "
                f"{o.idempotency_max_bytes_per_caller} bytes of stored replies; retry when earlier ones expire",
                retryAfterSeconds=retry,
            )
        everyone = list(self._idempotent.values())
        if len(everyone) >= o.idempotency_max_keys or sum(map(self._stored_bytes, everyone)) >= o.idempotency_max_bytes:
            raise AgentError(
                503,
                "AgentUnavailable",
                "STORE_UNAVAILABLE",
                f"the idempotency store holds {o.idempotency_max_keys} live keys or {o.idempotency_max_bytes} bytes of replies",
            )

    async def _once(self, caller: Caller, key: str, parsed: Any, streaming: bool, run: Callable[[], Awaitable[tuple[int, str]]], cid: str) -> Response:
        """``Idempotency-Key`` (docs/protocol.md §14): the first request with a key runs, later ones with the same
        request get its stored reply. Kept in this process's memory for ``idempotency_ttl_seconds``, bounded per caller
        and in all (keys and bytes of stored replies): a new key beyond a caller's bound is 429
        ``IDEMPOTENCY_QUOTA_EXCEEDED`` with ``Retry-After`` (when its earliest key expires), beyond the server's 503
        ``STORE_UNAVAILABLE``; a key already held is answered as before."""
        if caller.auth == "none":
            raise _bad_request("Idempotency-Key needs an authenticated caller, and this agent takes anyone's calls (auth none): serve it with auth=\"mesh-sig\" to take saga steps and keyed calls")
        if streaming:
            raise _bad_request("Idempotency-Key is not taken with Accept: text/event-stream")
        if not _IDEMPOTENCY_KEY.fullmatch(key):
            raise _bad_request("Idempotency-Key must be 1 to 200 visible ASCII characters")
        from .jcs import canonical_bytes

        digest = hashlib.sha256(canonical_bytes(parsed)).hexdigest()
        scope = (caller.principal, key)
        now = time.monotonic()
        for k, entry in list(self._idempotent.items()):
            if entry[2] <= now:
                del self._idempotent[k]
        held = self._idempotent.get(scope)
        if held is not None:
            if held[0] != digest:
                raise AgentError(409, "AgentConflict", "IDEMPOTENCY_KEY_REUSED", "this Idempotency-Key was sent with another request")
            status, text = await asyncio.shield(held[1])
            return self._text(status, text, cid, replayed=True)
        self._admit_key(caller.principal, now)
        # The run belongs to the server: a caller that goes away does not cancel it, and its reply is kept.
        future: asyncio.Task[tuple[int, str]] = asyncio.get_running_loop().create_task(run())
        self._idempotent[scope] = (digest, future, now + self.options.idempotency_ttl_seconds)
        try:
            status, text = await asyncio.shield(future)
        except BaseException:
            if future.done():
                self._idempotent.pop(scope, None)
            raise
        return self._text(status, text, cid)

    async def _resume(self, request: Request) -> Response:
        cid = self._cid(request)
        try:
            body = await self._body(request)
            parsed = self._parse(request, body)
            caller = await self._authenticate(request, body)
            if not isinstance(parsed, dict):
                raise _decode_error("Expected { taskId, approval }")
            for name in ("taskId", "approval"):
                if name not in parsed:
                    raise _decode_error("is missing", [name], "Missing")
            if not isinstance(parsed["taskId"], str):
                raise _decode_error("Expected string", ["taskId"])
            last = request.headers.get("last-event-id")
            if last is not None:
                if not is_event_stream(request.headers.get("accept")):
                    raise _bad_request("Last-Event-ID continues a stream: send Accept: text/event-stream")
                return self._reconnect(last, caller, cid)
            raise AgentError(404, "AgentNotFound", "TASK_NOT_FOUND", f"no paused task {parsed['taskId']}")
        except AgentError as e:
            return self._error(e, cid)

    async def _health(self, request: Request) -> Response:
        body = {"status": "ok", "name": self.options.name, "did": self.did, "version": VERSION, "uptimeSeconds": int(time.monotonic() - self._started)}
        return self._json(200, body, self._cid(request))

    async def _discover(self, request: Request) -> Response:
        if self._discovery is None:
            # Signed once, on first request, once the base URL is known; signing per request would let anyone spend CPU.
            from .proof import sign_message

            base = self._url(request)
            document = {
                "type": "MeshAgent",
                "name": self.options.name,
                "did": self.did,
                "didHash": self.did_hash,
                "publicKeyB64": self.identity["public_key_b64"],
                "meshProtocolVersion": MESH_PROTOCOL_VERSION,
                "version": VERSION,
                "endpoints": {"run": f"{base}/v1/run", "resume": f"{base}/v1/resume", "health": f"{base}/health"},
                "auth": [self.options.auth],
                "streaming": True,
                "memory": self.options.memory,
                "capabilities": list(self._capabilities),
            }
            self._discovery = sign_message(document, self.identity["private_key"], verification_method_id(self.did))
        return self._json(200, self._discovery, self._cid(request))


def create_app(handler: Handler, **options: Any) -> AgentApp:
    """The agent as an ASGI application (``.asgi``), for mounting under a server of your own."""
    return AgentApp(handler, AgentOptions(**options))


class RunningAgent:
    """A started agent server: ``url`` (the public URL callers use), ``listen_url`` (the address it listens on),
    ``did``, ``did_hash``; ``close()`` stops it (also as a context manager)."""

    def __init__(self, app: AgentApp, server: Any, thread: threading.Thread, url: str, listen_url: str) -> None:
        self.app = app
        self.url = url
        self.listen_url = listen_url
        self.did = app.did
        self.did_hash = app.did_hash
        self.identity = app.identity
        self._server = server
        self._thread = thread
        #: The hub's registration record, when started with ``register=True``.
        self.record: dict[str, Any] | None = None

    def close(self) -> None:
        """Stops accepting requests and ends the server thread."""
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def wait(self) -> None:
        """Blocks until the server stops (Ctrl-C in the main thread stops it)."""
        try:
            while self._thread.is_alive():
                self._thread.join(timeout=0.5)
        except KeyboardInterrupt:
            self.close()

    def __enter__(self) -> "RunningAgent":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


def serve(handler: Handler, *, name: str, host: str = "127.0.0.1", port: int = 0, **options: Any) -> RunningAgent:
    """Starts an agent server on uvicorn in a background thread and returns once it listens (``port=0`` picks a
    free port). Options: ``did``, ``private_key``, ``auth`` (none | bearer | mesh-sig), ``bearer_tokens``,
    ``verify_bearer``, ``allowed_callers``, ``resolve_caller_key``, ``hub_url``, ``memory`` (none | session |
    persistent), ``database``, ``public_url``, ``allowed_hosts``, ``allowed_origins``, ``capabilities``, ``clock_tolerance_ms``, ``max_body_bytes``,
    ``run_retention_seconds``, ``max_live_runs``, ``nonce_store``, ``idempotency_ttl_seconds``; ``identity`` (an
    identity file from ``mesh keygen``, or an identity object) gives it its DID and key, and ``register=True`` with
    ``hub_url`` and ``api_key`` registers it on that hub at its URL once it listens (``.record`` holds the hub's
    answer). Call ``.wait()`` to block on it."""
    import uvicorn

    identity = options.pop("identity", None)
    register = bool(options.pop("register", False))
    api_key = options.pop("api_key", None)
    if identity is not None:
        # An identity file path (``mesh keygen``), or an identity from ``generate_did`` / ``load_identity_file``.
        from .did import load_identity_file

        ident = load_identity_file(identity) if isinstance(identity, (str, os.PathLike)) else identity
        options.setdefault("did", ident["did"])
        options.setdefault("private_key", ident["private_key"])
    if register and (identity is None or options.get("hub_url") is None):
        raise AgentConfigError("register=True needs identity and hub_url")
    if options.get("auth") == "mesh-sig" and options.get("public_url") is None and host not in ("127.0.0.1", "localhost", "::1"):
        raise AgentConfigError("mesh-sig on a non-loopback host needs public_url: the URL callers sign")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}"
    if options.get("public_url") is None:
        options["public_url"] = url
    app = AgentApp(handler, AgentOptions(name=name, **options))
    config = uvicorn.Config(app.asgi, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"agent-{name}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"agent {name} did not start")
        time.sleep(0.01)
    running = RunningAgent(app, server, thread, app.base_url or url, url)
    if register:
        # Listed on the hub once it answers, so a caller resolving its didHash reaches a server that is up.
        from .hub import HubClient

        manifest = {"name": name, "meshProtocolVersion": "1.0", **({"capabilities": list(options["capabilities"])} if options.get("capabilities") else {})}
        running.record = HubClient(options["hub_url"], api_key).register_agent(manifest, running.url, identity=ident)
    return running

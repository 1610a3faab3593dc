"""Calling agents (docs/agent.md §7): a target that is a ``didHash`` is resolved through the hub (endpoint cached
30 s), one that starts with ``http://`` or ``https://`` is used as is; ``sign_as`` signs each request with mesh-sig
(docs/protocol.md §10), every attempt anew; a streamed reply is read as Server-Sent Events and, when the connection
drops before the final event, resumed with ``Last-Event-ID`` so no event is lost or repeated. Every reply, event and
error body is read as strict I-JSON. ``AgentClient`` is synchronous, ``AsyncAgentClient`` the same on asyncio, both
on httpx.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterator, Mapping, Union

import httpx

from . import http_signature as hs
from .did import verification_method_id
from .jcs import StrictJsonError, parse_json_strict
from .keys import PrivateKeyInput
from .sse import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_STREAM_BYTES, SseLimitExceeded, SseParser, is_event_stream

DEFAULT_MAX_REPLY_BYTES = 4 * 1024 * 1024
DEFAULT_RECONNECTS = 3
REPLY_TOO_LARGE = "REPLY_TOO_LARGE"


class AgentCallError(Exception):
    """A call failed: ``code`` is the agent's (or the hub's) code, or AGENT_NOT_FOUND, AGENT_UNREACHABLE,
    BAD_RESPONSE, SSE_LIMIT_EXCEEDED, REPLY_TOO_LARGE; ``status`` the HTTP status when there was an answer."""

    def __init__(self, code: str, message: str, status: int | None = None, correlation_id: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.correlation_id = correlation_id


SignAs = Union[Mapping[str, Any], tuple]
"""The caller's identity for mesh-sig: an identity dict (``did``, ``private_key``) or a ``(did, private_key)`` pair."""


def _signer(sign_as: SignAs) -> tuple[str, PrivateKeyInput]:
    if isinstance(sign_as, tuple):
        did, key = sign_as
    else:
        did, key = sign_as["did"], sign_as["private_key"]
    return str(did).lower(), key


def _from_error_body(body: Any, status: int | None) -> AgentCallError:
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        message = body["error"] if isinstance(body.get("error"), str) else body["code"]
        cid = body.get("correlationId") if isinstance(body.get("correlationId"), str) else None
        return AgentCallError(body["code"], message, status, cid)
    return AgentCallError("BAD_RESPONSE", f"unexpected answer{'' if status is None else f' (HTTP {status})'}", status)


def _json_of(text: bytes, status: int) -> Any:
    try:
        return parse_json_strict(text)
    except StrictJsonError as e:
        raise AgentCallError("BAD_RESPONSE", f"the agent answered HTTP {status} without JSON ({e})", status) from None


def _result_of(status: int, body: Any) -> dict[str, Any]:
    if status == 200 and isinstance(body, dict) and isinstance(body.get("message"), str) and isinstance(body.get("sessionId"), str):
        out = {"message": body["message"], "sessionId": body["sessionId"]}
        if isinstance(body.get("commitToken"), str):
            out["commitToken"] = body["commitToken"]
        return out
    if status == 202 and isinstance(body, dict) and body.get("status") == "approval_required":
        return body
    raise _from_error_body(body, status)


def _event_of(event: str, data: str) -> dict[str, Any] | None:
    try:
        value = parse_json_strict(data)
    except StrictJsonError as e:
        raise AgentCallError("BAD_RESPONSE", f"an event's data is not JSON ({e})") from None
    if not isinstance(value, dict):
        raise AgentCallError("BAD_RESPONSE", "an event's data is not an object")
    if event == "chunk":
        return {"type": "chunk", "text": str(value.get("text", ""))}
    if event == "done":
        out = {"type": "done", "message": str(value.get("message", "")), "sessionId": str(value.get("sessionId", ""))}
        if isinstance(value.get("commitToken"), str):
            out["commitToken"] = value["commitToken"]
        return out
    if event == "approval_required":
        return {"type": "approval_required", **value}
    if event == "error":
        raise _from_error_body(value, None)
    return None


@dataclass
class _Prepared:
    url: str
    body: bytes
    headers: dict[str, str]


def _payload(message: str, o: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"message": message}
    for py, wire in (("session_id", "sessionId"), ("history", "history"), ("context", "context"), ("mandate", "mandate"), ("capability", "capability"), ("commit", "commit")):
        if o.get(py) is not None:
            out[wire] = o[py]
    return out


def _prepare(url: str, payload: Any, o: Mapping[str, Any], headers: dict[str, str]) -> _Prepared:
    """The request as sent: JSON body, bearer, and a fresh mesh-sig signature over exactly these bytes."""
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    out = {"content-type": "application/json", **headers}
    if o.get("bearer_token") is not None:
        out["authorization"] = f"Bearer {o['bearer_token']}"
    if o.get("sign_as") is not None:
        did, key = _signer(o["sign_as"])
        out.update(hs.sign_request("POST", url, body, key, verification_method_id(did)))
    return _Prepared(url, body, out)


def _is_url(target: str) -> bool:
    return target.lower().startswith(("http://", "https://"))


_RUN_OPTIONS = ("session_id", "history", "context", "mandate", "sign_as", "bearer_token", "capability", "commit", "idempotency_key")


def _check_options(o: Mapping[str, Any]) -> None:
    unknown = set(o) - set(_RUN_OPTIONS)
    if unknown:
        raise TypeError(f"unexpected option(s): {', '.join(sorted(unknown))}")


class _Base:
    def __init__(
        self,
        hub_url: str | None,
        cache_ttl_seconds: float,
        reconnects: int,
        max_reply_bytes: int,
        max_event_bytes: int,
        max_stream_bytes: int,
    ) -> None:
        self.hub_url = (hub_url or os.environ.get("MESH_HUB_URL") or "").rstrip("/") or None
        self.cache_ttl_seconds = cache_ttl_seconds
        self.reconnects = reconnects
        self.max_reply_bytes = max_reply_bytes
        self.max_event_bytes = max_event_bytes
        self.max_stream_bytes = max_stream_bytes
        self._endpoints: dict[str, tuple[str, float]] = {}

    def _cached(self, target: str) -> str | None:
        if _is_url(target):
            return target.rstrip("/")
        hit = self._endpoints.get(target)
        return hit[0] if hit is not None and hit[1] > time.monotonic() else None

    def _resolved(self, target: str, response: httpx.Response, body: bytes) -> str:
        if response.status_code == 404:
            raise AgentCallError("AGENT_NOT_FOUND", f"no agent {target} in the hub", 404)
        record = _json_of(body, response.status_code)
        if response.status_code != 200 or not isinstance(record, dict) or not isinstance(record.get("endpointUrl"), str):
            raise _from_error_body(record, response.status_code)
        url = record["endpointUrl"].rstrip("/")
        self._endpoints[target] = (url, time.monotonic() + self.cache_ttl_seconds)
        return url

    def _no_hub(self, target: str) -> AgentCallError:
        return AgentCallError("AGENT_NOT_FOUND", f"no hub_url to resolve {target}")

    def _too_large(self, status: int) -> AgentCallError:
        return AgentCallError(REPLY_TOO_LARGE, f"the peer sent a reply larger than {self.max_reply_bytes} bytes", status)

    def _declared_too_large(self, response: httpx.Response) -> bool:
        n = response.headers.get("content-length")
        return n is not None and n.strip().isdigit() and int(n) > self.max_reply_bytes


class AgentClient(_Base):
    """Calls agents synchronously (httpx). ``hub_url`` (default ``$MESH_HUB_URL``) resolves ``didHash`` targets."""

    def __init__(
        self,
        hub_url: str | None = None,
        *,
        cache_ttl_seconds: float = 30.0,
        reconnects: int = DEFAULT_RECONNECTS,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_stream_bytes: int = DEFAULT_MAX_STREAM_BYTES,
        timeout: float = 60.0,
        http: httpx.Client | None = None,
    ) -> None:
        super().__init__(hub_url, cache_ttl_seconds, reconnects, max_reply_bytes, max_event_bytes, max_stream_bytes)
        self._http = http or httpx.Client(timeout=timeout)

    def close(self) -> None:
        """Closes the connection pool."""
        self._http.close()

    def __enter__(self) -> "AgentClient":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def _read(self, response: httpx.Response) -> bytes:
        if self._declared_too_large(response):
            response.close()
            raise self._too_large(response.status_code)
        out = bytearray()
        for chunk in response.iter_bytes():
            out += chunk
            if len(out) > self.max_reply_bytes:
                response.close()
                raise self._too_large(response.status_code)
        return bytes(out)

    def _send(self, method: str, url: str, body: bytes | None = None, headers: Mapping[str, str] | None = None) -> tuple[httpx.Response, bytes]:
        try:
            with self._http.stream(method, url, content=body, headers=headers) as r:
                return r, self._read(r)
        except httpx.HTTPError as e:
            raise AgentCallError("AGENT_UNREACHABLE", f"{type(e).__name__}: {e}") from None

    def endpoint_of(self, target: str) -> str:
        """The base URL of the agent with this ``didHash`` (or the URL itself)."""
        hit = self._cached(target)
        if hit is not None:
            return hit
        if self.hub_url is None:
            raise self._no_hub(target)
        r, body = self._send("GET", f"{self.hub_url}/v1/agents/{target}")
        return self._resolved(target, r, body)

    def call(self, target: str, message: str, **options: Any) -> dict[str, Any]:
        """Runs ``message`` on the agent → ``{ message, sessionId }`` (or the ``approval_required`` reply).
        Options: ``session_id``, ``history``, ``context``, ``mandate``, ``sign_as``, ``bearer_token``, ``capability``,
        ``commit``, ``idempotency_key``."""
        _check_options(options)
        headers = {"accept": "application/json"}
        if options.get("idempotency_key") is not None:
            headers["idempotency-key"] = options["idempotency_key"]
        p = _prepare(f"{self.endpoint_of(target)}/v1/run", _payload(message, options), options, headers)
        r, body = self._send("POST", p.url, p.body, p.headers)
        return _result_of(r.status_code, _json_of(body, r.status_code))

    def stream(self, target: str, message: str, **options: Any) -> Iterator[dict[str, Any]]:
        """Runs ``message`` and yields the reply's events: ``{type: "chunk", text}`` then ``{type: "done", message,
        sessionId}`` (or ``approval_required``); a dropped connection is resumed from the last event seen."""
        _check_options(options)
        url = f"{self.endpoint_of(target)}/v1/run"
        payload = _payload(message, options)
        last: str | None = None
        left = self.reconnects
        while True:
            headers = {"accept": "text/event-stream", **({} if last is None else {"last-event-id": last})}
            p = _prepare(url, payload, options, headers)  # signed afresh: a reconnect reusing a signature is REPLAYED
            dropped: Exception | None = None
            try:
                with self._http.stream("POST", p.url, content=p.body, headers=p.headers) as r:
                    if r.status_code != 200 or not is_event_stream(r.headers.get("content-type")):
                        raise _from_error_body(_json_or_none(self._read(r), r.status_code), r.status_code)
                    parser = SseParser(self.max_event_bytes, self.max_stream_bytes)
                    try:
                        for chunk in r.iter_bytes():
                            for e in parser.push(chunk):
                                if e.id is not None:
                                    last = e.id
                                out = _event_of(e.event, e.data)
                                if out is not None:
                                    yield out
                                if e.event in ("done", "approval_required", "error"):
                                    return
                    except SseLimitExceeded as e:
                        raise AgentCallError("SSE_LIMIT_EXCEEDED", str(e)) from None
            except httpx.HTTPError as e:
                dropped = e
            if left <= 0 or last is None:
                raise AgentCallError("AGENT_UNREACHABLE", f"the stream ended before its final event{'' if dropped is None else f' ({type(dropped).__name__})'}")
            left -= 1

    def discover(self, target: str) -> dict[str, Any]:
        """The agent's signed discovery document (``/.well-known/mesh-agent.json``)."""
        r, body = self._send("GET", f"{self.endpoint_of(target)}/.well-known/mesh-agent.json", headers={"accept": "application/json"})
        doc = _json_of(body, r.status_code)
        if r.status_code != 200 or not isinstance(doc, dict):
            raise _from_error_body(doc, r.status_code)
        return doc

    def resume(self, target: str, task_id: str, approval: Any, **options: Any) -> dict[str, Any]:
        """Resumes a task paused at a human gate with the grantor's signed approval."""
        p = _prepare(f"{self.endpoint_of(target)}/v1/resume", {"taskId": task_id, "approval": approval}, options, {"accept": "application/json"})
        r, body = self._send("POST", p.url, p.body, p.headers)
        return _result_of(r.status_code, _json_of(body, r.status_code))


def _json_or_none(body: bytes, status: int) -> Any:
    try:
        return _json_of(body, status)
    except AgentCallError:
        return None


class AsyncAgentClient(_Base):
    """``AgentClient`` on asyncio (httpx.AsyncClient)."""

    def __init__(
        self,
        hub_url: str | None = None,
        *,
        cache_ttl_seconds: float = 30.0,
        reconnects: int = DEFAULT_RECONNECTS,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_stream_bytes: int = DEFAULT_MAX_STREAM_BYTES,
        timeout: float = 60.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(hub_url, cache_ttl_seconds, reconnects, max_reply_bytes, max_event_bytes, max_stream_bytes)
        self._http = http or httpx.AsyncClient(timeout=timeout)

    async def aclose(self) -> None:
        """Closes the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncAgentClient":
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.aclose()

    async def _read(self, response: httpx.Response) -> bytes:
        if self._declared_too_large(response):
            await response.aclose()
            raise self._too_large(response.status_code)
        out = bytearray()
        async for chunk in response.aiter_bytes():
            out += chunk
            if len(out) > self.max_reply_bytes:
                await response.aclose()
                raise self._too_large(response.status_code)
        return bytes(out)

    async def _send(self, method: str, url: str, body: bytes | None = None, headers: Mapping[str, str] | None = None) -> tuple[httpx.Response, bytes]:
        try:
            async with self._http.stream(method, url, content=body, headers=headers) as r:
                return r, await self._read(r)
        except httpx.HTTPError as e:
            raise AgentCallError("AGENT_UNREACHABLE", f"{type(e).__name__}: {e}") from None

    async def endpoint_of(self, target: str) -> str:
        """The base URL of the agent with this ``didHash`` (or the URL itself)."""
        hit = self._cached(target)
        if hit is not None:
            return hit
        if self.hub_url is None:
            raise self._no_hub(target)
        r, body = await self._send("GET", f"{self.hub_url}/v1/agents/{target}")
        return self._resolved(target, r, body)

    async def call(self, target: str, message: str, **options: Any) -> dict[str, Any]:
        """``AgentClient.call`` on asyncio."""
        _check_options(options)
        headers = {"accept": "application/json"}
        if options.get("idempotency_key") is not None:
            headers["idempotency-key"] = options["idempotency_key"]
        p = _prepare(f"{await self.endpoint_of(target)}/v1/run", _payload(message, options), options, headers)
        r, body = await self._send("POST", p.url, p.body, p.headers)
        return _result_of(r.status_code, _json_of(body, r.status_code))

    async def stream(self, target: str, message: str, **options: Any) -> AsyncIterator[dict[str, Any]]:
        """``AgentClient.stream`` on asyncio (an async iterator of events)."""
        _check_options(options)
        url = f"{await self.endpoint_of(target)}/v1/run"
        payload = _payload(message, options)
        last: str | None = None
        left = self.reconnects
        while True:
            headers = {"accept": "text/event-stream", **({} if last is None else {"last-event-id": last})}
            p = _prepare(url, payload, options, headers)
            dropped: Exception | None = None
            try:
                async with self._http.stream("POST", p.url, content=p.body, headers=p.headers) as r:
                    if r.status_code != 200 or not is_event_stream(r.headers.get("content-type")):
                        raise _from_error_body(_json_or_none(await self._read(r), r.status_code), r.status_code)
                    parser = SseParser(self.max_event_bytes, self.max_stream_bytes)
                    try:
                        async for chunk in r.aiter_bytes():
                            for e in parser.push(chunk):
                                if e.id is not None:
                                    last = e.id
                                out = _event_of(e.event, e.data)
                                if out is not None:
                                    yield out
                                if e.event in ("done", "approval_required", "error"):
                                    return
                    except SseLimitExceeded as e:
                        raise AgentCallError("SSE_LIMIT_EXCEEDED", str(e)) from None
            except httpx.HTTPError as e:
                dropped = e
            if left <= 0 or last is None:
                raise AgentCallError("AGENT_UNREACHABLE", f"the stream ended before its final event{'' if dropped is None else f' ({type(dropped).__name__})'}")
            left -= 1

    async def discover(self, target: str) -> dict[str, Any]:
        """The agent's signed discovery document."""
        r, body = await self._send("GET", f"{await self.endpoint_of(target)}/.well-known/mesh-agent.json", headers={"accept": "application/json"})
        doc = _json_of(body, r.status_code)
        if r.status_code != 200 or not isinstance(doc, dict):
            raise _from_error_body(doc, r.status_code)
        return doc

    async def resume(self, target: str, task_id: str, approval: Any, **options: Any) -> dict[str, Any]:
        """Resumes a task paused at a human gate."""
        p = _prepare(f"{await self.endpoint_of(target)}/v1/resume", {"taskId": task_id, "approval": approval}, options, {"accept": "application/json"})
        r, body = await self._send("POST", p.url, p.body, p.headers)
        return _result_of(r.status_code, _json_of(body, r.status_code))


def call_agent(did_hash: str, message: str, session_id: str | None = None, sign_as: SignAs | None = None, *, hub_url: str | None = None, **options: Any) -> dict[str, Any]:
    """Calls the agent with this ``didHash`` (resolved through ``hub_url``, default ``$MESH_HUB_URL``), signing with
    mesh-sig when ``sign_as`` is given → ``{ message, sessionId }``."""
    with AgentClient(hub_url) as client:
        return client.call(did_hash, message, session_id=session_id, sign_as=sign_as, **options)


def stream_agent(did_hash: str, message: str, session_id: str | None = None, sign_as: SignAs | None = None, *, hub_url: str | None = None, **options: Any) -> Iterator[dict[str, Any]]:
    """``call_agent``, streamed: yields ``chunk`` events then ``done``."""
    with AgentClient(hub_url) as client:
        yield from client.stream(did_hash, message, session_id=session_id, sign_as=sign_as, **options)


async def acall_agent(did_hash: str, message: str, session_id: str | None = None, sign_as: SignAs | None = None, *, hub_url: str | None = None, **options: Any) -> dict[str, Any]:
    """``call_agent`` on asyncio."""
    async with AsyncAgentClient(hub_url) as client:
        return await client.call(did_hash, message, session_id=session_id, sign_as=sign_as, **options)


async def astream_agent(did_hash: str, message: str, session_id: str | None = None, sign_as: SignAs | None = None, *, hub_url: str | None = None, **options: Any) -> AsyncIterator[dict[str, Any]]:
    """``stream_agent`` on asyncio."""
    async with AsyncAgentClient(hub_url) as client:
        async for event in client.stream(did_hash, message, session_id=session_id, sign_as=sign_as, **options):
            yield event

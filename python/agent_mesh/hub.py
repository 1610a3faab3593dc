"""The hub client (docs/hub.md): registry (manifests, agents, MCP servers, skills, search, DIDs, mandate
revocation), API keys, the platform's agent-key challenge exchange, and the spending ledger, whose requests are
signed with mesh-sig by the pool mandate's grantee (docs/protocol.md §10) when an identity is given.

Writes that need proof of possession are signed here, so callers hand over the identity only: a registration is
signed by the key being registered, for the origin of the hub (``hub`` in the signed document), so a proof made for
one hub is refused by every other. MCP servers and skills registered without a DID get one generated here
(``did:mesh:mcp.<name>-<8 hex>``, ``did:mesh:skill.<name>-<8 hex>``), as the registry requires one.

Failures raise ``HubError`` with the hub's ``code`` and HTTP ``status``; a hub that cannot be reached is
``REGISTRY_UNREACHABLE``. ``REGISTRY_UNREACHABLE``, ``RATE_LIMITED`` and ``OVERLOADED`` are retried with backoff,
honouring ``retryAfterSeconds``; an answer that could not be read is not (the hub may have acted on it).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import quote, urlsplit

import httpx

from . import http_signature as hs
from . import keys
from .did import Identity, did_hash, extract_public_key, generate_did, verification_method_id
from .jcs import StrictJsonError, parse_json_strict
from .proof import sign_message
from .timestamp import now_ms, to_iso_string

WRITE_PROOF_PURPOSE = "authentication"
SKILL_TYPES = ("rag", "web-search", "memory", "code", "data", "custom")
_RETRYABLE = ("REGISTRY_UNREACHABLE", "RATE_LIMITED", "OVERLOADED")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class HubError(Exception):
    """A hub call failed: ``code`` (match on it), ``status`` (HTTP, when the hub answered), ``correlation_id``,
    ``retry_after_seconds`` (RATE_LIMITED, OVERLOADED), and ``tag`` (the error's ``_tag``)."""

    def __init__(
        self,
        code: str,
        message: str,
        status: int | None = None,
        correlation_id: str | None = None,
        retry_after_seconds: float | None = None,
        tag: str | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.correlation_id = correlation_id
        self.retry_after_seconds = retry_after_seconds
        self.tag = tag


def hub_origin(url: str) -> str:
    """The WHATWG ``origin`` of an http(s) URL: scheme, lower-case host, the port only when not the default."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    return f"{scheme}://{host}" if port is None or _DEFAULT_PORTS[scheme] == port else f"{scheme}://{host}:{port}"


def generated_did(prefix: str, name: str, namespace: str | None = None) -> str:
    """A fresh DID for an MCP server or skill: ``did:mesh:<prefix>.<slug of the name>-<8 random hex>``."""
    slug = re.sub(r"^-+|-+$", "", re.sub(r"[^a-z0-9]+", "-", name.lower()))[:40] or "x"
    return f"{'did:mesh:' if namespace is None else namespace + '.'}{prefix}.{slug}-{secrets.token_hex(4)}"


def _slug(name: str) -> str:
    return re.sub(r"^-+|-+$", "", re.sub(r"[^a-z0-9._-]+", "-", name.lower())) or "agent"


@dataclass
class _Call:
    """One request as it will be sent (before signing): method, path, JSON body, API key, ledger signer."""

    method: str
    path: str
    body: Any = None
    api_key: str | None = None
    signer: Identity | Mapping[str, Any] | None = None
    base: str | None = None
    expect: tuple[int, ...] = (200, 201, 204)


def _error_of(status: int, content: bytes) -> HubError:
    try:
        body = parse_json_strict(content) if content else None
    except StrictJsonError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        retry = body.get("retryAfterSeconds")
        return HubError(
            body["code"],
            body.get("error") if isinstance(body.get("error"), str) else body["code"],
            status,
            body.get("correlationId") if isinstance(body.get("correlationId"), str) else None,
            retry if isinstance(retry, (int, float)) else None,
            body.get("_tag") if isinstance(body.get("_tag"), str) else None,
        )
    return HubError("REGISTRY_UNREACHABLE", f"the hub answered HTTP {status} without an error body", status)


class _Core:
    """What the sync and async clients share: building requests, signing them, reading answers."""

    def __init__(
        self,
        hub_url: str | None,
        api_key: str | None,
        identity: Identity | Mapping[str, Any] | None,
        public_hub_url: str | None,
        platform_url: str | None,
        retries: int,
        base_delay_seconds: float,
        max_delay_seconds: float,
        key_cache_ttl_seconds: float,
    ) -> None:
        url = hub_url or os.environ.get("MESH_HUB_URL")
        if not url:
            raise ValueError("hub_url is required (or set MESH_HUB_URL)")
        self.hub_url = url.rstrip("/")
        self.api_key = api_key
        self.identity = identity
        self.platform_url = (platform_url or self.hub_url).rstrip("/")
        self.hub = hub_origin(public_hub_url or self.hub_url)
        self.retries = retries
        self.base_delay = base_delay_seconds
        self.max_delay = max_delay_seconds
        self.key_cache_ttl = key_cache_ttl_seconds
        self._keys: dict[str, tuple[bytes, float]] = {}
        # The last write proof's ``created``, in epoch milliseconds (``_prove``).
        self._last_created_ms = 0
        self._created_lock = threading.Lock()

    def _build(self, call: _Call) -> tuple[str, bytes | None, dict[str, str]]:
        url = f"{call.base or self.hub_url}{call.path}"
        body = None if call.body is None else json.dumps(call.body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        headers = {"accept": "application/json"}
        if body is not None:
            headers["content-type"] = "application/json"
        key = call.api_key or self.api_key
        if key is not None:
            headers["authorization"] = f"Bearer {key}"
        if call.signer is not None:
            # Each attempt is signed afresh: a retry with the same nonce would be REPLAYED.
            did = str(call.signer["did"])
            headers.update(hs.sign_request(call.method, url, body or b"", call.signer["private_key"], verification_method_id(did)))
        return url, body, headers

    @staticmethod
    def _read(call: _Call, status: int, content: bytes) -> Any:
        if status not in call.expect:
            raise _error_of(status, content)
        if status == 204 or not content:
            return None
        try:
            return parse_json_strict(content)
        except StrictJsonError as e:
            raise HubError("REGISTRY_UNREACHABLE", f"the hub answered HTTP {status} without JSON ({e})", status) from None

    def _delay(self, e: HubError, attempt: int) -> float:
        if e.code in ("RATE_LIMITED", "OVERLOADED") and e.retry_after_seconds is not None:
            return float(e.retry_after_seconds)
        return min(self.max_delay, self.base_delay * 2**attempt)

    # --- request builders (one per operation) ---

    def _prove(self, document: dict[str, Any], identity: Mapping[str, Any]) -> dict[str, Any]:
        # The hub applies a write proof once and Ed25519 signs deterministically, so two identical writes need
        # different ``created`` values: milliseconds, never the same one twice from this client (docs/hub.md).
        with self._created_lock:
            self._last_created_ms = max(now_ms(), self._last_created_ms + 1)
            created = to_iso_string(self._last_created_ms)
        signed = sign_message(document, identity["private_key"], verification_method_id(identity["did"]), proof_purpose=WRITE_PROOF_PURPOSE, created=created)
        return signed["proof"]

    def _registration(self, identity: Mapping[str, Any], cid: str, endpoint_url: str) -> dict[str, Any]:
        fields = {"did": identity["did"], "manifestCID": cid, "publicKeyB64": keys.public_key_b64(identity["private_key"]), "endpointUrl": endpoint_url}
        proof = self._prove({"type": "AgentRegistration", "hub": self.hub, **fields}, identity)
        return {**fields, "proof": proof}

    def _ledger_signer(self, identity: Mapping[str, Any] | None, api_key: str | None) -> Mapping[str, Any] | None:
        return identity if identity is not None else self.identity

    def _cached_key(self, did: str) -> bytes | None:
        hit = self._keys.get(did)
        return hit[0] if hit is not None and hit[1] > time.monotonic() else None

    def _key_of(self, did: str, answer: Any) -> bytes:
        try:
            key = extract_public_key(answer["document"], verification_method_id(did))
        except Exception as e:
            raise hs.KeyNotFound(f"no usable key for {did}: {e}") from e
        self._keys[did] = (key, time.monotonic() + self.key_cache_ttl)
        return key


def _page_params(limit: int | None, cursor: str | None) -> str:
    params = []
    if limit is not None:
        params.append(f"limit={int(limit)}")
    if cursor is not None:
        params.append(f"cursor={quote(cursor, safe='')}")
    return "" if not params else "?" + "&".join(params)


def _mcp_body(name: str, endpoint_url: str, tools: list[Any], did: str | None) -> dict[str, Any]:
    return {"name": name, "endpointUrl": endpoint_url, "tools": list(tools), "did": did or generated_did("mcp", name)}


def _skill_body(name: str, skill_type: str | None, did: str | None) -> dict[str, Any]:
    if skill_type is not None and skill_type not in SKILL_TYPES:
        raise ValueError(f"skill_type must be one of {', '.join(SKILL_TYPES)}")
    return {"name": name, **({} if skill_type is None else {"skillType": skill_type}), "did": did or generated_did("skill", name)}


def _identity_for(manifest: Mapping[str, Any], identity: Mapping[str, Any] | None) -> tuple[Mapping[str, Any], bool]:
    if identity is not None:
        return identity, False
    name = manifest.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("register_agent without identity needs a manifest name to make a DID from")
    return generate_did(_slug(name)), True


class HubClient(_Core):
    """A synchronous hub client (httpx). ``hub_url`` defaults to ``$MESH_HUB_URL``; ``api_key`` and ``identity``
    are defaults for the calls that take them."""

    def __init__(
        self,
        hub_url: str | None = None,
        api_key: str | None = None,
        *,
        identity: Identity | Mapping[str, Any] | None = None,
        public_hub_url: str | None = None,
        platform_url: str | None = None,
        retries: int = 4,
        base_delay_seconds: float = 0.2,
        max_delay_seconds: float = 10.0,
        key_cache_ttl_seconds: float = 30.0,
        timeout: float = 30.0,
        http: httpx.Client | None = None,
    ) -> None:
        super().__init__(hub_url, api_key, identity, public_hub_url, platform_url, retries, base_delay_seconds, max_delay_seconds, key_cache_ttl_seconds)
        self._http = http or httpx.Client(timeout=timeout)

    def close(self) -> None:
        """Closes the connection pool."""
        self._http.close()

    def __enter__(self) -> "HubClient":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def _do(self, call: _Call) -> Any:
        attempt = 0
        while True:
            url, body, headers = self._build(call)
            try:
                r = self._http.request(call.method, url, content=body, headers=headers)
                return self._read(call, r.status_code, r.content)
            except httpx.ConnectError as e:
                error = HubError("REGISTRY_UNREACHABLE", f"the hub could not be reached: {e}")
            except httpx.HTTPError as e:
                raise HubError("REGISTRY_UNREACHABLE", f"the hub's answer could not be read: {e}") from None
            except HubError as e:
                if e.code not in _RETRYABLE:
                    raise
                error = e
            if attempt >= self.retries:
                raise error
            time.sleep(self._delay(error, attempt))
            attempt += 1

    # registry
    def pin_manifest(self, manifest: Mapping[str, Any], api_key: str | None = None) -> str:
        """Pins a manifest; its CID."""
        return self._do(_Call("POST", "/v1/manifests", dict(manifest), api_key))["cid"]

    def get_manifest(self, cid: str) -> Any:
        """A pinned manifest."""
        return self._do(_Call("GET", f"/v1/manifests/{quote(cid, safe='')}"))

    def register_agent(self, manifest: Mapping[str, Any], endpoint_url: str, api_key: str | None = None, *, identity: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Pins the manifest, then registers the identity's DID and key at ``endpoint_url``, with a proof by that
        key → the record (``didHash``, ``keyVersion``, …). Without an identity (here or on the client) one is
        generated from the manifest's name and returned in the record as ``identity``: keep it."""
        who, generated = _identity_for(manifest, identity or self.identity)
        cid = self.pin_manifest(manifest, api_key)
        record = self._do(_Call("POST", "/v1/agents", self._registration(who, cid, endpoint_url), api_key))
        return {**record, "identity": who} if generated else record

    def resolve_agent(self, did_hash: str) -> dict[str, Any]:
        """The agent's record (endpoint, key, key version, DID document)."""
        return self._do(_Call("GET", f"/v1/agents/{quote(did_hash, safe='')}"))

    def update_agent(
        self,
        did_hash: str,
        *,
        endpoint_url: str | None = None,
        manifest_cid: str | None = None,
        identity: Mapping[str, Any] | None = None,
        api_key: str | None = None,
    ) -> dict[str, Any]:
        """Changes the endpoint or manifest, signed by the agent's current key for the key version the registry
        holds now (only the admin credential may go without ``identity``)."""
        patch = {k: v for k, v in (("endpointUrl", endpoint_url), ("manifestCID", manifest_cid)) if v is not None}
        who = identity or self._own(did_hash)
        body: dict[str, Any] = dict(patch)
        if who is not None:
            current = self.resolve_agent(did_hash)
            body["proof"] = self._prove({"type": "AgentUpdate", "hub": self.hub, "did": current["did"], "keyVersion": current["keyVersion"], **patch}, who)
        return self._do(_Call("PATCH", f"/v1/agents/{quote(did_hash, safe='')}", body, api_key))

    def rotate_agent_key(self, new_identity: Mapping[str, Any], *, identity: Mapping[str, Any] | None = None, api_key: str | None = None) -> dict[str, Any]:
        """Rotates the DID of ``new_identity`` to its key, signed by the current key (``identity``; only the admin
        may go without) and by the new key → the record with ``keyVersion + 1``."""
        h = did_hash(new_identity["did"])
        current = self.resolve_agent(h)
        public = keys.public_key_b64(new_identity["private_key"])
        document = {"type": "AgentKeyRotation", "hub": self.hub, "did": current["did"], "keyVersion": current["keyVersion"], "publicKeyB64": public}
        body: dict[str, Any] = {"publicKeyB64": public, "newKeyProof": self._prove(document, new_identity)}
        if identity is not None:
            body["proof"] = self._prove(document, identity)
        return self._do(_Call("POST", f"/v1/agents/{quote(h, safe='')}/key", body, api_key))

    def delete_agent(self, did_hash: str, *, identity: Mapping[str, Any] | None = None, api_key: str | None = None) -> None:
        """Deletes the agent (a tombstone keeps its DID, last key and key version), signed by its current key."""
        who = identity or self._own(did_hash)
        body: dict[str, Any] = {}
        if who is not None:
            current = self.resolve_agent(did_hash)
            body["proof"] = self._prove({"type": "AgentDeletion", "hub": self.hub, "did": current["did"], "keyVersion": current["keyVersion"]}, who)
        self._do(_Call("DELETE", f"/v1/agents/{quote(did_hash, safe='')}", body, api_key))

    def _own(self, h: str) -> Mapping[str, Any] | None:
        return self.identity if self.identity is not None and did_hash(str(self.identity["did"])) == h else None

    def list_agents_page(self, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        """One page ``{ items, nextCursor }`` in didHash order."""
        return self._do(_Call("GET", f"/v1/agents{_page_params(limit, cursor)}"))

    def list_agents(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The first ``limit`` agents (at most 200 a page)."""
        return self.list_agents_page(limit)["items"]

    def register_mcp(self, name: str, endpoint_url: str, tools: list[Any], api_key: str | None = None, *, did: str | None = None) -> dict[str, Any]:
        """Registers an MCP server (tools as names or ``{ name, inputSchema }``); without ``did`` one is generated."""
        return self._do(_Call("POST", "/v1/mcp", _mcp_body(name, endpoint_url, tools, did), api_key))

    def resolve_mcp(self, did_hash: str) -> dict[str, Any]:
        """An MCP server's record."""
        return self._do(_Call("GET", f"/v1/mcp/{quote(did_hash, safe='')}"))

    def list_mcp(self, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        """A page of MCP servers."""
        return self._do(_Call("GET", f"/v1/mcp{_page_params(limit, cursor)}"))

    def register_skill(self, name: str, skill_type: str | None = None, api_key: str | None = None, *, did: str | None = None) -> dict[str, Any]:
        """Registers a skill (``skill_type`` one of rag, web-search, memory, code, data, custom; the hub's default is
        custom); without ``did`` one is generated."""
        return self._do(_Call("POST", "/v1/skills", _skill_body(name, skill_type, did), api_key))

    def resolve_skill(self, did_hash: str) -> dict[str, Any]:
        """A skill's record."""
        return self._do(_Call("GET", f"/v1/skills/{quote(did_hash, safe='')}"))

    def search(self, q: str, limit: int | None = None) -> list[dict[str, Any]]:
        """Registry search hits ``{ kind, did, didHash, name }``."""
        suffix = "" if limit is None else f"&limit={int(limit)}"
        return self._do(_Call("GET", f"/v1/search?q={quote(q, safe='')}{suffix}"))["items"]

    def resolve_did(self, did: str) -> dict[str, Any]:
        """``{ did, keyVersion, document }``."""
        return self._do(_Call("GET", f"/v1/dids/{quote(did, safe='')}"))

    def resolve_key(self, did: str) -> bytes:
        """The DID's current raw public key (cached); ``KeyNotFound`` / ``ResolverUnavailable`` as mesh-sig wants."""
        hit = self._cached_key(did)
        if hit is not None:
            return hit
        try:
            answer = self.resolve_did(did)
        except HubError as e:
            if e.code in ("NOT_FOUND", "INVALID_DID"):
                raise hs.KeyNotFound(e.message) from None
            raise hs.ResolverUnavailable(e.message) from None
        return self._key_of(did, answer)

    def revoke_mandate(self, jti: str, identity: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Revokes a mandate the identity granted (a signed request)."""
        who = identity or self.identity
        if who is None:
            raise ValueError("revoke_mandate needs the grantor's identity")
        signed = sign_message({"type": "MandateRevocation", "jti": jti, "grantor": who["did"]}, who["private_key"], verification_method_id(who["did"]))
        return self._do(_Call("POST", "/v1/mandates/revocations", signed))

    def is_mandate_revoked(self, jti: str, grantor: str) -> bool:
        """Whether the grantor revoked the mandate ``jti``."""
        return self._do(_Call("GET", f"/v1/mandates/revocations/{quote(jti, safe='')}?grantor={quote(grantor, safe='')}"))["revoked"]

    # keys and platform
    def create_api_key(self, owner: str, label: str | None = None, api_key: str | None = None) -> dict[str, Any]:
        """Creates an API key (admin credential) → ``{ id, apiKey, owner, kind, label }``."""
        return self._do(_Call("POST", "/keys", {"owner": owner, **({} if label is None else {"label": label})}, api_key))

    def revoke_api_key(self, key_id: str, api_key: str | None = None) -> None:
        """Revokes an API key."""
        self._do(_Call("DELETE", f"/keys/{quote(key_id, safe='')}", None, api_key))

    def status(self) -> dict[str, Any]:
        """The platform's ``/api/status``."""
        return self._do(_Call("GET", "/api/status", base=self.platform_url))

    def request_agent_key(self, identity: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The challenge exchange: a challenge bound to the DID and key, signed (UTF-8, Ed25519) → ``{ apiKey, keyId, did }``."""
        who = identity or self.identity
        if who is None:
            raise ValueError("request_agent_key needs an identity")
        pub = keys.public_key_b64(who["private_key"])
        ch = self._do(_Call("POST", "/api/agent-keys/challenge", {"did": who["did"], "publicKeyB64": pub}, base=self.platform_url))
        signature = keys.b64encode(keys.sign(who["private_key"], ch["challenge"].encode("utf-8")))
        return self._do(_Call("POST", "/api/agent-keys", {"challengeId": ch["challengeId"], "did": who["did"], "signature": signature}, base=self.platform_url))

    # spending ledger
    def open_pool(self, mandate: str, *, identity: Mapping[str, Any] | None = None, api_key: str | None = None) -> dict[str, Any]:
        """Opens the pool of a parent mandate (its grantee only: ``identity`` signs the request, or an agent API key bound to it)."""
        return self._do(_Call("POST", "/v1/spending/pools", {"mandate": mandate}, api_key, self._ledger_signer(identity, api_key)))

    def get_pool(self, pool_id: str, *, identity: Mapping[str, Any] | None = None, api_key: str | None = None) -> dict[str, Any]:
        """A pool (its mandate's grantee only)."""
        return self._do(_Call("GET", f"/v1/spending/pools/{quote(pool_id, safe='')}", None, api_key, self._ledger_signer(identity, api_key)))

    def allocate(self, pool_id: str, child_mandate: str, idempotency_key: str, *, identity: Mapping[str, Any] | None = None, api_key: str | None = None) -> dict[str, Any]:
        """Allocates a child mandate from a pool; 409 ``BUDGET_EXHAUSTED`` past what remains."""
        body = {"childMandate": child_mandate, "idempotencyKey": idempotency_key}
        return self._do(_Call("POST", f"/v1/spending/pools/{quote(pool_id, safe='')}/allocations", body, api_key, self._ledger_signer(identity, api_key)))

    def release(self, allocation_id: str, used_usd: float | int | str, commit_token: str | None = None, *, identity: Mapping[str, Any] | None = None, api_key: str | None = None) -> dict[str, Any]:
        """Releases an allocation once (the unused part returns to the pool) → ``{ allocation, pool }``; ``used_usd`` is a number or a decimal string."""
        body = {"usedUsd": used_usd, **({} if commit_token is None else {"commitToken": commit_token})}
        return self._do(_Call("POST", f"/v1/spending/allocations/{quote(allocation_id, safe='')}/release", body, api_key, self._ledger_signer(identity, api_key)))

    def list_allocations(self, pool_id: str, *, identity: Mapping[str, Any] | None = None, api_key: str | None = None) -> dict[str, Any]:
        """The pool and every allocation made from it ``{ pool, usedUsd, allocations }``."""
        return self._do(_Call("GET", f"/v1/spending/pools/{quote(pool_id, safe='')}/allocations", None, api_key, self._ledger_signer(identity, api_key)))


class AsyncHubClient(_Core):
    """The hub client on asyncio: the registry reads, registration and the key resolver an agent server needs."""

    def __init__(self, hub_url: str | None = None, api_key: str | None = None, *, identity: Mapping[str, Any] | None = None, public_hub_url: str | None = None, retries: int = 2, key_cache_ttl_seconds: float = 30.0, timeout: float = 30.0, http: httpx.AsyncClient | None = None) -> None:
        super().__init__(hub_url, api_key, identity, public_hub_url, None, retries, 0.2, 10.0, key_cache_ttl_seconds)
        self._http = http or httpx.AsyncClient(timeout=timeout)

    async def aclose(self) -> None:
        """Closes the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncHubClient":
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.aclose()

    async def _do(self, call: _Call) -> Any:
        attempt = 0
        while True:
            url, body, headers = self._build(call)
            try:
                r = await self._http.request(call.method, url, content=body, headers=headers)
                return self._read(call, r.status_code, r.content)
            except httpx.ConnectError as e:
                error = HubError("REGISTRY_UNREACHABLE", f"the hub could not be reached: {e}")
            except httpx.HTTPError as e:
                raise HubError("REGISTRY_UNREACHABLE", f"the hub's answer could not be read: {e}") from None
            except HubError as e:
                if e.code not in _RETRYABLE:
                    raise
                error = e
            if attempt >= self.retries:
                raise error
            await asyncio.sleep(self._delay(error, attempt))
            attempt += 1

    async def register_agent(self, manifest: Mapping[str, Any], endpoint_url: str, api_key: str | None = None, *, identity: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``HubClient.register_agent`` on asyncio."""
        who, generated = _identity_for(manifest, identity or self.identity)
        cid = (await self._do(_Call("POST", "/v1/manifests", dict(manifest), api_key)))["cid"]
        record = await self._do(_Call("POST", "/v1/agents", self._registration(who, cid, endpoint_url), api_key))
        return {**record, "identity": who} if generated else record

    async def resolve_agent(self, did_hash: str) -> dict[str, Any]:
        """The agent's record."""
        return await self._do(_Call("GET", f"/v1/agents/{quote(did_hash, safe='')}"))

    async def list_agents(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The first ``limit`` agents."""
        return (await self._do(_Call("GET", f"/v1/agents{_page_params(limit, None)}")))["items"]

    async def resolve_did(self, did: str) -> dict[str, Any]:
        """``{ did, keyVersion, document }``."""
        return await self._do(_Call("GET", f"/v1/dids/{quote(did, safe='')}"))

    async def resolve_key(self, did: str) -> bytes:
        """The DID's current raw public key (cached); ``KeyNotFound`` / ``ResolverUnavailable``."""
        hit = self._cached_key(did)
        if hit is not None:
            return hit
        try:
            answer = await self.resolve_did(did)
        except HubError as e:
            if e.code in ("NOT_FOUND", "INVALID_DID"):
                raise hs.KeyNotFound(e.message) from None
            raise hs.ResolverUnavailable(e.message) from None
        return self._key_of(did, answer)


# --- the spec's module-level functions ---------------------------------------------------------------------------


def register_agent(manifest: Mapping[str, Any], endpoint_url: str, api_key: str, *, identity: Mapping[str, Any] | None = None, hub_url: str | None = None) -> dict[str, Any]:
    """``HubClient(hub_url).register_agent(…)`` → the record with ``didHash``."""
    with HubClient(hub_url, api_key) as hub:
        return hub.register_agent(manifest, endpoint_url, identity=identity)


def resolve_agent(did_hash: str, *, hub_url: str | None = None) -> dict[str, Any]:
    """The record of the agent with this ``didHash`` (``endpointUrl``, key, …)."""
    with HubClient(hub_url) as hub:
        return hub.resolve_agent(did_hash)


def list_agents(limit: int | None = None, *, hub_url: str | None = None) -> list[dict[str, Any]]:
    """The first ``limit`` registered agents."""
    with HubClient(hub_url) as hub:
        return hub.list_agents(limit)


def register_mcp(name: str, endpoint_url: str, tools: list[Any], api_key: str, *, did: str | None = None, hub_url: str | None = None) -> dict[str, Any]:
    """Registers an MCP server (a DID is generated when omitted) → the record with ``didHash``."""
    with HubClient(hub_url, api_key) as hub:
        return hub.register_mcp(name, endpoint_url, tools, did=did)


def resolve_mcp(did_hash: str, *, hub_url: str | None = None) -> dict[str, Any]:
    """An MCP server's record."""
    with HubClient(hub_url) as hub:
        return hub.resolve_mcp(did_hash)


def register_skill(name: str, skill_type: str | None = None, api_key: str | None = None, *, did: str | None = None, hub_url: str | None = None) -> dict[str, Any]:
    """Registers a skill (a DID is generated when omitted) → the record with ``didHash``."""
    with HubClient(hub_url, api_key) as hub:
        return hub.register_skill(name, skill_type, did=did)

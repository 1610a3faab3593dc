"""The Python agent server and client against each other on 127.0.0.1: wire shapes, auth modes, streaming,
reconnects, memory, error bodies (docs/agent.md)."""

import asyncio

import httpx
import pytest

from agent_mesh import http_signature as hs
from agent_mesh.client import AgentCallError, AgentClient, AsyncAgentClient
from agent_mesh.did import generate_did
from agent_mesh.proof import verify_message
from agent_mesh.server import serve

CALLER = generate_did("caller", namespace="py")
STRANGER = generate_did("stranger", namespace="py")
KEYS = {CALLER["did"]: CALLER["public_key_bytes"], STRANGER["did"]: STRANGER["public_key_bytes"]}


async def echo(message, session_id, history, context):
    return f"echo: {message} ({len(history)} earlier turns)"


async def chunks(message, session_id, history, context):
    for word in message.split():
        yield word + " "


@pytest.fixture(scope="module")
def open_agent():
    with serve(echo, name="py-echo", memory="session") as agent:
        yield agent


@pytest.fixture(scope="module")
def signed_agent():
    gate = asyncio.Event()

    async def slow(message, session_id, history, context, caller=None):
        yield f"hello {caller.did} "
        for i in range(3):
            await asyncio.sleep(0.05)
            yield f"part{i} "

    with serve(slow, name="py-signed", auth="mesh-sig", resolve_caller_key=KEYS.get, allowed_callers=[CALLER["did"], STRANGER["did"].upper()]) as agent:
        yield agent


def test_plain_run_and_session_memory(open_agent):
    with AgentClient() as c:
        first = c.call(open_agent.url, "hi", session_id="s1")
        assert first == {"message": "echo: hi (0 earlier turns)", "sessionId": "s1"}
        assert c.call(open_agent.url, "again", session_id="s1")["message"] == "echo: again (2 earlier turns)"
        fresh = c.call(open_agent.url, "x")
        assert fresh["sessionId"] != "s1" and fresh["message"] == "echo: x (0 earlier turns)"


def test_health_and_signed_discovery(open_agent):
    health = httpx.get(f"{open_agent.url}/health").json()
    assert health["status"] == "ok" and health["did"] == "did:mesh:py-echo" and isinstance(health["uptimeSeconds"], int)
    with AgentClient() as c:
        doc = c.discover(open_agent.url)
    assert doc["didHash"] == open_agent.did_hash and doc["endpoints"]["run"] == f"{open_agent.url}/v1/run"
    assert doc["auth"] == ["none"] and doc["memory"] == "session" and doc["streaming"] is True
    verify_message(doc, open_agent.identity["public_key_bytes"])
    doc["name"] = "other"
    with pytest.raises(Exception):
        verify_message(doc, open_agent.identity["public_key_bytes"])


def test_error_bodies(open_agent):
    r = httpx.post(f"{open_agent.url}/v1/run", content=b'{"message": 1}', headers={"content-type": "application/json"})
    body = r.json()
    assert r.status_code == 400 and body["code"] == "INVALID_REQUEST" and body["correlationId"] == r.headers["x-correlation-id"]
    r = httpx.post(f"{open_agent.url}/v1/run", content=b'{"message": "a", "message": "b"}')
    assert (r.status_code, r.json()["code"]) == (400, "INVALID_JSON")
    r = httpx.post(f"{open_agent.url}/v1/run", content=b"message=a", headers={"content-type": "text/plain"})
    assert (r.status_code, r.json()["code"]) == (415, "UNSUPPORTED_MEDIA_TYPE")
    r = httpx.get(f"{open_agent.url}/nope", headers={"x-correlation-id": "abc-1"})
    assert (r.status_code, r.json()["code"], r.json()["correlationId"]) == (404, "ROUTE_NOT_FOUND", "abc-1")
    r = httpx.post(f"{open_agent.url}/v1/resume", json={"taskId": "t", "approval": {}})
    assert (r.status_code, r.json()["code"]) == (404, "TASK_NOT_FOUND")
    r = httpx.post(f"{open_agent.url}/v1/run", json={"message": "a"}, headers={"last-event-id": "x:1"})
    assert (r.status_code, r.json()["code"]) == (400, "INVALID_REQUEST")


def test_handler_failure_is_500_handler_failed():
    async def broken(message, session_id, history, context):
        raise RuntimeError("secret detail")

    with serve(broken, name="py-broken") as agent:
        with AgentClient() as c, pytest.raises(AgentCallError) as e:
            c.call(agent.url, "x")
    assert (e.value.code, e.value.status) == ("HANDLER_FAILED", 500) and "secret" not in e.value.message


def test_bearer():
    with serve(echo, name="py-bearer", auth="bearer", bearer_tokens=["t0k"], verify_bearer=lambda t: t == "other") as agent:
        with AgentClient() as c:
            assert c.call(agent.url, "a", bearer_token="t0k")["message"].startswith("echo: a")
            assert c.call(agent.url, "a", bearer_token="other")["message"].startswith("echo: a")
            for token, code in ((None, "AUTH_REQUIRED"), ("bad", "INVALID_TOKEN")):
                with pytest.raises(AgentCallError) as e:
                    c.call(agent.url, "a", bearer_token=token)
                assert (e.value.code, e.value.status) == (code, 401)


def test_mesh_sig_stream_and_codes(signed_agent):
    with AgentClient() as c:
        events = list(c.stream(signed_agent.url, "m", sign_as=CALLER))
        assert [e["type"] for e in events] == ["chunk"] * 4 + ["done"]
        assert events[-1]["message"] == f"hello {CALLER['did']} part0 part1 part2 "
        assert c.call(signed_agent.url, "m", sign_as=(CALLER["did"], CALLER["private_key"]))["message"].startswith("hello")
        with pytest.raises(AgentCallError) as e:
            c.call(signed_agent.url, "m")
        assert (e.value.code, e.value.status) == ("SIGNATURE_MISSING", 401)
        outsider = generate_did("outsider")
        with pytest.raises(AgentCallError) as e:
            c.call(signed_agent.url, "m", sign_as=outsider)
        assert (e.value.code, e.value.status) == ("CALLER_NOT_ALLOWED", 403)
    # the same signed request twice: REPLAYED
    body = b'{"message":"m"}'
    headers = {"content-type": "application/json", **hs.sign_request("POST", f"{signed_agent.url}/v1/run", body, CALLER["private_key"], f"{CALLER['did']}#key-1")}
    assert httpx.post(f"{signed_agent.url}/v1/run", content=body, headers=headers).status_code == 200
    r = httpx.post(f"{signed_agent.url}/v1/run", content=body, headers=headers)
    assert (r.status_code, r.json()["code"]) == (401, "REPLAYED")
    # signed for another URL (Host header is never trusted)
    other = {"content-type": "application/json", **hs.sign_request("POST", "http://127.0.0.2:8080/v1/run", body, CALLER["private_key"], f"{CALLER['did']}#key-1")}
    r = httpx.post(f"{signed_agent.url}/v1/run", content=body, headers={**other, "host": "127.0.0.2:8080"})
    assert (r.status_code, r.json()["code"]) == (401, "SIGNATURE_INVALID")
    # a DNS name the agent does not answer for never reaches the signature check (DNS rebinding)
    r = httpx.post(f"{signed_agent.url}/v1/run", content=body, headers={**other, "host": "elsewhere.example"})
    assert (r.status_code, r.json()["code"]) == (421, "HOST_NOT_ALLOWED")


def test_reconnect_replays_missed_events_and_checks_the_owner(signed_agent):
    async def scenario():
        async with AsyncAgentClient() as c:
            first = []
            async for e in c.stream(signed_agent.url, "m", sign_as=CALLER):
                first.append(e)
            assert first[-1]["type"] == "done"
        # read only the first event by hand, then reconnect from it
        body = b'{"message":"m"}'
        url = f"{signed_agent.url}/v1/run"
        async with httpx.AsyncClient() as http:
            h = {"content-type": "application/json", "accept": "text/event-stream", **hs.sign_request("POST", url, body, CALLER["private_key"], f"{CALLER['did']}#key-1")}
            async with http.stream("POST", url, content=body, headers=h) as r:
                text = b""
                async for chunk in r.aiter_bytes():
                    text += chunk
                    if b"\n\n" in text:
                        break
            first_id = text.decode().split("\n")[0].removeprefix("id: ")
            assert first_id.endswith(":0")
            await asyncio.sleep(0.3)
            h = {"content-type": "application/json", "accept": "text/event-stream", "last-event-id": first_id, **hs.sign_request("POST", url, body, CALLER["private_key"], f"{CALLER['did']}#key-1")}
            rest = (await http.post(url, content=body, headers=h)).text
            assert rest.count("event: chunk") == 3 and rest.count("event: done") == 1 and f"{first_id[:-2]}:1" in rest
            h = {"content-type": "application/json", "accept": "text/event-stream", "last-event-id": first_id, **hs.sign_request("POST", url, body, STRANGER["private_key"], f"{STRANGER['did']}#key-1")}
            r = await http.post(url, content=body, headers=h)
            assert (r.status_code, r.json()["code"]) == (403, "NOT_RUN_OWNER")

    asyncio.run(scenario())


def test_idempotency_key_runs_once_per_caller():
    calls = []

    async def counting(message, session_id, history, context):
        calls.append(message)
        return f"ran {message} #{len(calls)}"

    with serve(counting, name="py-idem", auth="bearer", bearer_tokens=["a", "b"]) as agent:
        url = f"{agent.url}/v1/run"
        first = httpx.post(url, json={"message": "m", "sessionId": "s"}, headers={"authorization": "Bearer a", "idempotency-key": "k-1"})
        again = httpx.post(url, json={"sessionId": "s", "message": "m"}, headers={"authorization": "Bearer a", "idempotency-key": "k-1"})
        assert first.status_code == again.status_code == 200 and again.content == first.content
        assert again.headers["idempotent-replayed"] == "true" and "idempotent-replayed" not in first.headers
        assert calls == ["m"]
        other = httpx.post(url, json={"message": "other", "sessionId": "s"}, headers={"authorization": "Bearer a", "idempotency-key": "k-1"})
        assert (other.status_code, other.json()["code"]) == (409, "IDEMPOTENCY_KEY_REUSED")
        # another caller's key is its own
        theirs = httpx.post(url, json={"message": "m", "sessionId": "s"}, headers={"authorization": "Bearer b", "idempotency-key": "k-1"})
        assert theirs.status_code == 200 and calls == ["m", "m"]
        for headers in ({"idempotency-key": "bad key"}, {"idempotency-key": "k-2", "accept": "text/event-stream"}):
            r = httpx.post(url, json={"message": "m"}, headers={"authorization": "Bearer a", **headers})
            assert (r.status_code, r.json()["code"]) == (400, "INVALID_REQUEST")


def test_stored_replies_are_bounded_per_caller_and_in_all():
    big = "x" * 20_000

    async def large(message, session_id, history, context):
        return big

    options = {"idempotency_max_bytes_per_caller": 50_000, "idempotency_max_keys": 8}
    with serve(large, name="py-idem-bound", auth="bearer", bearer_tokens=["a", "b", "c"], **options) as agent:
        url = f"{agent.url}/v1/run"

        def keyed(token: str, key: str) -> httpx.Response:
            return httpx.post(url, json={"message": key}, headers={"authorization": f"Bearer {token}", "idempotency-key": key})

        # 20 KB replies: the third puts caller a past 50 KB, so its fourth new key is refused.
        assert [keyed("a", f"k{i}").status_code for i in range(5)] == [200, 200, 200, 429, 429]
        refused = keyed("a", "k9")
        assert refused.json()["code"] == "IDEMPOTENCY_QUOTA_EXCEEDED" and int(refused.headers["retry-after"]) > 0
        replay = keyed("a", "k0")
        assert replay.status_code == 200 and replay.headers["idempotent-replayed"] == "true"
        # Another caller goes on, until the server's bound of keys in all (8) is reached.
        assert [keyed("b", f"k{i}").status_code for i in range(3)] == [200, 200, 200]
        assert [keyed("c", f"k{i}").status_code for i in range(3)] == [200, 200, 503]
        assert keyed("c", "k9").json()["code"] == "STORE_UNAVAILABLE"


def test_commit_token_signed_by_the_agent():
    from agent_mesh import commit_token

    identity = generate_did("py-booker", namespace="net")
    with serve(echo, name="py-booker", did=identity["did"], private_key=identity["private_key"], capabilities=["book"]) as agent:
        with AgentClient() as c:
            reply = c.call(agent.url, "flight", commit={"sagaId": "saga-1", "step": "flight", "amountUsd": "12.50"})
            receipt = commit_token.verify(reply["commitToken"], identity["public_key_bytes"])
            assert receipt["amountUsd"] == "12.5" and receipt["capability"] == "book" and receipt["issuer"] == identity["did"]
            assert receipt["resultDigest"] == commit_token.digest_result(reply["message"])
            events = list(c.stream(agent.url, "hotel", commit={"sagaId": "saga-1", "step": "hotel"}))
            assert commit_token.verify(events[-1]["commitToken"], identity["public_key_bytes"])["amountUsd"] == "0"
            with pytest.raises(AgentCallError) as e:
                c.call(agent.url, "x", capability="fly")
            assert (e.value.code, e.value.status) == ("INVALID_REQUEST", 400)


def test_persistent_memory_survives_a_restart(tmp_path):
    db = str(tmp_path / "memory.db")
    for expected in ("echo: one (0 earlier turns)", "echo: two (2 earlier turns)"):
        with serve(echo, name="py-persist", memory="persistent", database=db) as agent, AgentClient() as c:
            assert c.call(agent.url, expected.split()[1], session_id="p")["message"] == expected


def test_values_with_a_trailing_newline_are_refused(open_agent):
    r = httpx.post(f"{open_agent.url}/v1/run", json={"message": "a", "sessionId": "s\n"})
    assert (r.status_code, r.json()["code"]) == (400, "INVALID_REQUEST")


def test_a_resolved_small_order_key_is_key_not_found():
    identity = bytes.fromhex("0100000000000000000000000000000000000000000000000000000000000000")
    with serve(echo, name="py-small", auth="mesh-sig", resolve_caller_key=lambda did: identity) as agent, AgentClient() as c:
        with pytest.raises(AgentCallError) as e:
            c.call(agent.url, "m", sign_as=CALLER)
    assert (e.value.code, e.value.status) == ("KEY_NOT_FOUND", 401)

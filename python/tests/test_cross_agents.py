"""Cross-language calls with real processes on 127.0.0.1: a TypeScript hub; a Python agent registered in it and
called from TypeScript (mesh-sig, streaming, discovery); a TypeScript agent called from Python (mesh-sig,
streaming, a dropped stream resumed with Last-Event-ID, errors)."""

from __future__ import annotations

import asyncio

import pytest

from _net_support import CuttingProxy, TsAgent, TsHub, run_node, start_hub, start_ts_agent
from agent_mesh import keys
from agent_mesh.client import AgentCallError, AgentClient, acall_agent, call_agent
from agent_mesh.did import did_hash, generate_did
from agent_mesh.hub import HubClient
from agent_mesh.server import serve

MANIFEST = {"meshProtocolVersion": "1.0"}


def pkcs8_b64(identity) -> str:
    return keys.b64encode(keys.private_key_to_pkcs8(identity["private_key"]))


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> TsHub:
    h = start_hub(tmp_path_factory.mktemp("hub"))
    yield h
    h.close()


@pytest.fixture(scope="module")
def registry(hub) -> HubClient:
    with HubClient(hub.url, hub.admin_key) as client:
        yield client


def register(registry: HubClient, identity, endpoint: str) -> dict:
    record = registry.register_agent({**MANIFEST, "name": identity["did"]}, endpoint, identity=identity)
    assert record["didHash"] == did_hash(identity["did"]) and record["keyVersion"] == 1
    return record


# --- a Python agent called from TypeScript ------------------------------------------------------------------------

PY_AGENT = generate_did("py-agent", namespace="cross")
TS_CALLER = generate_did("ts-caller", namespace="cross")


async def py_handler(message, session_id, history, context, caller=None):
    for word in f"py says: {message} [caller {caller.did}] [session {session_id}] [history {len(history)}]".split(" "):
        yield word + " "


@pytest.fixture(scope="module")
def py_agent(hub, registry):
    with serve(py_handler, name="py-agent", did=PY_AGENT["did"], private_key=PY_AGENT["private_key"], auth="mesh-sig", hub_url=hub.url, memory="session") as agent:
        register(registry, PY_AGENT, agent.url)
        register(registry, TS_CALLER, "http://127.0.0.1:9/unused")
        yield agent


def ts_call(hub: TsHub, **request):
    return run_node("ts_call.mjs", {"hubUrl": hub.url, **request})


def test_typescript_calls_a_python_agent_with_mesh_sig(hub, py_agent):
    sign_as = {"did": TS_CALLER["did"], "privateKey": pkcs8_b64(TS_CALLER)}
    out = ts_call(hub, target=PY_AGENT["did_hash"], message="hello", sessionId="ts-1", signAs=sign_as)
    assert out["result"] == {"message": f"py says: hello [caller {TS_CALLER['did']}] [session ts-1] [history 0] ", "sessionId": "ts-1"}
    # the session is the TS caller's own: the second turn sees the first
    again = ts_call(hub, target=PY_AGENT["did_hash"], message="again", sessionId="ts-1", signAs=sign_as)
    assert "[history 2]" in again["result"]["message"]


def test_typescript_streams_from_a_python_agent(hub, py_agent):
    sign_as = {"did": TS_CALLER["did"], "privateKey": pkcs8_b64(TS_CALLER)}
    out = ts_call(hub, target=PY_AGENT["did_hash"], message="stream me", sessionId="ts-2", signAs=sign_as, stream=True)
    events = out["events"]
    assert [e["type"] for e in events[:-1]] == ["chunk"] * (len(events) - 1) and events[-1]["type"] == "done"
    assert "".join(e["text"] for e in events[:-1]) == events[-1]["message"]
    assert events[-1]["message"].startswith(f"py says: stream me [caller {TS_CALLER['did']}]")
    assert len(events) - 1 == len(events[-1]["message"].split())


def test_typescript_reads_python_refusals_by_code(hub, py_agent):
    assert ts_call(hub, target=PY_AGENT["did_hash"], message="x")["error"]["code"] == "SIGNATURE_MISSING"
    stranger = generate_did("not-registered", namespace="cross")
    out = ts_call(hub, target=PY_AGENT["did_hash"], message="x", signAs={"did": stranger["did"], "privateKey": pkcs8_b64(stranger)})
    assert (out["error"]["code"], out["error"]["status"]) == ("KEY_NOT_FOUND", 401)
    # signed by a registered DID with another key
    impostor = {"did": TS_CALLER["did"], "privateKey": pkcs8_b64(generate_did("other-key"))}
    assert ts_call(hub, target=PY_AGENT["did_hash"], message="x", signAs=impostor)["error"]["code"] == "SIGNATURE_INVALID"


def test_typescript_verifies_the_python_discovery_document(hub, py_agent):
    out = ts_call(hub, target=PY_AGENT["did_hash"], discover=True, publicKeyB64=PY_AGENT["public_key_b64"])
    assert out["verified"] is True
    doc = out["document"]
    assert doc["did"] == PY_AGENT["did"] and doc["endpoints"]["run"] == f"{py_agent.url}/v1/run" and doc["auth"] == ["mesh-sig"]
    other = ts_call(hub, target=PY_AGENT["did_hash"], discover=True, publicKeyB64=TS_CALLER["public_key_b64"])
    assert other["verified"] is False


PY_SLOW = generate_did("py-slow", namespace="cross")


async def slow_handler(message, session_id, history, context):
    for word in f"slow {message} one two three four five".split(" "):
        await asyncio.sleep(0.04)
        yield word + " "


def test_typescript_stream_from_a_python_agent_resumes_across_a_dropped_connection(hub, registry, py_agent):
    proxy = CuttingProxy()
    # The agent's public URL is the proxy's: that is the URL callers sign, and the one it checks.
    with serve(slow_handler, name="py-slow", did=PY_SLOW["did"], private_key=PY_SLOW["private_key"], auth="mesh-sig", hub_url=hub.url, public_url=proxy.url) as agent:
        assert agent.url == proxy.url
        proxy.upstream = ("127.0.0.1", int(agent.listen_url.rsplit(":", 1)[1]))
        register(registry, PY_SLOW, proxy.url)
        sign_as = {"did": TS_CALLER["did"], "privateKey": pkcs8_b64(TS_CALLER)}
        out = ts_call(hub, target=PY_SLOW["did_hash"], message="go", signAs=sign_as, stream=True)
    proxy.close()
    events = out["events"]
    assert events[-1] == {"type": "done", "message": "slow go one two three four five ", "sessionId": events[-1]["sessionId"]}
    assert "".join(e["text"] for e in events[:-1]) == events[-1]["message"] and len(events) == 8
    streamed = [r.decode("latin-1").lower() for r in proxy.requests if b"text/event-stream" in r.lower()]
    assert proxy.cut and len(streamed) == 2 and "last-event-id" not in streamed[0] and "last-event-id: " in streamed[1]


# --- a TypeScript agent called from Python ------------------------------------------------------------------------

TS_AGENT = generate_did("ts-agent", namespace="cross")
PY_CALLER = generate_did("py-caller", namespace="cross")


@pytest.fixture(scope="module")
def ts_agent(hub, registry):
    proxy = CuttingProxy()
    agent: TsAgent = start_ts_agent(
        {"name": "ts-agent", "did": TS_AGENT["did"], "privateKey": pkcs8_b64(TS_AGENT), "auth": "mesh-sig", "hubUrl": hub.url, "publicUrl": proxy.url, "delayMs": 40}
    )
    host, port = agent.url.removeprefix("http://").rsplit(":", 1)
    proxy.upstream = (host, int(port))
    register(registry, TS_AGENT, proxy.url)
    register(registry, PY_CALLER, "http://127.0.0.1:9/unused")
    yield proxy
    agent.close()
    proxy.close()


def expected(message: str, session: str) -> str:
    return f"ts says: {message} [caller {PY_CALLER['did']}] [session {session}] [history 0] "


def test_python_calls_a_typescript_agent_with_mesh_sig(hub, ts_agent):
    reply = call_agent(TS_AGENT["did_hash"], "hello", session_id="py-1", sign_as=PY_CALLER, hub_url=hub.url)
    assert reply == {"message": expected("hello", "py-1"), "sessionId": "py-1"}
    reply = asyncio.run(acall_agent(TS_AGENT["did_hash"], "async", session_id="py-2", sign_as=(PY_CALLER["did"], PY_CALLER["private_key"]), hub_url=hub.url))
    assert reply["message"] == expected("async", "py-2")


def test_python_reads_typescript_refusals_by_code(hub, ts_agent):
    with AgentClient(hub.url) as c:
        with pytest.raises(AgentCallError) as e:
            c.call(TS_AGENT["did_hash"], "x")
        assert (e.value.code, e.value.status) == ("SIGNATURE_MISSING", 401) and e.value.correlation_id
        with pytest.raises(AgentCallError) as e:
            c.call(TS_AGENT["did_hash"], "x", sign_as={"did": PY_CALLER["did"], "private_key": generate_did("other-key")["private_key"]})
        assert (e.value.code, e.value.status) == ("SIGNATURE_INVALID", 401)
        with pytest.raises(AgentCallError) as e:
            c.call("aaaaaaaaaaaaaaaaaaaaaaaa", "x")
        assert e.value.code == "AGENT_NOT_FOUND"


def test_python_streams_from_a_typescript_agent_across_a_dropped_connection(hub, ts_agent):
    with AgentClient(hub.url) as c:
        events = list(c.stream(TS_AGENT["did_hash"], "stream me", session_id="py-3", sign_as=PY_CALLER))
    done = events[-1]
    assert done == {"type": "done", "message": expected("stream me", "py-3"), "sessionId": "py-3"}
    chunks = [e["text"] for e in events[:-1]]
    assert all(e["type"] == "chunk" for e in events[:-1])
    # nothing lost, nothing repeated
    assert "".join(chunks) == done["message"] and len(chunks) == len(done["message"].split())
    # the proxy really cut the first connection, and the client came back with Last-Event-ID, signed afresh
    assert ts_agent.cut
    streamed = [r for r in ts_agent.requests if b"text/event-stream" in r.lower()]
    assert len(streamed) == 2
    first, second = (r.decode("latin-1").lower() for r in streamed)
    assert "last-event-id" not in first and "last-event-id: " in second
    nonce = lambda r: r.split('nonce="')[1].split('"')[0]  # noqa: E731
    assert nonce(first) != nonce(second)

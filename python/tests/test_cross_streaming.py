"""One streaming rule on both servers (docs/agent.md): a handler that returns its reply whole is streamed as one
``chunk`` carrying it, then ``done``; a TypeScript client reads a Python agent so, and a Python client a TypeScript one."""

from __future__ import annotations

import pytest

from _net_support import TsAgent, TsHub, run_node, start_hub, start_ts_agent
from agent_mesh import keys
from agent_mesh.client import AgentClient
from agent_mesh.did import generate_did
from agent_mesh.hub import HubClient
from agent_mesh.server import serve

MANIFEST = {"meshProtocolVersion": "1.0"}
PY_WHOLE = generate_did("py-whole", namespace="stream")
PY_SYNC = generate_did("py-sync", namespace="stream")
TS_WHOLE = generate_did("ts-whole", namespace="stream")


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> TsHub:
    h = start_hub(tmp_path_factory.mktemp("hub"))
    yield h
    h.close()


@pytest.fixture(scope="module")
def registry(hub) -> HubClient:
    with HubClient(hub.url, hub.admin_key) as client:
        yield client


def register(registry: HubClient, identity, endpoint: str) -> None:
    registry.register_agent({**MANIFEST, "name": identity["did"]}, endpoint, identity=identity)


async def whole_handler(message, session_id, history, context):
    return f"py says: {message}"


def sync_handler(message, session_id, history, context):
    return f"py sync: {message}"


def ts_stream(hub: TsHub, target: str, message: str) -> list[dict]:
    return run_node("ts_call.mjs", {"hubUrl": hub.url, "target": target, "message": message, "sessionId": "s1", "stream": True})["events"]


@pytest.mark.parametrize(("identity", "handler", "reply"), [(PY_WHOLE, whole_handler, "py says: hi"), (PY_SYNC, sync_handler, "py sync: hi")])
def test_typescript_streams_a_python_reply_given_whole_as_one_chunk(hub, registry, identity, handler, reply):
    with serve(handler, name=identity["did"], did=identity["did"], private_key=identity["private_key"]) as agent:
        register(registry, identity, agent.url)
        events = ts_stream(hub, identity["did_hash"], "hi")
    assert [e["type"] for e in events] == ["chunk", "done"]
    assert events[0]["text"] == reply and events[1]["message"] == reply


def test_python_streams_a_typescript_reply_given_whole_as_one_chunk(hub, registry):
    agent: TsAgent = start_ts_agent({"name": "ts-whole", "did": TS_WHOLE["did"], "privateKey": keys.b64encode(keys.private_key_to_pkcs8(TS_WHOLE["private_key"])), "whole": True})
    try:
        register(registry, TS_WHOLE, agent.url)
        with AgentClient(hub.url) as c:
            events = list(c.stream(TS_WHOLE["did_hash"], "hi", session_id="s1"))
    finally:
        agent.close()
    assert [e["type"] for e in events] == ["chunk", "done"]
    assert events[0]["text"] == "ts says: hi [session s1]" == events[1]["message"]

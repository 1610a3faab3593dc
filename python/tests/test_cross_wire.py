"""The same requests sent to a TypeScript agent server and a Python one (real processes on 127.0.0.1): each answer
must agree in status, error ``code`` and ``_tag``, and in the members of its body (docs/agent.md)."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from _net_support import start_ts_agent
from agent_mesh.server import serve


async def handler(message, session_id, history, context):
    return f"reply to {message}"


@pytest.fixture(scope="module")
def agents():
    ts = start_ts_agent({"name": "wire-ts"})
    py = serve(handler, name="wire-py")
    yield ts.url, py.url
    ts.close()
    py.close()


RUN_ID = str(uuid.uuid4())
CASES = [
    ("run", "POST", "/v1/run", {"content-type": "application/json"}, b'{"message":"hi","sessionId":"s-1"}'),
    ("duplicate member", "POST", "/v1/run", {"content-type": "application/json"}, b'{"message":"a","message":"b"}'),
    ("__proto__ member", "POST", "/v1/run", {"content-type": "application/json"}, b'{"message":"a","__proto__":{}}'),
    ("not JSON", "POST", "/v1/run", {"content-type": "application/json"}, b'{"message":'),
    ("text body", "POST", "/v1/run", {"content-type": "text/plain"}, b'{"message":"a"}'),
    ("no message", "POST", "/v1/run", {"content-type": "application/json"}, b'{"sessionId":"s"}'),
    ("bad sessionId", "POST", "/v1/run", {"content-type": "application/json"}, b'{"message":"a","sessionId":"a b"}'),
    ("bad history", "POST", "/v1/run", {"content-type": "application/json"}, b'{"message":"a","history":[{"role":"robot","content":"x"}]}'),
    ("unknown route", "GET", "/v2/nothing", {}, b""),
    ("Last-Event-ID without a stream", "POST", "/v1/run", {"content-type": "application/json", "last-event-id": f"{RUN_ID}:0"}, b'{"message":"a"}'),
    ("Last-Event-ID not ours", "POST", "/v1/run", {"content-type": "application/json", "accept": "text/event-stream", "last-event-id": "x"}, b'{"message":"a"}'),
    ("Last-Event-ID of an unknown run", "POST", "/v1/run", {"content-type": "application/json", "accept": "text/event-stream", "last-event-id": f"{RUN_ID}:0"}, b'{"message":"a"}'),
    ("Idempotency-Key without auth", "POST", "/v1/run", {"content-type": "application/json", "idempotency-key": "k1"}, b'{"message":"a"}'),
    ("resume of an unknown task", "POST", "/v1/resume", {"content-type": "application/json"}, b'{"taskId":"task_x","approval":{}}'),
    ("health", "GET", "/health", {}, b""),
    ("a DNS name not answered for", "GET", "/health", {"host": "evil.example"}, b""),
    ("localhost at any port", "GET", "/health", {"host": "localhost:1"}, b""),
    ("a cross origin", "POST", "/v1/run", {"content-type": "application/json", "origin": "http://evil.example"}, b'{"message":"a"}'),
    ("Origin null", "POST", "/v1/run", {"content-type": "application/json", "origin": "null"}, b'{"message":"a"}'),
    ("same-origin preflight", "OPTIONS", "/v1/run", {"host": "localhost:1", "origin": "http://localhost:1", "access-control-request-method": "POST"}, b""),
    ("too large a body", "POST", "/v1/run", {"content-type": "application/json"}, b'{"message":"' + b"x" * (1024 * 1024) + b'"}'),
    ("discovery", "GET", "/.well-known/mesh-agent.json", {}, b""),
]


def shape(response: httpx.Response):
    body = json.loads(response.content) if response.content else None
    members = sorted(body) if isinstance(body, dict) else body
    return response.status_code, body.get("code") if isinstance(body, dict) else None, body.get("_tag") if isinstance(body, dict) else None, members


@pytest.mark.parametrize("name,method,path,headers,body", CASES, ids=[c[0] for c in CASES])
def test_same_answer_from_both_servers(agents, name, method, path, headers, body):
    ts, py = (shape(httpx.request(method, f"{base}{path}", headers=headers, content=body)) for base in agents)
    assert py == ts


def test_same_stream_frames(agents):
    def frames(base):
        r = httpx.post(f"{base}/v1/run", headers={"accept": "text/event-stream"}, json={"message": "hi", "sessionId": "s-2"})
        assert r.headers["content-type"].startswith("text/event-stream") and r.headers["cache-control"] == "no-cache"
        out = []
        for block in r.text.strip("\n").split("\n\n"):
            lines = dict(line.split(": ", 1) for line in block.split("\n"))
            run, n = lines["id"].rsplit(":", 1)
            uuid.UUID(run)
            out.append((int(n), lines["event"], sorted(json.loads(lines["data"]))))
        return out

    ts, py = frames(agents[0]), frames(agents[1])
    # The TS handler of start_ts_agent streams words; the Python one answers at once: compare the final frames.
    assert py[-1][1:] == ts[-1][1:] == ("done", ["message", "sessionId"])
    assert [f[0] for f in py] == list(range(len(py)))

"""The SSE reader and the client's reading rules (docs/agent.md §7): framing, limits, strict JSON, error bodies,
reconnects that resend the request signed afresh with Last-Event-ID."""

import httpx
import pytest

from agent_mesh import http_signature as hs
from agent_mesh.client import AgentCallError, AgentClient
from agent_mesh.did import generate_did
from agent_mesh.sse import SseLimitExceeded, SseParser, encode_event


def test_encode_matches_the_typescript_framing():
    assert encode_event('{"text":"a"}', "chunk", "r:0") == 'id: r:0\nevent: chunk\ndata: {"text":"a"}\n\n'
    assert encode_event("a\r\nb\nc", None, None) == "data: a\ndata: b\ndata: c\n\n"


def test_parser_handles_any_line_ending_split_anywhere():
    text = b"\xef\xbb\xbfid: 1\r\nevent: chunk\rdata: a\ndata: b\r\n\r\n: comment\n\nid: 2\ndata:c\n\n"
    events = []
    parser = SseParser()
    for i in range(len(text)):
        events += parser.push(text[i : i + 1])
    assert [(e.id, e.event, e.data) for e in events] == [("1", "chunk", "a\nb"), ("2", "message", "c")]


def test_parser_limits():
    with pytest.raises(SseLimitExceeded) as e:
        SseParser(max_event_bytes=10).push(b"data: " + b"x" * 20)
    assert e.value.limit == "event"
    p = SseParser(max_stream_bytes=30)
    p.push(b"data: 1\n\n" * 3)
    with pytest.raises(SseLimitExceeded) as e:
        p.push(b"data: 1\n\n")
    assert e.value.limit == "stream"


def client_for(handler, **options) -> AgentClient:
    return AgentClient(http=httpx.Client(transport=httpx.MockTransport(handler)), **options)


def test_replies_are_strict_json_and_bounded():
    bodies = {
        "/dup/v1/run": (200, b'{"message":"a","message":"b","sessionId":"s"}', "BAD_RESPONSE"),
        "/proto/v1/run": (200, b'{"message":"a","sessionId":"s","__proto__":{}}', "BAD_RESPONSE"),
        "/big/v1/run": (200, b'{"message":"' + b"x" * 2000 + b'","sessionId":"s"}', "REPLY_TOO_LARGE"),
        "/err/v1/run": (409, b'{"_tag":"AgentConflict","code":"TASK_EXPIRED","error":"late","correlationId":"c-1"}', "TASK_EXPIRED"),
        "/html/v1/run": (502, b"<html>bad gateway</html>", "BAD_RESPONSE"),
    }

    def handler(request):
        status, body, _ = bodies[request.url.path]
        return httpx.Response(status, content=body, headers={"content-type": "application/json"})

    with client_for(handler, max_reply_bytes=1000) as c:
        for path, (status, _, code) in bodies.items():
            with pytest.raises(AgentCallError) as e:
                c.call(f"http://agent.example{path[:-7]}", "m")
            assert (e.value.code, e.value.status) == (code, status), path
            if code == "TASK_EXPIRED":
                assert e.value.correlation_id == "c-1" and e.value.message == "late"


def test_stream_reconnects_with_last_event_id_signed_afresh():
    caller = generate_did("sse-caller", namespace="net")
    seen = []

    def handler(request):
        seen.append(request)
        frames = encode_event('{"text":"a"}', "chunk", "run:0") + encode_event('{"text":"b"}', "chunk", "run:1")
        if request.headers.get("last-event-id") is None:
            # The connection ends before the final event.
            return httpx.Response(200, content=frames.encode(), headers={"content-type": "text/event-stream"})
        assert request.headers["last-event-id"] == "run:1"
        rest = encode_event('{"text":"c"}', "chunk", "run:2") + encode_event('{"message":"abc","sessionId":"s"}', "done", "run:3")
        return httpx.Response(200, content=rest.encode(), headers={"content-type": "text/event-stream"})

    with client_for(handler) as c:
        events = list(c.stream("http://agent.example", "m", sign_as=caller))
    assert [e.get("text", e.get("message")) for e in events] == ["a", "b", "c", "abc"]
    assert len(seen) == 2
    inputs = [hs.parse_dictionary(r.headers["signature-input"])["sig1"].param("nonce") for r in seen]
    assert inputs[0] != inputs[1]


def test_stream_gives_up_after_its_reconnects_and_reports_error_events():
    def cut(request):
        return httpx.Response(200, content=encode_event('{"text":"a"}', "chunk", "run:0").encode(), headers={"content-type": "text/event-stream"})

    with client_for(cut, reconnects=2) as c, pytest.raises(AgentCallError) as e:
        list(c.stream("http://agent.example", "m"))
    assert e.value.code == "AGENT_UNREACHABLE"

    def failing(request):
        error = '{"_tag":"HandlerFailed","code":"HANDLER_FAILED","message":"x","error":"x","correlationId":"c"}'
        return httpx.Response(200, content=encode_event(error, "error", "run:0").encode(), headers={"content-type": "text/event-stream"})

    with client_for(failing) as c, pytest.raises(AgentCallError) as e:
        list(c.stream("http://agent.example", "m"))
    assert e.value.code == "HANDLER_FAILED"

    def huge(request):
        return httpx.Response(200, content=b"data: " + b"x" * 100, headers={"content-type": "text/event-stream"})

    with client_for(huge, max_event_bytes=50) as c, pytest.raises(AgentCallError) as e:
        list(c.stream("http://agent.example", "m"))
    assert e.value.code == "SSE_LIMIT_EXCEEDED"

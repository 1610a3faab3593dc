"""Server-Sent Events (text/event-stream, WHATWG HTML §9.2) both ways: ``encode_event`` frames one event as the
TypeScript agent server does, and ``SseParser`` reads a body incrementally under a limit per event and per stream
(docs/agent.md §7), because the peer decides the sizes and one unterminated event would otherwise grow the reader
without bound."""

from __future__ import annotations

import re
from dataclasses import dataclass

CONTENT_TYPE = "text/event-stream"
DEFAULT_MAX_EVENT_BYTES = 1024 * 1024
DEFAULT_MAX_STREAM_BYTES = 64 * 1024 * 1024
RESPONSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
"""Response headers of an event stream besides its type: no caching, no proxy buffering."""


def is_event_stream(header: str | None) -> bool:
    """Whether a ``Content-Type`` or ``Accept`` header names an event stream (media types ignore case)."""
    return header is not None and CONTENT_TYPE in header.lower()


@dataclass(frozen=True)
class SseEvent:
    """One event as read: ``data`` lines joined by newlines; ``id`` is the last event id seen so far."""

    id: str | None
    event: str
    data: str


class SseLimitExceeded(Exception):
    """The peer sent an event or a stream larger than the reader accepts."""

    def __init__(self, limit: str, max_bytes: int) -> None:
        super().__init__(f"the event stream sent {'an event' if limit == 'event' else 'a stream'} larger than {max_bytes} bytes")
        self.limit = limit
        self.max_bytes = max_bytes


def encode_event(data: str, event: str | None = None, id: str | None = None) -> str:
    """One event as SSE text: each line of ``data`` on its own ``data:`` line, then a blank line."""
    text = ""
    if id is not None:
        text += f"id: {id}\n"
    if event is not None:
        text += f"event: {event}\n"
    for line in re.split(r"\r\n|\r|\n", data):
        text += f"data: {line}\n"
    return text + "\n"


class SseParser:
    """A stateful reader: ``push`` each chunk of bytes, get the events it completes. An unfinished last event is
    never returned."""

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES, max_stream_bytes: int = DEFAULT_MAX_STREAM_BYTES) -> None:
        self.max_event_bytes = max_event_bytes
        self.max_stream_bytes = max_stream_bytes
        self._pending = bytearray()
        self._total = 0
        self._event_bytes = 0
        self._skip_lf = False
        self._first = True
        self._data: list[str] = []
        self._type = ""
        self.last_id: str | None = None

    def _line(self, raw: bytes, out: list[SseEvent]) -> None:
        text = raw.decode("utf-8", errors="replace")
        if self._first:
            self._first = False
            if text.startswith("\ufeff"):
                text = text[1:]
        if text == "":
            if self._data:
                out.append(SseEvent(self.last_id, self._type or "message", "\n".join(self._data)))
            self._data = []
            self._type = ""
            self._event_bytes = 0
            return
        if text.startswith(":"):
            return
        field, _, value = text.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
            self._event_bytes += len(raw)
        elif field == "event":
            self._type = value
        elif field == "id" and "\0" not in value:
            self.last_id = value

    def push(self, chunk: bytes) -> list[SseEvent]:
        """The events this chunk completes; ``SseLimitExceeded`` past a limit."""
        self._total += len(chunk)
        if self._total > self.max_stream_bytes:
            raise SseLimitExceeded("stream", self.max_stream_bytes)
        out: list[SseEvent] = []
        start = 0
        for i, b in enumerate(chunk):
            if self._skip_lf:
                self._skip_lf = False
                if b == 0x0A:
                    start = i + 1
                    continue
            if b != 0x0A and b != 0x0D:
                continue
            line = bytes(self._pending) + chunk[start:i]
            self._pending.clear()
            self._line(line, out)
            if self._event_bytes > self.max_event_bytes:
                raise SseLimitExceeded("event", self.max_event_bytes)
            self._skip_lf = b == 0x0D
            start = i + 1
        self._pending += chunk[start:]
        if self._event_bytes + len(self._pending) > self.max_event_bytes:
            raise SseLimitExceeded("event", self.max_event_bytes)
        return out

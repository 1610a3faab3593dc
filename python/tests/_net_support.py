"""Real processes for the cross-language tests: a TypeScript hub (``node dist/bin/mesh.js hub``) and node scripts
over ``dist/`` (the built TypeScript package), each on 127.0.0.1 with a port the OS picks."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import socket
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DIST = REPO / "dist"
SUPPORT = Path(__file__).resolve().parent / "support"
MESH = DIST / "bin" / "mesh.js"


def require_dist() -> None:
    """The cross tests need the built TypeScript package; CI builds it with ``npm ci``. Missing is a failure."""
    if not MESH.exists():
        raise RuntimeError(f"{MESH} is missing: run `npm run build` (or `npm ci`) in {REPO} first")


class _Lines:
    """A process's stdout read line by line on a thread, so a test can wait for a line with a timeout."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.q: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                self.q.put(line.rstrip("\n"))
        except (ValueError, OSError):
            pass  # closed by _stop once the process ended
        self.q.put(None)

    def until(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        rx = re.compile(pattern)
        while True:
            try:
                line = self.q.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"no line matching {pattern!r}; seen: {self.seen[-20:]}") from None
            if line is None:
                raise RuntimeError(f"process exited ({self.proc.wait()}) before {pattern!r}; seen: {self.seen[-20:]}")
            self.seen.append(line)
            m = rx.search(line)
            if m is not None:
                return m


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


@dataclass
class TsHub:
    url: str
    admin_key: str
    proc: subprocess.Popen[str]

    def close(self) -> None:
        _stop(self.proc)


def start_hub(workdir: Path) -> TsHub:
    """``mesh hub --port 0 --db <workdir>/hub.db``; reads the admin credential it prints on first start."""
    require_dist()
    proc = subprocess.Popen(
        ["node", str(MESH), "hub", "--port", "0", "--host", "127.0.0.1", "--db", str(workdir / "hub.db")],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = _Lines(proc)
    try:
        lines.until(r"admin credential")
        key = lines.until(r"^(mk_[A-Za-z0-9_-]+)$").group(1)
        url = lines.until(r"listening on (http://\S+)").group(1)
        lines.until(r"^\s+database\s")
    except Exception:
        _stop(proc)
        raise
    return TsHub(url, key, proc)


@dataclass
class TsAgent:
    url: str
    proc: subprocess.Popen[str]
    lines: _Lines

    def close(self) -> None:
        _stop(self.proc)


def start_ts_agent(options: dict[str, Any]) -> TsAgent:
    """``support/ts_agent.mjs``: an AgentServer over dist/ with these options (JSON); prints ``READY <url>``."""
    require_dist()
    proc = subprocess.Popen(
        ["node", str(SUPPORT / "ts_agent.mjs"), str(DIST), json.dumps(options)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = _Lines(proc)
    try:
        url = lines.until(r"^READY (\S+)").group(1)
    except Exception:
        _stop(proc)
        raise
    return TsAgent(url, proc, lines)


def run_node(script: str, request: dict[str, Any], timeout: float = 60.0) -> Any:
    """Runs ``support/<script>`` with the request as JSON on argv; its last stdout line is the JSON answer."""
    require_dist()
    done = subprocess.run(
        ["node", str(SUPPORT / script), str(DIST), json.dumps(request)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
    )
    out = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not out:
        raise RuntimeError(f"{script} failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}")
    return json.loads(out[-1])


class CuttingProxy:
    """A TCP proxy that cuts the first streamed run after two chunk events reach the client, and records the
    requests it forwards, so a test sees a real dropped connection and the reconnect that follows it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.upstream: tuple[str, int] | None = None
        self.requests: list[bytes] = []
        self.cut = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result()

    async def _serve(self) -> None:
        self.server = await asyncio.start_server(self._handle, sock=self.sock)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self.upstream is not None
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        cutting = False

        async def client_to_upstream() -> None:
            nonlocal cutting
            while data := await reader.read(65536):
                if data[:5] in (b"POST ", b"GET /"):
                    self.requests.append(bytes(data))
                    head = data.lower()
                    if b"text/event-stream" in head and b"last-event-id" not in head and not self.cut:
                        self.cut = cutting = True
                up_writer.write(data)
                await up_writer.drain()

        async def upstream_to_client() -> None:
            sent = 0
            while data := await up_reader.read(65536):
                writer.write(data)
                await writer.drain()
                sent += data.count(b"event: chunk")
                if cutting and sent >= 2:
                    break

        pump = asyncio.ensure_future(client_to_upstream())
        try:
            await upstream_to_client()
        finally:
            pump.cancel()
            for w in (writer, up_writer):
                w.close()
            await asyncio.gather(pump, writer.wait_closed(), up_writer.wait_closed(), return_exceptions=True)

    def close(self) -> None:
        async def stop() -> None:
            self.server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self.server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

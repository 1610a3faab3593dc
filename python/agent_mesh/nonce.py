"""Replay protection (docs/protocol.md §6): remember each (sender, nonce) until its envelope can no longer validate,
and refuse a repeat. A bounded memory store; a full store of live nonces refuses rather than forgets."""

from __future__ import annotations

import math
import threading
from typing import Callable, Protocol

from .timestamp import now_ms as _wall_ms

__all__ = [
    "NonceRecordError",
    "NonceStore",
    "NonceRegistry",
    "SqliteNonceRegistry",
    "DEFAULT_MEMORY_CAPACITY",
    "default_quota",
]

DEFAULT_MEMORY_CAPACITY = 100_000
_SWEEP_EVERY = 4096


def default_quota(capacity: int) -> int:
    """The per-sender quota a store of ``capacity`` applies when none is given: 1/16 of it, at least 1."""
    return max(1, capacity // 16)


class NonceRecordError(Exception):
    """Why a nonce was not recorded: ``REPLAYED``, ``NONCE_STORE_FULL`` or ``NONCE_QUOTA_EXCEEDED``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class NonceStore(Protocol):
    """What envelope validation needs of a nonce store: an atomic record that raises ``NonceRecordError``."""

    def record(self, sender: str, nonce: str, retain_until_ms: int, now_ms: int | None = None) -> None: ...


class _Sender:
    __slots__ = ("nonces", "earliest")

    def __init__(self) -> None:
        self.nonces: dict[str, int] = {}
        self.earliest: float = math.inf


class NonceRegistry:
    """An in-memory nonce store holding at most ``capacity`` live nonces, at most ``per_sender_quota`` per sender
    (so one sender cannot crowd the others out). Thread-safe: of concurrent records of one pair exactly one wins.
    ``clock`` (epoch ms) defaults to the wall clock."""

    def __init__(
        self,
        capacity: int = DEFAULT_MEMORY_CAPACITY,
        per_sender_quota: int | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.capacity = capacity
        self.quota = per_sender_quota if per_sender_quota is not None else default_quota(capacity)
        self._clock = clock or _wall_ms
        self._senders: dict[str, _Sender] = {}
        self._size = 0
        self._earliest: float = math.inf
        self._since_sweep = 0
        self._lock = threading.Lock()

    def size(self) -> int:
        """Entries held (live, or expired and not yet swept). Not ``__len__``: an empty store must stay truthy."""
        return self._size

    def _sweep_sender(self, s: _Sender, now: int) -> None:
        s.earliest = math.inf
        for n, until in list(s.nonces.items()):
            if until <= now:
                del s.nonces[n]
                self._size -= 1
            elif until < s.earliest:
                s.earliest = until

    def _sweep(self, now: int) -> None:
        self._earliest = math.inf
        for sender, s in list(self._senders.items()):
            if s.earliest <= now:
                self._sweep_sender(s, now)
            if not s.nonces:
                del self._senders[sender]
            elif s.earliest < self._earliest:
                self._earliest = s.earliest

    def record(self, sender: str, nonce: str, retain_until_ms: int, now_ms: int | None = None) -> None:
        """Atomically records (sender, nonce) until ``retain_until_ms``; raises ``NonceRecordError`` when the pair
        is held (``REPLAYED``), the sender holds its quota or the store is full of live nonces."""
        with self._lock:
            now = self._clock() if now_ms is None else now_ms
            self._since_sweep += 1
            if self._since_sweep >= _SWEEP_EVERY:
                self._since_sweep = 0
                if self._earliest <= now:
                    self._sweep(now)
            s = self._senders.get(sender)
            held = s.nonces.get(nonce) if s is not None else None
            if held is not None and held > now:
                raise NonceRecordError("REPLAYED", f"nonce {nonce} from {sender} was already used")
            if held is None:
                if s is not None and len(s.nonces) >= self.quota:
                    if s.earliest <= now:
                        self._sweep_sender(s, now)
                    if len(s.nonces) >= self.quota:
                        raise NonceRecordError(
                            "NONCE_QUOTA_EXCEEDED", f"{sender} holds its quota of {self.quota} live nonces"
                        )
                if self._size >= self.capacity:
                    if self._earliest <= now:
                        self._sweep(now)
                    if self._size >= self.capacity:
                        raise NonceRecordError("NONCE_STORE_FULL", f"nonce store holds {self.capacity} live nonces")
                    s = self._senders.get(sender)
                if s is None:
                    s = _Sender()
                    self._senders[sender] = s
                self._size += 1
            assert s is not None
            s.nonces[nonce] = retain_until_ms
            if retain_until_ms < s.earliest:
                s.earliest = retain_until_ms
            if retain_until_ms < self._earliest:
                self._earliest = retain_until_ms


class SqliteNonceRegistry:
    """A nonce store in a SQLite file (docs/protocol.md §6, table ``mesh_nonces(sender, nonce, expires_at)``): replays
    stay refused across restarts and across processes sharing the file, the TypeScript ``NonceStoreSql`` included.
    One statement decides, so concurrent receivers accept a pair exactly once. With ``create_table`` it creates the
    table when missing; leave it off on a database the TypeScript side migrates (its migration creates the table)."""

    PURGE_EVERY = 1024

    def __init__(
        self,
        path: str,
        per_sender_quota: int = DEFAULT_MEMORY_CAPACITY // 16,
        clock: Callable[[], int] | None = None,
        create_table: bool = True,
    ) -> None:
        import sqlite3

        self.quota = per_sender_quota
        self._clock = clock or _wall_ms
        self._lock = threading.Lock()
        self._since_purge = 0
        # autocommit: each statement is its own transaction, as the single-statement design needs
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5.0)
        self._db.execute("PRAGMA busy_timeout = 5000")
        if create_table:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS mesh_nonces (sender TEXT NOT NULL, nonce TEXT NOT NULL, "
                "expires_at INTEGER NOT NULL, PRIMARY KEY (sender, nonce))"
            )
            self._db.execute("CREATE INDEX IF NOT EXISTS mesh_nonces_expires_at ON mesh_nonces (expires_at)")

    def close(self) -> None:
        """Closes the database connection."""
        self._db.close()

    def record(self, sender: str, nonce: str, retain_until_ms: int, now_ms: int | None = None) -> None:
        """Atomically records (sender, nonce) until ``retain_until_ms``; raises ``NonceRecordError`` (``REPLAYED``,
        ``NONCE_QUOTA_EXCEEDED``, ``NONCE_STORE_UNAVAILABLE``)."""
        import sqlite3

        now = self._clock() if now_ms is None else now_ms
        try:
            with self._lock:
                rows = self._db.execute(
                    "INSERT INTO mesh_nonces (sender, nonce, expires_at) SELECT ?, ?, ? "
                    "WHERE (SELECT COUNT(*) FROM mesh_nonces WHERE sender = ? AND expires_at > ?) < ? "
                    "ON CONFLICT (sender, nonce) DO UPDATE SET expires_at = excluded.expires_at "
                    "WHERE mesh_nonces.expires_at <= ? RETURNING sender",
                    (sender, nonce, int(retain_until_ms), sender, now, self.quota, now),
                ).fetchall()
                self._since_purge += 1
                if self._since_purge >= self.PURGE_EVERY:
                    self._since_purge = 0
                    self._db.execute("DELETE FROM mesh_nonces WHERE expires_at <= ?", (now,))
                if rows:
                    return
                held = self._db.execute(
                    "SELECT 1 FROM mesh_nonces WHERE sender = ? AND nonce = ? AND expires_at > ?", (sender, nonce, now)
                ).fetchone()
        except sqlite3.Error as e:
            raise NonceRecordError("NONCE_STORE_UNAVAILABLE", f"nonce database failed: {e}") from e
        if held is not None:
            raise NonceRecordError("REPLAYED", f"nonce {nonce} from {sender} was already used")
        raise NonceRecordError("NONCE_QUOTA_EXCEEDED", f"{sender} holds its quota of {self.quota} live nonces")

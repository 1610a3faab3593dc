"""Nonce stores (docs/protocol.md §6): the memory registry and the SQLite one, alone and shared with TypeScript."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from agent_mesh import build_envelope, generate_did, validate_envelope
from agent_mesh.nonce import NonceRecordError, NonceRegistry, SqliteNonceRegistry


def codes(store: NonceRegistry | SqliteNonceRegistry, *calls: tuple[str, str, int, int]) -> list[str | None]:
    out: list[str | None] = []
    for sender, nonce, until, now in calls:
        try:
            store.record(sender, nonce, until, now_ms=now)
            out.append(None)
        except NonceRecordError as e:
            out.append(e.code)
    return out


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_store_rules(kind: str, tmp_path: Path) -> None:
    store = (
        NonceRegistry(capacity=100, per_sender_quota=2)
        if kind == "memory"
        else SqliteNonceRegistry(str(tmp_path / "n.db"), per_sender_quota=2)
    )
    assert codes(
        store,
        ("a", "n1", 1000, 0),
        ("a", "n1", 1000, 999),  # held until 1000
        ("a", "n2", 2000, 0),
        ("a", "n3", 2000, 0),  # a holds its quota of 2
        ("b", "n1", 1000, 0),  # another sender is not affected
        ("a", "n1", 3000, 1000),  # retention passed: recorded again
        ("a", "n3", 3000, 2000),  # n2 expired: room under the quota
    ) == [None, "REPLAYED", None, "NONCE_QUOTA_EXCEEDED", None, None, None]


def test_sqlite_survives_a_restart_and_accepts_once_under_concurrency(tmp_path: Path) -> None:
    path = str(tmp_path / "n.db")
    SqliteNonceRegistry(path).record("a", "n", 10_000, now_ms=0)
    assert codes(SqliteNonceRegistry(path), ("a", "n", 10_000, 1)) == ["REPLAYED"]
    stores = [SqliteNonceRegistry(path) for _ in range(8)]
    results: list[str | None] = []
    lock = threading.Lock()

    def race(s: SqliteNonceRegistry) -> None:
        r = codes(s, ("c", "same", 10_000, 1))
        with lock:
            results.extend(r)

    threads = [threading.Thread(target=race, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results, key=str) == [None] + ["REPLAYED"] * 7


def test_sqlite_failure_is_unavailable(tmp_path: Path) -> None:
    store = SqliteNonceRegistry(str(tmp_path / "n.db"))
    store.close()
    assert codes(store, ("a", "n", 1, 0)) == ["NONCE_STORE_UNAVAILABLE"]
    alice, bob = generate_did("alice"), generate_did("bob")
    env = build_envelope("MeshRequest", alice["did"], bob["did"], {}, None, alice["private_key"])
    assert validate_envelope(env, alice["public_key_bytes"], bob["did"], store) == (False, "NONCE_STORE_UNAVAILABLE")


def test_sqlite_store_shared_with_typescript(node_eval, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A TypeScript receiver and a Python receiver on one database accept each envelope once between them."""
    alice, bob = generate_did("alice"), generate_did("bob")
    envs = [
        build_envelope("MeshRequest", alice["did"], bob["did"], {"i": i}, None, alice["private_key"]) for i in range(3)
    ]
    db = str(tmp_path / "shared.db")
    script = """
        import { MeshPromise } from 'DIST/promise/index.js';
        const store = await MeshPromise.openSqliteNonceStore(input.db);
        const r = [];
        for (const e of input.envs) r.push((await MeshPromise.validateEnvelope(e, input.pub, input.me, store))[1]);
        await store.close();
        out(r);
    """
    payload = {"db": db, "pub": alice["public_key_b64"], "me": bob["did"]}
    # TypeScript first: it migrates the database, then records envelope 0
    assert node_eval(script, {**payload, "envs": envs[:1]}) == [None]
    py = SqliteNonceRegistry(db, create_table=False)
    assert [validate_envelope(e, alice["public_key_bytes"], bob["did"], py)[1] for e in envs[:2]] == ["REPLAYED", None]
    py.close()
    assert node_eval(script, {**payload, "envs": envs}) == ["REPLAYED", "REPLAYED", None]

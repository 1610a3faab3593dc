"""Shared fixtures: the repository's vectors and a way to run TypeScript (the built ``dist/``) from a test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
VECTORS = REPO_ROOT / "test" / "vectors"
DIST = REPO_ROOT / "dist"


def load_vector(name: str) -> Any:
    """A file of ``test/vectors/`` parsed as JSON."""
    with open(VECTORS / name, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root (the parent of ``python/``)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def vectors() -> Callable[[str], Any]:
    """Loads a vector file by name."""
    return load_vector


def _require_dist() -> None:
    if shutil.which("node") is None:
        pytest.fail("node is not on PATH: the cross-language tests need it")
    if not (DIST / "core" / "index.js").exists():
        pytest.fail(f"{DIST} is missing: run `npm run build` in {REPO_ROOT} before the cross-language tests")


@pytest.fixture(scope="session")
def node_eval() -> Callable[[str, Any], Any]:
    """Runs an ES module with ``node`` in the repository root and returns what it prints as JSON.

    The script reads its input from ``input`` (the JSON given here) and ends with ``out(value)``, which prints the
    value as JSON and exits (the Promise facade's runtime would otherwise keep the process alive); ``hex`` and
    ``unhex`` convert bytes. ``DIST`` in the script is replaced by the file URL of the built ``dist/`` directory.
    """
    _require_dist()

    def run(script: str, payload: Any = None) -> Any:
        prelude = (
            "import { readFileSync as __read } from 'node:fs';\n"
            "globalThis.input = JSON.parse(__read(0, 'utf8'));\n"
            "globalThis.hex = (b) => Buffer.from(b).toString('hex');\n"
            "globalThis.unhex = (h) => new Uint8Array(Buffer.from(h, 'hex'));\n"
            "globalThis.out = (v) => { process.stdout.write(JSON.stringify(v) + '\\n'); process.exit(0) };\n"
        )
        code = prelude + script.replace("DIST", (DIST.as_uri()))
        proc = subprocess.run(
            ["node", "--input-type=module", "-e", code],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            encoding="utf-8",
            cwd=REPO_ROOT,
            timeout=120,
            env={**os.environ, "NODE_NO_WARNINGS": "1"},
        )
        if proc.returncode != 0:
            raise AssertionError(f"node failed ({proc.returncode}):\n{proc.stderr}\n{proc.stdout}")
        # split on "\n" only: str.splitlines would also break inside a JSON string holding U+2028
        return json.loads(proc.stdout.rstrip("\n").split("\n")[-1])

    return run

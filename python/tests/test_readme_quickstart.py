"""python/README.md's quick start, run as written: its snippet is read out of the README (so the test fails when it
drifts) and executed against a real TypeScript hub, with an identity file made by ``save_identity_file``."""

import os
import re
from pathlib import Path

from _net_support import start_hub

from agent_mesh import generate_did, save_identity_file
from agent_mesh.did import Identity


def quick_start() -> str:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text("utf-8")
    section = readme.split("\n## Quick start: an agent on a hub\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the quick start has one python block"
    return blocks[0]


def test_generate_did_returns_an_identity_object_that_is_still_a_dict():
    me = generate_did("visitor", namespace="acme")
    assert isinstance(me, Identity)
    assert me.did == me["did"] == "did:mesh:acme.visitor"
    assert me.did_hash == me["did_hash"]
    assert me.public_key_bytes == me["public_key_bytes"]
    assert me.document["id"] == me.did
    assert set(me) == {"did", "private_key", "public_key", "public_key_bytes", "document", "did_hash", "did_key", "public_key_b64"}


def test_the_readme_quick_start_runs_as_written(tmp_path, monkeypatch, capsys):
    (tmp_path / "hub").mkdir()
    hub = start_hub(tmp_path / "hub")
    try:
        monkeypatch.chdir(tmp_path)
        save_identity_file(generate_did("greeter"), tmp_path / "greeter.identity.json")
        monkeypatch.setenv("MESH_HUB", hub.url)
        monkeypatch.setenv("ADMIN_KEY", hub.admin_key)
        monkeypatch.setenv("PORT", "0")
        exec(compile(quick_start(), "python/README.md", "exec"), {"__name__": "readme"})
        out = capsys.readouterr().out.splitlines()
        assert out[0].startswith("did:mesh:visitor ")
        assert out[1] == "hello, you said: hi"
    finally:
        hub.close()

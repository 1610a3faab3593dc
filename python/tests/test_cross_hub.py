"""The Python hub client against a real TypeScript hub (``node dist/bin/mesh.js hub``) on 127.0.0.1: registry,
the platform challenge exchange, and a spending allocation made from Python against the TypeScript ledger, with
mandates issued in Python and ledger requests signed with mesh-sig."""

from __future__ import annotations

import httpx
import pytest

from _net_support import start_hub
from agent_mesh import commit_token
from agent_mesh import hub as hub_module
from agent_mesh.did import did_hash, generate_did
from agent_mesh.hub import HubClient, HubError
from agent_mesh.mandate import attenuate_to_cart, issue_intent_mandate


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    h = start_hub(tmp_path_factory.mktemp("hub"))
    yield h
    h.close()


@pytest.fixture(scope="module")
def admin(hub):
    with HubClient(hub.url, hub.admin_key) as client:
        yield client


def manifest(name: str) -> dict:
    return {"name": name, "meshProtocolVersion": "1.0", "description": "cross-language test agent"}


def test_registry_round_trip(hub, admin):
    alice = generate_did("alice", namespace="hubtest")
    record = admin.register_agent(manifest("alice"), "http://127.0.0.1:9/alice", identity=alice)
    assert record["didHash"] == did_hash(alice["did"]) == alice["did_hash"]
    resolved = admin.resolve_agent(record["didHash"])
    assert resolved["endpointUrl"] == "http://127.0.0.1:9/alice" and resolved["publicKeyB64"] == alice["public_key_b64"]
    assert record["didHash"] in [a["didHash"] for a in admin.list_agents(200)]
    assert admin.resolve_key(alice["did"]) == alice["public_key_bytes"]
    # a second registration of the DID under another key
    with pytest.raises(HubError) as e:
        admin.register_agent(manifest("alice"), "http://127.0.0.1:9/x", identity={**generate_did("alice", namespace="hubtest")})
    assert (e.value.code, e.value.status) == ("DID_TAKEN", 409)
    # no API key
    with HubClient(hub.url) as anonymous, pytest.raises(HubError) as e:
        anonymous.register_agent(manifest("bob"), "http://127.0.0.1:9/bob", identity=generate_did("bob", namespace="hubtest"))
    assert (e.value.code, e.value.status) == ("INVALID_API_KEY", 401)


def test_a_registration_proof_names_the_hub_it_is_for(hub):
    # signed for another hub's origin: refused by this one
    with HubClient(hub.url, hub.admin_key, public_hub_url="http://hub.example") as wrong, pytest.raises(HubError) as e:
        wrong.register_agent(manifest("carol"), "http://127.0.0.1:9/carol", identity=generate_did("carol", namespace="hubtest"))
    assert (e.value.code, e.value.status) == ("SIGNATURE_INVALID", 401)


def test_register_agent_without_identity_generates_one(admin):
    record = admin.register_agent(manifest("Generated Agent"), "http://127.0.0.1:9/gen")
    identity = record["identity"]
    assert identity["did"] == "did:mesh:generated-agent" and record["didHash"] == identity["did_hash"]


def test_mcp_and_skills_get_generated_dids(admin):
    mcp = admin.register_mcp("Search Tools", "http://127.0.0.1:9/mcp", ["search", {"name": "fetch", "inputSchema": {"type": "object"}}])
    assert mcp["did"].startswith("did:mesh:mcp.search-tools-") and len(mcp["did"].rsplit("-", 1)[1]) == 8
    assert admin.resolve_mcp(mcp["didHash"])["did"] == mcp["did"]
    skill = admin.register_skill("notes", "memory")
    assert skill["did"].startswith("did:mesh:skill.notes-") and admin.resolve_skill(skill["didHash"])["skillType"] == "memory"
    assert admin.register_skill("plain")["skillType"] == "custom"
    with pytest.raises(ValueError):
        admin.register_skill("bad", "nonsense")


def test_challenge_exchange_issues_an_agent_key(hub, admin):
    dave = generate_did("dave", namespace="hubtest")
    with HubClient(hub.url) as client:
        issued = client.request_agent_key(dave)
        assert issued["did"] == dave["did"] and issued["apiKey"].startswith("mk_")
        # the key registers its own DID, and nobody else's
        record = client.register_agent(manifest("dave"), "http://127.0.0.1:9/dave", issued["apiKey"], identity=dave)
        assert record["didHash"] == dave["did_hash"]
        with pytest.raises(HubError) as e:
            client.register_agent(manifest("eve"), "http://127.0.0.1:9/eve", issued["apiKey"], identity=generate_did("eve", namespace="hubtest"))
        assert (e.value.code, e.value.status) == ("NOT_OWNER", 403)
        # a challenge for a registered DID under another key
        with pytest.raises(HubError) as e:
            client.request_agent_key({**generate_did("other", namespace="hubtest"), "did": dave["did"]})
        assert (e.value.code, e.value.status) == ("INVALID_PUBLIC_KEY", 422)
        assert client.status()["status"] in ("ok", "degraded")


def test_spending_allocation_from_python_against_the_typescript_ledger(hub, admin):
    user = generate_did("user", namespace="ledger")
    buyer = generate_did("buyer", namespace="ledger")
    shop = generate_did("shop", namespace="ledger")
    for who in (user, buyer, shop):
        admin.register_agent(manifest(who["did"]), "http://127.0.0.1:9/x", identity=who)
    intent = issue_intent_mandate(user["did"], buyer["did"], {"spendLimitUsd": 100}, user["private_key"])

    with HubClient(hub.url, hub.admin_key, identity=buyer) as ledger:
        pool = ledger.open_pool(intent.token)
        assert (pool["grantor"], pool["grantee"], pool["limitUsd"], pool["remainingUsd"]) == (user["did"], buyer["did"], 100, 100)
        assert ledger.open_pool(intent.token)["poolId"] == pool["poolId"]

        cart = attenuate_to_cart(intent, shop["did"], {"spendLimitUsd": 60}, buyer["private_key"])
        # The key names the saga step the receipt will prove (<sagaId>:<step>), the only receipt the ledger takes for it.
        allocation = ledger.allocate(pool["poolId"], cart.token, "saga-py:pay")
        assert (allocation["amountUsd"], allocation["status"], allocation["childJti"]) == (60, "active", cart.jti)
        assert ledger.allocate(pool["poolId"], cart.token, "saga-py:pay")["allocationId"] == allocation["allocationId"]
        assert ledger.get_pool(pool["poolId"])["remainingUsd"] == 40

        too_much = attenuate_to_cart(intent, shop["did"], {"spendLimitUsd": 50}, buyer["private_key"])
        with pytest.raises(HubError) as e:
            ledger.allocate(pool["poolId"], too_much.token, "step-2")
        assert (e.value.code, e.value.status) == ("BUDGET_EXHAUSTED", 409)
        with pytest.raises(HubError) as e:
            ledger.allocate(pool["poolId"], too_much.token, "saga-py:pay")
        assert (e.value.code, e.value.status) == ("IDEMPOTENCY_KEY_REUSED", 409)

        receipt = {
            "sagaId": "saga-py",
            "step": "pay",
            "capability": "checkout",
            "amountUsd": "25",
            "resultDigest": commit_token.digest_result("paid"),
            "at": "2026-01-01T12:00:00.000Z",
            "issuer": shop["did"],
        }
        token = commit_token.sign(receipt, shop["private_key"])
        released = ledger.release(allocation["allocationId"], "25.00", token)  # USD as the decimal string Money reads
        assert released["allocation"]["status"] == "released" and released["pool"]["remainingUsd"] == 75
        listed = ledger.list_allocations(pool["poolId"])
        assert listed["usedUsd"] == 25 and [a["commitToken"] for a in listed["allocations"]] == [token]

    # only the grantee: the grantor signing, the admin key alone, or a signature by another key are refused
    with HubClient(hub.url, hub.admin_key) as other:
        with pytest.raises(HubError) as e:
            other.get_pool(pool["poolId"], identity=user)
        assert (e.value.code, e.value.status) == ("NOT_OWNER", 403)
        with pytest.raises(HubError) as e:
            other.get_pool(pool["poolId"])
        assert (e.value.code, e.value.status) == ("NOT_OWNER", 403)
        with pytest.raises(HubError) as e:
            other.get_pool(pool["poolId"], identity={"did": buyer["did"], "private_key": shop["private_key"]})
        assert (e.value.code, e.value.status) == ("SIGNATURE_INVALID", 401)


def test_update_rotate_and_delete_are_signed_by_the_current_key(hub, admin):
    frank = generate_did("frank", namespace="hubtest")
    with HubClient(hub.url) as client:
        key = client.request_agent_key(frank)["apiKey"]
        client.register_agent(manifest("frank"), "http://127.0.0.1:9/frank", key, identity=frank)
        updated = client.update_agent(frank["did_hash"], endpoint_url="http://127.0.0.1:9/frank2", identity=frank, api_key=key)
        assert updated["endpointUrl"] == "http://127.0.0.1:9/frank2"
        # signed by another key: refused
        with pytest.raises(HubError) as e:
            client.update_agent(frank["did_hash"], endpoint_url="http://127.0.0.1:9/x", identity={"did": frank["did"], "private_key": generate_did("other-key")["private_key"]}, api_key=key)
        assert (e.value.code, e.value.status) == ("SIGNATURE_INVALID", 401)
        rotated_key = {**generate_did("frank", namespace="hubtest")}
        record = client.rotate_agent_key(rotated_key, identity=frank, api_key=key)
        assert record["keyVersion"] == 2 and record["publicKeyB64"] == rotated_key["public_key_b64"]
        with HubClient(hub.url) as fresh:
            assert fresh.resolve_key(frank["did"]) == rotated_key["public_key_bytes"]
        # the old key no longer signs for the DID
        with pytest.raises(HubError) as e:
            client.delete_agent(frank["did_hash"], identity=frank, api_key=key)
        assert e.value.code == "SIGNATURE_INVALID"
        client.delete_agent(frank["did_hash"], identity={"did": frank["did"], "private_key": rotated_key["private_key"]}, api_key=key)
        with pytest.raises(HubError) as e:
            client.resolve_agent(frank["did_hash"])
        assert (e.value.code, e.value.status) == ("NOT_FOUND", 404)


def test_identical_writes_in_one_millisecond_all_apply_and_a_replay_is_refused(hub, monkeypatch):
    grace = generate_did("grace", namespace="hubtest")
    # The client's clock stands still: every proof it makes reads the same millisecond (whole seconds before).
    frozen = hub_module.now_ms()
    monkeypatch.setattr(hub_module, "now_ms", lambda: frozen)
    with HubClient(hub.url) as client:
        key = client.request_agent_key(grace)["apiKey"]
        # the same registration twice (a deletion between: the DID's own key registers it again)
        client.register_agent(manifest("grace"), "http://127.0.0.1:9/grace", key, identity=grace)
        client.delete_agent(grace["did_hash"], identity=grace, api_key=key)
        client.register_agent(manifest("grace"), "http://127.0.0.1:9/grace", key, identity=grace)
        # the same update twice
        for _ in range(2):
            client.update_agent(grace["did_hash"], endpoint_url="http://127.0.0.1:9/moved", identity=grace, api_key=key)
        assert client.resolve_agent(grace["did_hash"])["endpointUrl"] == "http://127.0.0.1:9/moved"
        # the once-only rule stands: the same signed body sent again is refused
        current = client.resolve_agent(grace["did_hash"])
        document = {"type": "AgentUpdate", "hub": client.hub, "did": grace["did"], "keyVersion": current["keyVersion"], "endpointUrl": "http://127.0.0.1:9/again"}
        body = {"endpointUrl": "http://127.0.0.1:9/again", "proof": client._prove(document, grace)}
        url = f"{hub.url}/v1/agents/{grace['did_hash']}"
        headers = {"authorization": f"Bearer {key}"}
        assert httpx.patch(url, json=body, headers=headers).status_code == 200
        replayed = httpx.patch(url, json=body, headers=headers)
        assert (replayed.status_code, replayed.json()["code"]) == (401, "SIGNATURE_INVALID")

"""The HTTP API through FastAPI's TestClient: routes, error mapping, auth and scoping."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from graphmem.config import ApiKey, ServerSettings, Settings
from graphmem.memory import GraphMemory
from graphmem.opening import open_memory
from graphmem.server.http import create_app
from tests.conftest import Stores
from tests.interfaces.conftest import auth, keyed_settings, snapshot


def _create(client: TestClient, **body: Any) -> dict[str, Any]:
    r = client.post("/memories", json={"content": "Alice prefers tea", **body})
    assert r.status_code == 201, r.text
    data: dict[str, Any] = r.json()
    return data


# -- memories ------------------------------------------------------------------------------


def test_memory_lifecycle(client: TestClient, store: GraphMemory) -> None:
    m = _create(
        client,
        agent_id="assistant",
        tags=["Prefs"],
        importance=0.7,
        metadata={"source": {"kind": "chat"}},
    )
    assert m["agent_id"] == "assistant" and m["tags"] == ["prefs"] and "embedding" not in m
    assert store.get(m["id"]).importance == 0.7
    assert client.get(f"/memories/{m['id']}").json()["content"] == "Alice prefers tea"

    r = client.patch(
        f"/memories/{m['id']}", json={"content": "Alice prefers green tea", "reason": "correction"}
    )
    assert r.status_code == 200
    new = r.json()
    assert new["id"] != m["id"] and new["importance"] == 0.7
    assert client.get(f"/memories/{m['id']}").json()["status"] == "superseded"
    versions = client.get(f"/memories/{new['id']}/history").json()
    assert [v["id"] for v in versions] == [m["id"], new["id"]]

    # the superseded version cannot be updated again
    again = client.patch(f"/memories/{m['id']}", json={"content": "x"})
    assert again.status_code == 409 and again.json()["error"] == "Conflict"

    listed = client.get("/memories", params={"agent_id": "assistant"}).json()
    assert [x["id"] for x in listed] == [new["id"]]

    dry = client.delete(f"/memories/{new['id']}", params={"dry_run": True}).json()
    assert dry["dry_run"] and set(dry["deleted"]) == {m["id"], new["id"]}
    assert store.count(status=None) == 2
    gone = client.delete(f"/memories/{new['id']}")
    assert gone.status_code == 200 and store.count(status=None) == 0
    assert client.get(f"/memories/{new['id']}").status_code == 404


def test_batch_create_is_atomic(client: TestClient, store: GraphMemory) -> None:
    items = [{"content": f"fact {i}", "tags": ["batch"]} for i in range(5)]
    r = client.post("/memories/batch", json={"items": items})
    assert r.status_code == 201 and len(r.json()) == 5
    before = snapshot(store)
    bad = client.post("/memories/batch", json={"items": [*items, {"content": ""}]})
    assert bad.status_code == 422 and "item 5" in bad.json()["detail"]
    assert snapshot(store) == before


def test_batch_size_limit(store: GraphMemory) -> None:
    settings = Settings(embedder="none", server={"max_batch": 3})  # type: ignore[arg-type]
    with TestClient(create_app(store, settings=settings)) as c:
        r = c.post("/memories/batch", json={"items": [{"content": "x"}] * 4})
        assert r.status_code == 422 and "at most 3" in r.json()["detail"]
    assert store.count() == 0


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"content": ""}, "content"),
        ({"content": 5}, "content"),
        ({"content": "x", "importance": 2}, "importance"),
        ({"content": "x", "tags": ["not a tag!"]}, "tag"),
        ({"content": "x", "category": "gossip"}, "category"),
        ({"content": "x", "created_at": "2024-01-01T00:00:00"}, "timezone"),
        ({"content": "x", "id": "chosen"}, "id"),
        ({"content": "x", "metadata": [1, 2]}, "metadata"),
        ({}, "content"),
    ],
)
def test_invalid_memories_are_422_and_change_nothing(
    client: TestClient, store: GraphMemory, body: dict[str, Any], needle: str
) -> None:
    before = snapshot(store)
    r = client.post("/memories", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "InvalidInput" and needle in r.json()["detail"]
    assert snapshot(store) == before


def test_malformed_json_and_wrong_methods(client: TestClient) -> None:
    r = client.post("/memories", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["error"] == "InvalidInput"
    assert client.put("/memories").status_code == 405
    assert client.get("/no/such/route").json()["error"] == "NotFound"


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000 + b"]" * 100_000,  # deeper than the JSON parser recurses
        b'{"content": "x", "metadata": {"a": ' + b"[" * 5000 + b"]" * 5000 + b"}}",
        b'{"content": "' + bytes([0xFF, 0xFE]) + b'"}',  # not UTF-8
        b'{"content": "x", "metadata": {"n": ' + b"9" * 5000 + b"}}",  # past int() digits
    ],
    ids=["nested-100k", "nested-metadata", "not-utf8", "long-number"],
)
def test_bodies_the_json_parser_gives_up_on_are_422_like_other_malformed_json(
    client: TestClient, store: GraphMemory, raw: bytes
) -> None:
    # found by probing: these were 400 {"error": "HTTPError"} where every other malformed
    # body is the documented 422 InvalidInput
    before = snapshot(store)
    r = client.post("/memories", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "InvalidInput" and "JSON" in r.json()["detail"]
    assert snapshot(store) == before


def test_body_size_limit(store: GraphMemory) -> None:
    settings = Settings(embedder="none", server={"max_body_bytes": 4096})  # type: ignore[arg-type]
    with TestClient(create_app(store, settings=settings)) as c:
        big = {"content": "x" * 5000}
        r = c.post("/memories", json=big)
        assert r.status_code == 413
        # without a content-length header too (chunked upload)
        r = c.post(
            "/memories",
            content=iter([b'{"content": "', b"x" * 5000, b'"}']),
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 413
        assert c.post("/memories", json={"content": "small"}).status_code == 201
    assert store.count() == 1


# -- recall and context ----------------------------------------------------------------------


def test_recall_and_context(client: TestClient) -> None:
    _create(client, agent_id="a")
    _create(client, content="Bob likes coffee", agent_id="b")
    hits = client.post("/recall", json={"query": "tea", "k": 5}).json()
    assert [h["memory"]["content"] for h in hits] == ["Alice prefers tea"]
    assert "embedding" not in hits[0]["memory"] and hits[0]["breakdown"]
    scoped = client.post("/recall", json={"query": "coffee", "scope": "a"}).json()
    assert scoped == []  # b's private memory is outside a's scope
    ctx = client.post("/context", json={"query": "tea", "max_tokens": 500}).json()["context"]
    assert "Alice prefers tea" in ctx
    bad = client.post("/recall", json={"query": "", "k": 0})
    assert bad.status_code == 422 and {tuple(e["loc"]) for e in bad.json()["errors"]} == {
        ("body", "query"),
        ("body", "k"),
    }
    lexical = client.post("/recall", json={"query": "tea", "preset": "lexical"}).json()
    assert [h["memory"]["content"] for h in lexical] == ["Alice prefers tea"]
    assert lexical[0]["breakdown"].get("vector", 0) == 0
    assert client.post("/recall", json={"query": "tea", "preset": "nope"}).status_code == 422
    assert client.post("/context", json={"query": "tea", "preset": "precise"}).status_code == 200


# -- runs, events, sessions -------------------------------------------------------------------


def test_runs_and_events(client: TestClient) -> None:
    run = client.post("/runs", json={"run_id": "s1", "agent_id": "bot", "user_id": "u1"})
    assert run.status_code == 201
    assert client.post("/runs", json={"run_id": "s1"}).status_code == 409
    events = [{"event_type": "user_message", "content": f"turn {i}"} for i in range(4)]
    r = client.post("/runs/s1/events", json={"events": events})
    assert r.status_code == 201 and [e["seq"] for e in r.json()] == [0, 1, 2, 3]
    assert all(e["agent_id"] == "bot" for e in r.json())
    client.post(
        "/runs/s2/events",
        json={"events": [{"event_type": "tool_call", "content": "ls", "agent_id": "bot"}]},
    )
    got = client.get("/runs/s1/events", params={"limit": 2}).json()
    assert [e["content"] for e in got] == ["turn 2", "turn 3"]
    assert [r["id"] for r in client.get("/runs", params={"agent_id": "bot"}).json()] == ["s2", "s1"]

    page = client.get("/memory/events", params={"agent_id": "bot", "limit": 3}).json()
    assert page["agent"] == "bot" and page["total"] == 5
    assert [e["content"] for e in page["events"]] == ["turn 2", "turn 3", "ls"]
    one = client.get("/memory/events", params={"agent_id": "bot", "session_id": "s1"}).json()
    assert one["total"] == 4 and len(one["events"]) == 4
    sessions = client.get("/memory/sessions", params={"agent_id": "bot"}).json()
    assert sessions["total"] == 2 and {s["id"] for s in sessions["sessions"]} == {"s1", "s2"}
    for limit in (0, 1001):
        assert client.get("/memory/events", params={"limit": limit}).status_code == 422

    ended = client.post("/runs/s1/end", json={}).json()
    assert ended["status"] == "completed" and ended["ended_at"]
    assert client.delete("/runs/s1").status_code == 200
    assert client.get("/runs/s1").status_code == 404


# -- org facts, maintenance, service -------------------------------------------------------


def test_org_facts(client: TestClient, store: GraphMemory) -> None:
    store.agents.register("cto", seniority="lead")
    store.agents.register("intern", seniority="junior")
    r = client.post(
        "/org/facts",
        json={"content": "Deploys need two reviewers", "fact_id": "deploys", "author": "cto"},
    )
    assert r.status_code == 201 and r.json()["version"] == 1
    denied = client.post(
        "/org/facts", json={"content": "Deploy whenever", "fact_id": "deploys", "author": "intern"}
    )
    assert denied.status_code == 403 and denied.json()["error"] == "AccessDenied"
    v2 = client.post(
        "/org/facts",
        json={
            "content": "Deploys need one reviewer",
            "fact_id": "deploys",
            "author": "cto",
            "expected_version": 1,
        },
    )
    assert v2.json()["version"] == 2
    stale = client.post(
        "/org/facts",
        json={"content": "x", "fact_id": "deploys", "author": "cto", "expected_version": 1},
    )
    assert stale.status_code == 409
    assert [f["content"] for f in client.get("/org/facts").json()] == ["Deploys need one reviewer"]
    assert client.get("/org/facts", params={"q": "reviewer"}).json()[0]["fact_id"] == "deploys"
    assert len(client.get("/org/facts/deploys/versions").json()) == 2
    client.post("/org/facts/deploys/retract", json={"author": "cto", "reason": "obsolete"})
    ops = client.get("/org/facts/deploys/history").json()
    assert [o["operation"] for o in ops] == ["publish", "publish", "retract"]
    assert client.get("/org/facts").json() == []
    assert client.get("/org/facts/nope").status_code == 404


def test_maintenance_is_a_dry_run_by_default(client: TestClient, store: GraphMemory) -> None:
    for text in (
        "Alice prefers tea with milk in the morning",  # an exact repeat would be
        "Alice prefers tea with milk each morning",
    ):  # reconciled, not stored twice
        _create(client, content=text)
    before = snapshot(store)
    plan = client.post("/maintenance/consolidate", json={})
    assert plan.status_code == 200 and plan.json()["dry_run"]
    assert len(plan.json()["groups"]) == 1 and snapshot(store) == before
    cycle = client.post("/maintenance/run", json={"agent_id": "default"})
    assert cycle.status_code == 200 and cycle.json()["dry_run"] and snapshot(store) == before
    done = client.post("/maintenance/consolidate", json={"dry_run": False})
    assert done.status_code == 200 and store.count() == 1
    [merged] = store.list()
    assert len(store.lifecycle.provenance(merged.id).nodes) == 3  # merged + its two sources
    assert client.post("/maintenance/consolidate", json={"dry_run": "maybe"}).status_code == 422


def test_reflect_cites_memories(client: TestClient) -> None:
    m = _create(client, content="Carla is allergic to peanuts", agent_id="a")
    r = client.post("/reflect", json={"question": "What is Carla allergic to?", "scope": "a"})
    assert r.status_code == 200
    assert "peanuts" in r.json()["answer"] and r.json()["cited_ids"] == [m["id"]]
    assert client.post("/reflect", json={"question": ""}).status_code == 422


def test_health_stats_and_openapi(client: TestClient) -> None:
    assert client.get("/health").json()["status"] == "ok"
    _create(client)
    assert client.get("/stats").json()["nodes"]["Memory"] == 1
    spec = client.get("/openapi.json").json()
    paths = set(spec["paths"])
    for p in (
        "/memories",
        "/memories/batch",
        "/memories/{memory_id}",
        "/recall",
        "/context",
        "/runs",
        "/runs/{run_id}/events",
        "/memory/events",
        "/memory/sessions",
        "/org/facts",
        "/maintenance/consolidate",
        "/maintenance/run",
        "/reflect",
        "/stats",
        "/health",
    ):
        assert p in paths, p
    assert "MemoryIn" in spec["components"]["schemas"]


@pytest.mark.embedded("the app opens the store its Settings name: here a file by its path")
def test_app_from_settings_opens_and_closes_its_store(tmp_path: Any) -> None:
    settings = Settings(url=str(tmp_path / "own.db"), embedder="none")
    with TestClient(create_app(settings)) as c:
        assert _create(c)["content"] == "Alice prefers tea"
    with GraphMemory.open(str(tmp_path / "own.db"), embedder=None) as mem:
        assert mem.count() == 1


# -- auth and scoping ----------------------------------------------------------------------


def test_missing_or_unknown_key_is_401(keyed: TestClient, store: GraphMemory) -> None:
    for headers in ({}, auth("wrong-key-000"), {"Authorization": "Basic abc"}):
        r = keyed.post("/memories", json={"content": "x"}, headers=headers)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert keyed.get("/health").status_code == 200  # liveness needs no key
    assert store.count() == 0


def test_a_key_acts_as_its_agent(keyed: TestClient, store: GraphMemory) -> None:
    m = keyed.post(
        "/memories", json={"content": "alice's secret"}, headers={"X-API-Key": "alice-key-123"}
    ).json()
    assert m["agent_id"] == "alice" and m["namespace"] == "default"
    before = snapshot(store)
    for body in ({"content": "x", "agent_id": "bob"}, {"content": "x", "namespace": "team"}):
        r = keyed.post("/memories", json=body, headers=auth("alice-key-123"))
        assert r.status_code == 403 and r.json()["error"] == "AccessDenied"
    assert snapshot(store) == before

    # bob may not read, change or delete alice's private memory, nor recall it
    bob = auth("bob-key-4567")
    assert keyed.get(f"/memories/{m['id']}", headers=bob).status_code == 403
    assert (
        keyed.patch(f"/memories/{m['id']}", json={"content": "y"}, headers=bob).status_code == 403
    )
    assert keyed.delete(f"/memories/{m['id']}", headers=bob).status_code == 403
    assert keyed.post("/recall", json={"query": "secret"}, headers=bob).json() == []
    assert (
        keyed.post("/recall", json={"query": "secret", "scope": "alice"}, headers=bob).status_code
        == 403
    )
    assert keyed.get("/memories", headers=bob).json() == []
    assert snapshot(store) == before

    # alice can; bob can use his second namespace; store-wide routes need a '*' key
    alice = auth("alice-key-123")
    hits = keyed.post("/recall", json={"query": "secret"}, headers=alice).json()
    assert [h["memory"]["id"] for h in hits] == [m["id"]]
    assert (
        keyed.post(
            "/memories", json={"content": "team note", "namespace": "team"}, headers=bob
        ).status_code
        == 201
    )
    assert keyed.get("/stats", headers=alice).status_code == 403
    assert keyed.get("/stats", headers=auth("admin-key-89")).status_code == 200
    assert keyed.get("/memory/events", headers=alice).json()["agent"] == "alice"
    assert keyed.get("/memory/events", params={"agent_id": "bob"}, headers=alice).status_code == 403


def test_runs_are_private_to_their_agent_under_auth(keyed: TestClient) -> None:
    alice, bob = auth("alice-key-123"), auth("bob-key-4567")
    keyed.post(
        "/runs/r1/events",
        json={"events": [{"event_type": "user_message", "content": "hi"}]},
        headers=alice,
    )
    assert keyed.get("/runs/r1", headers=alice).json()["agent_id"] == "alice"
    assert keyed.get("/runs/r1/events", headers=bob).status_code == 403
    assert (
        keyed.post(
            "/runs/r1/events",
            json={"events": [{"event_type": "user_message", "content": "intrude"}]},
            headers=bob,
        ).status_code
        == 403
    )
    assert keyed.get("/memory/sessions", headers=bob).json()["total"] == 0


def test_keys_come_from_settings_of_the_memory(tmp_path: Any) -> None:
    settings = keyed_settings()
    with (
        open_memory(settings.replace(url=str(tmp_path / "k.db"))) as mem,
        TestClient(create_app(mem)) as c,
    ):
        assert c.get("/memories").status_code == 401
        assert c.get("/memories", headers=auth("alice-key-123")).status_code == 200


def test_padded_agent_id_of_a_run_is_422_not_500(client: TestClient, store: GraphMemory) -> None:
    # found by the fuzzer: Run.agent_id became an Agent node id without the id rule
    before = snapshot(store)
    r = client.post("/runs", json={"agent_id": " padded "})
    assert r.status_code == 422 and "agent_id" in r.json()["detail"]
    r = client.post(
        "/runs/r9/events",
        json={"events": [{"event_type": "user_message", "content": "x", "agent_id": "a\n"}]},
    )
    assert r.status_code == 422
    assert snapshot(store) == before


def test_an_unavailable_backend_is_503(stores: Stores) -> None:
    mem = stores.open("closed.db", embedder=None)
    client = TestClient(create_app(mem))
    mem.backend.close()  # the store goes away under a running app
    r = client.post("/memories", json={"content": "x"})
    assert r.status_code == 503 and r.json()["error"] == "BackendUnavailable"
    assert client.get("/health").status_code == 503
    mem.close()


# -- no request answers 500 -----------------------------------------------------------------

LATE = "9999-12-31T23:59:59-05:00"  # past year 9999 once in UTC
EARLY = "0001-01-01T00:00:00+05:00"  # before year 1 once in UTC


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/memories", {"content": "x", "metadata": {"k": [18446744073709551616]}}),
        ("/memories", {"content": "x", "metadata": {"k": 18446744073709551616}}),
        ("/memories", {"content": "x", "metadata": {"k": [1.5, float("nan")]}}),
        ("/memories", {"content": "x", "created_at": LATE}),
        ("/memories", {"content": "x", "created_at": EARLY}),
        ("/memories", {"content": "x", "valid_from": LATE}),
        ("/memories", {"content": "x", "expires_at": EARLY}),
        ("/memories", {"content": "x", "agent_id": "a\ud800"}),
        ("/memories/batch", {"items": [{"content": "x", "created_at": LATE}]}),
        ("/recall", {"query": "tea", "as_of": LATE}),
        ("/recall", {"query": "tea", "since": EARLY}),
        ("/recall", {"query": "tea", "category": "bogus"}),
        ("/recall", {"query": "tea \ud800"}),
        ("/context", {"query": "tea", "until": LATE}),
        ("/runs", {"run_id": "r9", "metadata": {"k": [2**64]}}),
    ],
)
def test_bad_values_are_422_not_500(store: GraphMemory, path: str, body: dict[str, Any]) -> None:
    store.remember("tea at noon")
    before = snapshot(store)
    with TestClient(create_app(store), raise_server_exceptions=False) as c:
        # json.dumps as a client would send it: NaN tokens, surrogates as \ud800 escapes
        r = c.post(
            path, content=json.dumps(body).encode(), headers={"content-type": "application/json"}
        )
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "InvalidInput" and r.json()["detail"]
    assert snapshot(store) == before


def test_ending_a_run_with_an_unknown_status_is_422(client: TestClient, store: GraphMemory) -> None:
    assert client.post("/runs", json={"run_id": "r1"}).status_code == 201
    r = client.post("/runs/r1/end", json={"status": "ok"})
    assert r.status_code == 422 and r.json()["error"] == "InvalidInput", r.text
    assert "completed" in r.json()["detail"]  # names the statuses it accepts
    assert store.runs.get("r1").status.value == "running"
    assert client.post("/runs/r1/end", json={"status": "failed"}).json()["status"] == "failed"


def test_list_with_unknown_status_or_category_is_422(client: TestClient) -> None:
    assert client.get("/memories", params={"status": "bogus"}).status_code == 422
    assert client.get("/memories", params={"category": "bogus"}).status_code == 422
    assert client.get("/memories", params={"status": "all"}).status_code == 200
    assert client.get("/runs", params={"status": "bogus"}).status_code == 422


def test_too_large_body_answers_the_documented_json_error(store: GraphMemory) -> None:
    settings = Settings(embedder="none", server={"max_body_bytes": 4096})  # type: ignore[arg-type]
    with TestClient(create_app(store, settings=settings)) as c:
        for r in (
            c.post("/memories", json={"content": "x" * 5000}),
            c.post(
                "/memories",
                content=iter([b'{"content": "', b"x" * 5000, b'"}']),
                headers={"content-type": "application/json"},
            ),
        ):
            assert r.status_code == 413
            assert r.headers["content-type"].startswith("application/json"), r.text
            assert r.json()["error"] == "ContentTooLarge" and "4096" in r.json()["detail"]


# -- scoped reads -----------------------------------------------------------------------------


def _moved_secret(store: GraphMemory) -> tuple[TestClient, str, str]:
    """alice shares a memory in namespace ``secret`` and then moves it, with new content,
    into ``team``; bob is a member of ``team`` only. Returns a client and both versions."""
    store.namespaces.create("secret", owner="alice")
    store.namespaces.create("team", owner="alice", members=["bob"])
    settings = Settings(
        embedder="none",
        server={
            "api_keys": [  # type: ignore[arg-type]
                {"key": "alice-key-123", "agent_id": "alice", "namespaces": ["secret", "team"]},
                {"key": "bob-key-4567", "agent_id": "bob", "namespaces": ["team"]},
            ]
        },
    )
    c = TestClient(create_app(store, settings=settings))
    alice = auth("alice-key-123")
    v1 = c.post(
        "/memories",
        headers=alice,
        json={"content": "the launch code is 0451", "namespace": "secret", "visibility": "shared"},
    )
    assert v1.status_code == 201, v1.text
    v2 = c.patch(
        f"/memories/{v1.json()['id']}",
        headers=alice,
        json={"content": "launch moved to May", "namespace": "team"},
    )
    assert v2.status_code == 200, v2.text
    return c, v1.json()["id"], v2.json()["id"]


def test_history_over_http_leaves_out_versions_the_caller_may_not_read(
    store: GraphMemory,
) -> None:
    c, v1, v2 = _moved_secret(store)
    bob, alice = auth("bob-key-4567"), auth("alice-key-123")
    with c:
        assert c.get(f"/memories/{v2}", headers=bob).status_code == 200
        r = c.get(f"/memories/{v2}/history", headers=bob)
        assert r.status_code == 200
        assert [v["id"] for v in r.json()] == [v2] and "0451" not in r.text
        # the unreadable version itself: refused, alone or through its history
        for path in (f"/memories/{v1}", f"/memories/{v1}/history"):
            r = c.get(path, headers=bob)
            assert r.status_code == 403 and "secret" not in r.text  # nor where it lives
        # nor through a recall as of a time before the move, nor a listing of every status
        created = store.get(v1).created_at.isoformat()
        hits = c.post("/recall", headers=bob, json={"query": "launch code", "as_of": created})
        assert hits.status_code == 200 and "0451" not in hits.text
        assert "0451" not in c.get("/memories", params={"status": "all"}, headers=bob).text
        # its author sees the whole chain
        full = c.get(f"/memories/{v2}/history", headers=alice).json()
        assert [v["id"] for v in full] == [v1, v2]
        hits = c.post("/recall", headers=alice, json={"query": "launch code", "as_of": created})
        assert [h["memory"]["id"] for h in hits.json()] == [v1]


def test_run_events_over_http_leave_out_what_the_caller_may_not_read(
    store: GraphMemory,
) -> None:
    c, _, _ = _moved_secret(store)
    # a private event of another member of the run's namespace (written by the trusted
    # Python API; only the run's agent or the namespace's members add to a run)
    store.namespaces.add_members("team", ["carol"])
    store.runs.start("bob", run_id="r1", namespace="team")
    store.runs.add_event("r1", "user_message", "bob asks about the launch")
    store.runs.add_event("r1", "observation", "carol's private note", agent_id="carol")
    with c:
        r = c.get("/runs/r1/events", headers=auth("bob-key-4567"))
        assert r.status_code == 200
        assert [e["content"] for e in r.json()] == ["bob asks about the launch"]


def test_forget_report_names_only_what_the_key_may_read(stores: Stores) -> None:
    from fastapi.testclient import TestClient

    from graphmem.config import ApiKey, ServerSettings, Settings
    from graphmem.server.http import create_app

    mem = stores.open(embedder=None)
    mine = mem.remember("bob's note about the launch", agent_id="bob")
    theirs = mem.lifecycle.summarize([mine.id])  # another agent's memory derived from bob's
    mem.writes.change([theirs.evolve(agent_id="alice")])
    key = ApiKey(key="k-bob-secret-1", agent_id="bob", namespaces=["*"])
    settings = Settings(embedder="none", server=ServerSettings(api_keys=(key,)))
    with TestClient(create_app(mem, settings=settings)) as client:
        r = client.delete(
            f"/memories/{mine.id}", headers={"Authorization": "Bearer k-bob-secret-1"}
        )
        assert r.status_code == 200, r.text
        assert r.json()["deleted"] == [mine.id]  # alice's summary went, unnamed
    assert mem.get([mine.id, theirs.id]) == []


def test_entities_over_http_follow_the_key(stores: Stores) -> None:
    from fastapi.testclient import TestClient

    from graphmem.config import ApiKey, ServerSettings, Settings
    from graphmem.server.http import create_app

    store = stores.open("k.db", embedder=None, knowledge=True)
    store.remember("Yesterday I walked with Jon around Lisbon", agent_id="alice")
    store.remember("Meeting Carla in Oslo next week about the secret deal", agent_id="bob")
    key = ApiKey(key="k-alice-secret", agent_id="alice", namespaces=["*"])
    settings = Settings(embedder="none", server=ServerSettings(api_keys=(key,)))
    with TestClient(create_app(store, settings=settings)) as client:
        h = {"Authorization": "Bearer k-alice-secret"}
        r = client.get("/entities", headers=h)
        assert r.status_code == 200, r.text
        names = {e["name"] for e in r.json()}
        assert {"Jon", "Lisbon"} <= names and not names & {"Carla", "Oslo"}
        r = client.get("/entities/lisbon", headers=h)
        assert r.status_code == 200 and r.json()["entity"]["name"] == "Lisbon"
        assert [m["content"] for m in r.json()["memories"]] == [
            "Yesterday I walked with Jon around Lisbon"
        ]
        assert "embedding" not in r.json()["memories"][0]
        assert client.get("/entities/Oslo", headers=h).status_code == 404
        assert client.get("/entities?type=bogus", headers=h).status_code == 422
    store.close()


def test_a_key_sees_and_touches_only_runs_in_its_namespaces(store: GraphMemory) -> None:
    # found by probing: the run routes checked a run's agent but not its namespace, so a
    # key of alice limited to 'team' read her 'default' events (/memory/events), listed and
    # ended her 'default' runs, appended to them, and a run it started on the fly (with its
    # events) landed in 'default', outside the key
    keys = (
        ApiKey(key="alice-default-key", agent_id="alice", namespaces=("default",)),
        ApiKey(key="alice-team-key-9", agent_id="alice", namespaces=("team",)),
    )
    settings = Settings(embedder="none", server=ServerSettings(api_keys=keys))
    run = store.runs.start("alice", run_id="r-default")
    store.runs.add_event(run.id, "user_message", "alice's default-only secret")
    team = auth("alice-team-key-9")
    with TestClient(create_app(store, settings=settings)) as c:
        before = snapshot(store)
        event = {"events": [{"event_type": "user_message", "content": "from the team key"}]}
        refused = [
            c.get("/runs/r-default", headers=team),
            c.get("/runs/r-default/events", headers=team),
            c.post("/runs/r-default/events", json=event, headers=team),
            c.post("/runs/r-default/end", json={}, headers=team),
            c.delete("/runs/r-default", headers=team),
        ]
        assert [r.status_code for r in refused] == [403] * 5, [r.text for r in refused]
        assert snapshot(store) == before
        assert c.get("/runs", headers=team).json() == []
        assert c.get("/memory/sessions", headers=team).json()["total"] == 0
        seen = c.get("/memory/events", headers=team).json()
        assert (seen["events"], seen["total"]) == ([], 0)

        # a run started on the fly by the key is in the key's namespace, with its events
        r = c.post("/runs/r-fly/events", json=event, headers=team)
        assert r.status_code == 201, r.text
        assert [e["namespace"] for e in r.json()] == ["team"]
        assert store.runs.get("r-fly").namespace == "team"
        assert [e["content"] for e in c.get("/runs/r-fly/events", headers=team).json()] == [
            "from the team key"
        ]
        assert [s["id"] for s in c.get("/memory/sessions", headers=team).json()["sessions"]] == [
            "r-fly"
        ]

        # the key of alice's 'default' namespace still has her run
        default = auth("alice-default-key")
        assert c.get("/runs/r-default", headers=default).status_code == 200
        assert [x["id"] for x in c.get("/runs", headers=default).json()] == ["r-default"]
        assert c.get("/memory/events", headers=default).json()["total"] == 1


def test_a_memory_written_by_a_key_joins_no_run_outside_the_keys_namespaces(
    store: GraphMemory,
) -> None:
    # found by probing: POST /memories (and /memories/batch) with the run_id of alice's
    # 'default' run, through her key limited to 'team', attached the memory to that run
    keys = (ApiKey(key="alice-team-key-9", agent_id="alice", namespaces=("team",)),)
    settings = Settings(embedder="none", server=ServerSettings(api_keys=keys))
    store.runs.start("alice", run_id="r-default")
    team = auth("alice-team-key-9")
    with TestClient(create_app(store, settings=settings)) as c:
        before = snapshot(store)
        one = {"content": "into her default run", "run_id": "r-default"}
        refused = [
            c.post("/memories", json=one, headers=team),
            c.post("/memories/batch", json={"items": [{"content": "fine"}, one]}, headers=team),
        ]
        assert [r.status_code for r in refused] == [403] * 2, [r.text for r in refused]
        assert snapshot(store) == before
        # a run of the key's own namespace, or none yet, is still joined
        store.runs.start("alice", run_id="r-team", namespace="team")
        for run_id in ("r-team", "r-new"):
            r = c.post(
                "/memories", json={"content": f"into {run_id}", "run_id": run_id}, headers=team
            )
            assert r.status_code == 201, r.text
        assert [m.content for m in store.runs.events("r-team")] == ["into r-team"]

"""Property-based fuzzing of the HTTP API and the MCP tools.

Bodies mix plausible values with arbitrary JSON (NaN and infinities included, which Python's
JSON parser accepts), unknown fields and wrong types. The properties: the server never
answers 5xx (the MCP server never crashes), and a rejected request leaves the store exactly
as it was.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from graphmem.backends.base import GraphBackend
from graphmem.backends.embedded import NetworkXBackend
from graphmem.config import Settings
from graphmem.memory import GraphMemory
from graphmem.server.http import create_app
from graphmem.server.mcp import create_mcp_server
from tests.interfaces.api_fuzz import run_fuzz
from tests.interfaces.conftest import auth, keyed_settings, snapshot

# FUZZ_EXAMPLES sets the examples of each HTTP/MCP property (docs/regressions.md: 1,250
# each, 5,000 requests, with --hypothesis-seed for a repeatable run)
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES") or 0)
FUZZ = settings(
    max_examples=EXAMPLES or 120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
)
any_json = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=10,
)
stamps = st.sampled_from(
    [
        "2024-05-01T10:00:00Z",
        "2024-05-01T10:00:00",
        "2024-13-01T00:00:00Z",
        "yesterday",
        "9999-12-31T23:59:59+14:00",
        "0001-01-01T00:00:00-12:00",
        "9999-12-31T23:59:59-05:00",
        "0001-01-01T00:00:00+05:00",  # out of range once in UTC
    ]
)
plausible: dict[str, st.SearchStrategy[Any]] = {
    "content": st.text(max_size=60) | st.just("   ") | st.just("a\x00b"),
    "query": st.text(max_size=30),
    "agent_id": st.text(max_size=8) | st.just(" padded "),
    "namespace": st.sampled_from(["default", "team", "", "x" * 300]),
    "run_id": st.text(max_size=8),
    "category": st.sampled_from(["semantic", "episodic", "summary", "gossip", ""]),
    "tier": st.sampled_from(["short_term", "long_term", "fleeting"]),
    "importance": st.floats(allow_nan=True, allow_infinity=True) | st.integers(-2, 3),
    "confidence": st.floats(-1, 2),
    "tags": st.lists(
        st.text(max_size=12) | st.sampled_from(["ok", "Fine", "no spaces"]), max_size=5
    ),
    "metadata": st.dictionaries(st.text(max_size=6), any_json, max_size=4),
    "event_type": st.sampled_from(["user_message", "Tool Call", "x" * 70, ""]),
    "visibility": st.sampled_from(["private", "shared", "org", "public"]),
    "created_at": stamps,
    "valid_from": stamps,
    "expires_at": stamps,
    "since": stamps,
    "as_of": stamps,
    "k": st.integers(-5, 2000),
    "max_tokens": st.integers(-5, 300_000),
    "reason": st.text(max_size=20),
    "scope": st.text(max_size=8),
    "fact_id": st.text(max_size=8),
    "author": st.sampled_from(["cto", "nobody", ""]),
    "expected_version": st.integers(-2, 5),
    "core": st.booleans(),
    "question": st.text(max_size=30),
    "dry_run": st.just(True) | any_json,
}


def field_value(name: str) -> st.SearchStrategy[Any]:
    return plausible.get(name, any_json) | any_json


@st.composite
def body(draw: st.DrawFn, fields: tuple[str, ...]) -> Any:
    if draw(st.integers(0, 19)) == 0:
        return draw(any_json)  # not even an object
    keys = draw(st.lists(st.sampled_from(fields), unique=True, max_size=len(fields)))
    if draw(st.booleans()):
        keys.append(draw(st.text(min_size=1, max_size=8)))  # an unknown field
    return {k: draw(field_value(k)) for k in keys}


MEMORY_FIELDS = (
    "content",
    "agent_id",
    "namespace",
    "run_id",
    "category",
    "tier",
    "importance",
    "confidence",
    "tags",
    "metadata",
    "event_type",
    "visibility",
    "created_at",
    "valid_from",
    "expires_at",
)
RECALL_FIELDS = (
    "query",
    "k",
    "agent_id",
    "namespace",
    "category",
    "tier",
    "tags",
    "since",
    "as_of",
    "scope",
    "max_tokens",
)


@st.composite
def request(draw: st.DrawFn) -> tuple[str, str, Any]:
    kind = draw(
        st.sampled_from(
            [
                "create",
                "batch",
                "patch",
                "recall",
                "context",
                "events",
                "publish",
                "runs",
                "list",
                "reflect",
                "maintenance",
            ]
        )
    )
    if kind == "create":
        return "POST", "/memories", draw(body(MEMORY_FIELDS))
    if kind == "batch":
        items = draw(st.lists(body(MEMORY_FIELDS), max_size=3))
        return "POST", "/memories/batch", {"items": items}
    if kind == "patch":
        target = draw(st.sampled_from(["{existing}", "missing", "%00", "a" * 300]))
        return (
            "PATCH",
            f"/memories/{target}",
            draw(
                body(
                    (
                        "content",
                        "reason",
                        "importance",
                        "tags",
                        "metadata",
                        "category",
                        "namespace",
                        "valid_from",
                        "expires_at",
                    )
                )
            ),
        )
    if kind == "recall":
        return "POST", "/recall", draw(body(RECALL_FIELDS))
    if kind == "context":
        return "POST", "/context", draw(body(RECALL_FIELDS))
    if kind == "events":
        run = draw(st.sampled_from(["r1", "r 2", "x" * 300]))
        evs = draw(
            st.lists(
                body(
                    (
                        "event_type",
                        "content",
                        "agent_id",
                        "importance",
                        "tier",
                        "tags",
                        "metadata",
                        "created_at",
                    )
                ),
                max_size=3,
            )
        )
        return "POST", f"/runs/{run}/events", {"events": evs}
    if kind == "reflect":
        return "POST", "/reflect", draw(body(("question", "k", "agent_id", "scope")))
    if kind == "maintenance":
        path = draw(st.sampled_from(["/maintenance/consolidate", "/maintenance/run"]))
        return "POST", path, draw(body(("dry_run", "agent_id", "namespace")))
    if kind == "publish":
        return (
            "POST",
            "/org/facts",
            draw(
                body(
                    ("content", "fact_id", "author", "category", "tags", "core", "expected_version")
                )
            ),
        )
    if kind == "runs":
        return "POST", "/runs", draw(body(("run_id", "agent_id", "namespace", "metadata")))
    params = draw(
        st.dictionaries(
            st.sampled_from(["limit", "session_id", "agent_id"]),
            st.text(max_size=6) | st.integers(-3, 3000).map(str),
        )
    )
    return "GET", "/memory/events", params


@pytest.fixture
def fuzz_store(backend: GraphBackend) -> Iterator[GraphMemory]:
    """The store every HTTP and MCP property runs against, on each backend the switch
    chose (the live Neo4j server too when one is given, see tests/neo4j_support.py)."""
    mem = GraphMemory(backend, embedder=None, owns_backend=False)
    mem.agents.register("cto", seniority="lead")
    mem.remember("Alice prefers tea", agent_id="alice", tags=["prefs"])
    yield mem
    mem.close()


@pytest.fixture
def open_client(fuzz_store: GraphMemory) -> Iterator[TestClient]:
    with TestClient(create_app(fuzz_store), raise_server_exceptions=False) as client:
        yield client


@pytest.fixture
def keyed_client(fuzz_store: GraphMemory) -> Iterator[TestClient]:
    app = create_app(fuzz_store, settings=keyed_settings())
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def _send(
    client: TestClient,
    req: tuple[str, str, Any],
    existing: str,
    headers: dict[str, str] | None = None,
) -> int:
    method, path, payload = req
    path = path.replace("{existing}", existing)
    if method == "GET":
        return client.get(path, params=payload, headers=headers).status_code
    raw = json.dumps(payload)  # allow_nan: NaN / Infinity tokens reach the server
    return client.request(
        method,
        path,
        content=raw.encode(),
        headers={"content-type": "application/json", **(headers or {})},
    ).status_code


@FUZZ
@given(req=request())
def test_http_never_5xx_and_rejections_change_nothing(
    fuzz_store: GraphMemory, open_client: TestClient, req: tuple[str, str, Any]
) -> None:
    existing = fuzz_store.list(agent_id="alice", limit=1)[0].id
    before = snapshot(fuzz_store)
    code = _send(open_client, req, existing)
    assert code < 500, (code, req)
    if code >= 400:
        assert snapshot(fuzz_store) == before, (code, req)


@FUZZ
@given(req=request(), key=st.sampled_from(["alice-key-123", "bob-key-4567", "bad-key-000"]))
def test_http_with_keys_never_5xx_and_rejections_change_nothing(
    fuzz_store: GraphMemory, keyed_client: TestClient, req: tuple[str, str, Any], key: str
) -> None:
    existing = fuzz_store.list(agent_id="alice", limit=1)[0].id
    before = snapshot(fuzz_store)
    code = _send(keyed_client, req, existing, auth(key))
    assert code < 500, (code, req)
    if key == "bad-key-000":
        assert code == 401
    if code >= 400:
        assert snapshot(fuzz_store) == before, (code, req)


mcp_calls = st.one_of(
    st.tuples(st.just("remember"), body(("content", "tags", "importance", "category"))),
    st.tuples(st.just("recall"), body(("query", "k"))),
    st.tuples(st.just("context"), body(("query", "max_tokens"))),
    st.tuples(
        st.just("forget"),
        st.fixed_dictionaries(
            {"memory_id": st.text(max_size=10) | st.just("{existing}")},
            optional={"dry_run": any_json},
        ),
    ),
    st.tuples(
        st.just("history"), st.fixed_dictionaries({"memory_id": st.text(max_size=10) | any_json})
    ),
    st.tuples(st.just("reflect"), body(("question",))),
)


@FUZZ
@given(call=mcp_calls)
def test_mcp_tools_never_crash_and_errors_change_nothing(
    fuzz_store: GraphMemory, call: tuple[str, Any]
) -> None:
    tool, args = call
    if not isinstance(args, dict):
        args = {"value": args}
    existing = fuzz_store.list(agent_id="alice", limit=1)[0].id
    args = {k: (existing if v == "{existing}" else v) for k, v in args.items()}
    before = snapshot(fuzz_store)
    server = create_mcp_server(fuzz_store, agent_id="bob")  # alice's memory is not bob's

    async def go() -> Any:
        async with Client(server) as client:
            return await client.call_tool(tool, args)

    result = asyncio.run(go())
    if result.is_error:
        text = "".join(getattr(c, "text", "") for c in result.content)
        assert text != f"Error executing tool {tool}", f"crash on {call!r}"  # bare = crash
        assert snapshot(fuzz_store) == before, call


# -- every documented operation, from the OpenAPI document ----------------------------------

# values that once reached a handler and broke it: out-of-range datetimes once in UTC,
# integers past 64 bits, lone surrogates (sent as JSON escapes), unknown enum values
hostile_text = st.sampled_from(
    [
        "",
        " ",
        "a\ud800",
        "x" * 300,
        "a\x00b",
        "bogus",
        "ok",
        "completed",
        "active",
        "all",
        "9999-12-31T23:59:59-05:00",
        "0001-01-01T00:00:00+05:00",
        "NaN",
        "{existing}",
    ]
) | st.text(max_size=12)
hostile_int = st.sampled_from([0, 1, -1, 2**63, 2**64, -(2**63) - 1]) | st.integers(-10, 5000)
hostile_json = any_json | st.lists(hostile_int | hostile_text | st.floats(), max_size=3)
odd_path_values = st.sampled_from(["missing", "a" * 300, "%2e%2e", "x y", "%00"])
good_path_values = {"memory_id": "{existing}", "run_id": "r1"}
query_values = st.sampled_from(
    ["", "bogus", "all", "active", "-1", "2.5", "99999999999999999999", "true", "{existing}"]
) | st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)


def _from_schema(schema: dict[str, Any], spec: dict[str, Any], depth: int = 0) -> Any:
    """A strategy for a JSON schema of the OpenAPI document, biased to hostile values and
    mixed with arbitrary JSON."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return _from_schema(spec["components"]["schemas"][name], spec, depth)
    if depth > 4:
        return any_json
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([_from_schema(s, spec, depth + 1) for s in schema[key]])
    kind = schema.get("type")
    if kind == "object" and "properties" not in schema:  # free-form, e.g. metadata
        return st.dictionaries(hostile_text, hostile_json, max_size=3)
    if kind == "object":
        props = {k: _from_schema(v, spec, depth + 1) for k, v in schema["properties"].items()}
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: v for k, v in props.items() if k in required},
            optional={k: v for k, v in props.items() if k not in required},
        )
    if kind == "array":
        return st.lists(_from_schema(schema.get("items", {}), spec, depth + 1), max_size=3)
    if kind == "string" and schema.get("format") == "date-time":
        return stamps
    if kind == "string":
        return hostile_text
    if kind == "integer":
        return hostile_int
    if kind == "number":
        return st.floats(allow_nan=True, allow_infinity=True) | hostile_int
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return any_json


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
    ]


@st.composite
def documented_request(draw: st.DrawFn, spec: dict[str, Any]) -> tuple[str, str, Any, Any]:
    method, path, op = draw(st.sampled_from(_operations(spec)))
    params: dict[str, Any] = {}
    for p in op.get("parameters", ()):
        if p["in"] == "path":
            good = good_path_values.get(p["name"])
            value = draw(odd_path_values) if good is None or draw(st.integers(0, 3)) == 0 else good
            path = path.replace("{" + p["name"] + "}", value)
        elif draw(st.booleans()):
            params[p["name"]] = draw(query_values)
    schema = op.get("requestBody", {}).get("content", {}).get("application/json", {})
    body = None
    if schema:
        body = (
            draw(any_json)
            if draw(st.integers(0, 9)) == 0
            else draw(_from_schema(schema["schema"], spec))
        )
    return method, path, params, body


def _openapi() -> dict[str, Any]:
    # the schema only: an app over settings opens its store when it starts, never here
    return create_app(Settings(url="memory://", embedder="none")).openapi()


_SPEC = _openapi()


@settings(
    max_examples=EXAMPLES or 150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    req=documented_request(_SPEC),
    key=st.sampled_from([None, "alice-key-123", "bob-key-4567", "admin-key-89"]),
)
def test_every_documented_operation_never_5xx(
    fuzz_store: GraphMemory,
    keyed_client: TestClient,
    open_client: TestClient,
    req: tuple[str, str, Any, Any],
    key: str | None,
) -> None:
    method, path, params, body = req
    if not fuzz_store.runs.list():
        fuzz_store.runs.start("alice", run_id="r1")
    existing = fuzz_store.list(agent_id="alice", limit=1)
    mid = existing[0].id if existing else "missing"
    client, headers = (open_client, {}) if key is None else (keyed_client, auth(key))
    raw = None if body is None else json.dumps(body).replace("{existing}", mid).encode()
    r = client.request(
        method,
        path.replace("{existing}", mid),
        params=params,
        content=raw,
        headers={**headers, "content-type": "application/json"},
    )
    assert r.status_code < 500, (r.status_code, r.text, req)
    if r.status_code >= 400:
        assert r.headers["content-type"].startswith("application/json"), (r.text, req)
        assert {"error", "detail"} <= set(r.json()), (r.text, req)


# -- the Python API: every public verb, hostile arguments (tests/interfaces/api_fuzz.py) ---


def test_every_public_verb_answers_hostile_arguments_with_typed_errors(tmp_path: Path) -> None:
    """5,000 seeded calls over every public verb of GraphMemory and its sub-objects (plus
    opens of bad paths): every exception is a graphmem error, and a call that raised changed
    nothing. Before graphmem.boundary, 1,362 of 5,200 calls raised untyped errors."""
    report = run_fuzz(tmp_path, seed=24, calls=5000, open_calls=200)
    print(report.summary())  # the figures (pytest -rP shows them)
    assert report.calls >= 5000
    assert len(report.verbs) >= 100  # every verb of the face, not a few
    assert report.raised > 1000  # the arguments really were hostile
    assert not report.untyped and not report.changed, report.summary()


def test_hostile_arguments_get_typed_errors_on_each_backend(
    backend: GraphBackend, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A shorter run of the same fuzzer on each backend the switch chose (on Neo4j every
    round starts from the emptied database): typed errors, and a call that raised changed
    nothing there either."""
    options: dict[str, Any] = {}
    if not isinstance(backend, NetworkXBackend):
        from tests.neo4j_support import neo4j_target

        target = neo4j_target(request)

        def on_neo4j(folder: Path) -> GraphMemory:
            target.wipe()
            return GraphMemory.open(
                target.uri, auth=target.auth, database=target.database, embedder=None
            )

        options["open_store"] = on_neo4j
    # FUZZ_CALLS lengthens the run (docs/regressions.md: 5,000 calls live)
    calls = int(os.environ.get("FUZZ_CALLS") or 450)
    report = run_fuzz(tmp_path, seed=18, calls=calls, open_calls=0, **options)
    print(report.summary())  # the figures (pytest -rP shows them)
    assert report.calls >= calls and report.raised > calls // 9
    assert not report.untyped and not report.changed, report.summary()

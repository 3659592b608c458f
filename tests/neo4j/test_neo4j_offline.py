"""The Neo4j backend's server-independent parts: the Filter compiler, Lucene quoting, the
statements an upsert sends, URL handling, and behaviour when no server answers."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from graphmem.backends import open_backend
from graphmem.backends.base import GraphBackend, WriteBatch
from graphmem.backends.neo4j import (
    Neo4jBackend,
    compile_count,
    compile_match,
    compile_text_search,
    compile_vector_exact_search,
    compile_vector_index_search,
    lucene_query,
)
from graphmem.backends.neo4j.fulltext import (
    SCOPE_CLAUSE_MAX_VALUES,
    fulltext_query,
    lexical_fetches,
)
from graphmem.backends.neo4j.queries import strip_literals
from graphmem.errors import BackendUnavailable, InvalidInput
from graphmem.models import (
    Agent,
    Edge,
    EdgeType,
    Filter,
    LogEntry,
    Memory,
    NodeLabel,
    NodeRef,
    OrgFact,
    Range,
    Run,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)

CRAFTED = [
    "quote ' and \" here",
    "back`tick`s",
    "})] MATCH (n) DETACH DELETE n //",
    "// comment",
    "$param {format} %s",
    "x') OR 1=1 WITH n MATCH (m) DELETE m //",
]


def _params_used(text: str) -> set[str]:
    return set(re.findall(r"\$([A-Za-z_]\w*)", strip_literals(text)))


@pytest.mark.parametrize("value", CRAFTED)
def test_crafted_values_and_metadata_keys_travel_only_as_parameters(value: str) -> None:
    flt = Filter.for_memories(
        agent_id=value, namespace=[value, "default"], metadata={value: value}, status=None
    )
    flt = flt.model_copy(update={"ranges": (Range(field="metadata." + value, gte=value),)})
    text, params = compile_match(flt, limit=5, offset=1, order_by="metadata." + value)
    assert value not in text
    assert "metadata." not in text  # metadata keys are read as n[$param]
    assert _params_used(text) == set(params)
    assert value in params.values() and ("metadata." + value) in params.values()
    assert [value, "default"] in params.values()
    assert text.startswith("MATCH (n:Memory)\nWHERE ")
    count_text, count_params = compile_count(flt)
    assert value not in count_text and _params_used(count_text) == set(count_params)


def test_compiled_filter_shape() -> None:
    flt = Filter(
        ids=("m1", "m2"),
        equals={"agent_id": "a", "valid_to": None},
        any_of={"category": ("semantic", "episodic")},
        ranges=(
            Range(field="importance", gt=0.2, lte=0.9),
            Range(field="expires_at", gte=T0, or_missing=True),
            Range(field="last_accessed"),
        ),
        tags_all=("x", "y"),
    )
    text, params = compile_match(flt, order_by="created_at", descending=True, limit=3)
    assert text == (
        "MATCH (n:Memory)\n"
        "WHERE n.id IN $f0\n"
        "  AND n.agent_id = $f1\n"
        "  AND n.valid_to IS NULL\n"
        "  AND n.category IN $f2\n"
        "  AND n.importance > $f3\n"
        "  AND n.importance <= $f4\n"
        "  AND (n.expires_at IS NULL OR (n.expires_at >= $f5))\n"
        "  AND n.last_accessed IS NOT NULL\n"
        "  AND all(tag IN $f6 WHERE tag IN n.tags)\n"
        # the datetimes as text: the driver's per-value conversion costs more than the query
        "RETURN n {.*, created_at: toString(n.created_at), updated_at: toString(n.updated_at), "
        "last_accessed: toString(n.last_accessed), valid_from: toString(n.valid_from), "
        "valid_to: toString(n.valid_to), expires_at: toString(n.expires_at)} AS props\n"
        "ORDER BY n.created_at IS NULL, n.created_at DESC, n.id DESC\n"
        "LIMIT $limit"
    )
    assert params == {
        "f0": ["m1", "m2"],
        "f1": "a",
        "f2": ["semantic", "episodic"],
        "f3": 0.2,
        "f4": 0.9,
        "f5": T0,
        "f6": ["x", "y"],
        "limit": 3,
    }
    text, params = compile_match(Filter(label=NodeLabel.AGENT))
    assert text == (
        "MATCH (n:Agent)\nRETURN n {.*, created_at: toString(n.created_at)} AS props\n"
        "ORDER BY n.id ASC"
    )
    text, params = compile_match(Filter(label=NodeLabel.TAG))  # no datetime: all as stored
    assert text == "MATCH (n:Tag)\nRETURN properties(n) AS props\nORDER BY n.id ASC"
    assert params == {}


def test_filters_that_bypass_validation_are_still_refused() -> None:
    """Field names reach the Cypher text only after the compiler re-checks them."""
    sneaky = Filter.model_construct(
        label=NodeLabel.MEMORY,
        ids=None,
        equals={"agent_id = 1 DETACH DELETE n //": 1},
        any_of={},
        ranges=(),
        tags_all=(),
    )
    with pytest.raises(InvalidInput):
        compile_match(sneaky)
    bad_label = Filter.model_construct(
        label="Memory) DETACH DELETE n //",  # type: ignore[arg-type]
        ids=None,
        equals={},
        any_of={},
        ranges=(),
        tags_all=(),
    )
    with pytest.raises(InvalidInput):
        compile_count(bad_label)
    with pytest.raises(InvalidInput):
        compile_match(Filter(), order_by="content) DETACH DELETE n //")
    with pytest.raises(InvalidInput):
        compile_match(Filter(), order_by="embedding")
    with pytest.raises(InvalidInput):
        compile_match(Filter(), limit=-1)


def test_the_full_text_query_names_the_scope_without_scoring_it() -> None:
    """Words on the content field only (an unscoped search asks nothing else); each scope
    field the index holds is a required zero-boost clause, its values quoted and escaped;
    values that would need too many clauses, or that hold no word at all, add none (the
    filter after the index still applies)."""
    terms = '"tea" OR "milk"'
    assert fulltext_query(terms, Filter.for_memories()) == 'content:("tea" OR "milk")'
    scoped = Filter.for_memories(agent_id="bot-7", namespace="Team.X", tags=["t1", "t2"])
    assert fulltext_query(terms, scoped) == (
        'content:("tea" OR "milk") AND agent_id:("bot-7")^0 AND namespace:("Team.X")^0'
        ' AND tags:("t1")^0 AND tags:("t2")^0'
    )
    assert fulltext_query(terms, Filter.for_memories(agent_id=["x", "y"])).endswith(
        'agent_id:("x" OR "y")^0'
    )
    plain = f"content:({terms})"
    many = [f"x{i}" for i in range(SCOPE_CLAUSE_MAX_VALUES + 1)]
    assert fulltext_query(terms, Filter.for_memories(agent_id=many)) == plain
    # values the analyzer may empty or read otherwise: a stop word ("a" would drop from
    # an OR and lose agent a's memories), punctuation only, quotes, spaces, non-ASCII
    for odd in (["a", "c"], "the-team", "--", 'x"y', "two words", "café"):
        assert fulltext_query(terms, Filter.for_memories(agent_id=odd)) == plain, odd


def test_a_scope_the_full_text_query_names_is_fetched_like_an_unscoped_search() -> None:
    """The index returns only the named scope's matches, so the first tier asks for as many
    as an unscoped search; a filter narrower than the query (ids, a time range, a value
    that names no clause) keeps the scoped over-fetch."""
    unscoped = lexical_fetches(Filter.for_memories(), 30)
    named = Filter.for_memories(agent_id="agent3", namespace="ns1", tags=["t1"])
    assert lexical_fetches(named, 30) == unscoped
    assert lexical_fetches(Filter.for_memories(agent_id=["a1", "a2"]), 30) == unscoped
    since = datetime(2025, 1, 1, tzinfo=UTC)
    for narrower in (
        Filter.for_memories(agent_id="the"),
        Filter.for_memories(agent_id="agent3", since=since),
        Filter.for_memories(ids=["m1"]),
    ):
        assert lexical_fetches(narrower, 30)[0] > unscoped[0], narrower


def test_search_compilers_put_the_filter_before_the_cut() -> None:
    flt = Filter.for_memories(agent_id="me")
    text, params = compile_text_search(flt, '"tea"', 5)
    assert text.index("n:Memory AND n.agent_id = $f0") < text.index("LIMIT $text_k")
    assert params["text_k"] == 5 and params["f0"] == "me"
    # the scope also narrows what the index returns (a zero-boost clause: no score change)
    assert params["query"] == 'content:("tea") AND agent_id:("me")^0'
    # a common word matches thousands of memories: only the k kept are read whole
    assert text.rindex("LIMIT $text_k") < text.index("RETURN n {.*")
    assert _params_used(text) == set(params)
    text, params = compile_vector_index_search(flt, [1.0, 0.0], 40, 5)
    assert "queryNodes('memory_embedding_vector', $fetch, $vector)" in text
    assert text.index("WHERE") < text.index("LIMIT $k") and params["fetch"] == 40
    text, params = compile_vector_exact_search(flt, [1.0, 0.0], 5)
    assert "vector.similarity.cosine(n.embedding, $vector)" in text
    assert _params_used(text) == set(params)
    with pytest.raises(InvalidInput):
        compile_text_search(Filter(label=NodeLabel.AGENT), '"x"', 5)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What does Alice drink?", '"alice" OR "drink"'),
        ('tea" OR content:* AND NOT coffee~2 \\', '"tea" OR "content" OR "coffee" OR "2"'),
        ("the and of", '"the" OR "and" OR "of"'),  # only stop words: keep them
        ("!!! ?? )(", None),
        ("Ünïcode 中文 tea", '"ünïcode" OR "中文" OR "tea"'),
    ],
)
def test_lucene_query_is_quoted_terms_only(text: str, expected: str | None) -> None:
    assert lucene_query(text) == expected


def test_lucene_query_caps_terms() -> None:
    q = lucene_query(" ".join(f"word{i}" for i in range(200)))
    assert q is not None and q.count(" OR ") == 63


def test_upsert_plan_sends_values_as_parameters_and_maintains_structure() -> None:
    backend = Neo4jBackend("bolt://localhost:7687")
    text = CRAFTED[2]
    m = Memory(
        content=text,
        agent_id=text,
        run_id="r1",
        tags=["a//b", "c++"],
        metadata={text: text},
        created_at=T0,
        embedding=[0.5, 0.25],
    )
    fact = OrgFact(fact_id="f", content="c", author="boss", tags=["t"], created_at=T0)
    log_entry = LogEntry(agent_id="a", event_type="tool_call", run_id="r2", at=T0)
    (st,) = backend.plan_writes(
        [
            m,
            Agent(id="a", created_at=T0),
            fact,
            log_entry,
            Run(id="r3", agent_id="z", started_at=T0),
            m,
        ]
    )
    # hubs once, then explicit Agents and Runs before the nodes that point to them
    assert [p.name for p in st.parts] == [
        "nodes/hubs",
        "nodes/agent_upsert",
        "nodes/run_upsert",
        "nodes/memory_upsert",
        "nodes/org_fact_upsert",
        "nodes/log_entry_upsert",
    ]
    assert text not in st.text
    assert _params_used(st.text) == set(st.params)
    hubs = st.parts[0].params
    # each once; Agent "a" is written explicitly, so it is no hub
    assert sorted(hubs["agents"]) == sorted([text, "z", "boss"])
    assert hubs["tags"] == ["a//b", "c++", "t"]
    assert [r["id"] for r in hubs["runs"]] == ["r1", "r2"]
    assert hubs["runs"][0]["agent_id"] == text and "id" not in hubs["agent_defaults"]
    (row,) = st.parts[3].params["rows"]  # duplicates collapsed
    assert row["agent"] == text and row["tags"] == ["a//b", "c++"] and row["run"] == "r1"
    assert row["props"]["metadata." + text] == text
    assert row["props"]["embedding"] == [0.5, 0.25]
    # a datetime crosses as ISO text (the driver's own conversion is slow) and the statement
    # makes it a temporal value again on the server, in the one map it sets (each property
    # written once; stored types: the live tests)
    assert row["props"]["created_at"] == T0.isoformat()
    assert "SET m = _p {.*, created_at: datetime(_p.created_at)," in st.text
    assert "expires_at: datetime(_p.expires_at)}" in st.text
    assert "m.created_at = " not in st.text
    assert st.parts[4].params["rows"][0]["agent"] == "boss"
    assert st.parts[5].params["rows"][0]["run"] == "r2"


def test_edge_plan_and_refusals() -> None:
    backend = Neo4jBackend("bolt://localhost:7687")
    a, b = Memory(content="a"), Memory(content="b")
    e1 = Edge(type=EdgeType.SUPERSEDES, src=b, dst=a, props={"reason": "x", "at": T0})
    e2 = Edge(type=EdgeType.NEXT, src=a, dst=b)
    (st,) = backend.plan_writes(edges=[e1, e2, e1])
    assert [(p.name, p.params["rows"]) for p in st.parts] == [
        (
            "edges/supersedes_upsert",
            [{"src": b.id, "dst": a.id, "props": {"reason": "x", "at": T0}}],
        ),
        ("edges/next_upsert", [{"src": a.id, "dst": b.id, "props": {}}]),
    ]
    assert st.text.endswith("RETURN c0, c1")  # both counted: a missing end is noticed
    tagged = Edge(type=EdgeType.TAGGED, src=a, dst=(NodeLabel.TAG, "t"))
    assert backend.plan_writes(edges=[tagged]) == []  # structural: the node upsert writes it
    with pytest.raises(InvalidInput, match="written by the node upserts"):
        backend._edge_parts([tagged])
    with pytest.raises(InvalidInput):
        backend.plan_writes([{"id": "not a node"}])  # type: ignore[list-item]
    # the models refuse such integers already; the backend refuses them too, whatever built them
    unchecked = Memory(content="big").model_copy(update={"metadata": {"n": 2**70}})
    with pytest.raises(InvalidInput, match="64-bit"):
        backend.plan_writes([unchecked])


def test_construction_makes_no_connection_and_hides_the_password() -> None:
    backend = Neo4jBackend("neo4j://alice:s%3Acret@db.invalid:7687", database="mem")
    assert backend._driver is None  # nothing created, nothing resolved
    assert backend._auth == ("alice", "s:cret")
    assert "s:cret" not in repr(backend) and "cret" not in backend.location
    assert backend.location == "neo4j://db.invalid:7687 database=mem"
    assert isinstance(backend, GraphBackend)
    for bad in ("http://localhost:7474", "neo4j://", "bolt://host:notaport"):
        with pytest.raises(InvalidInput):
            Neo4jBackend(bad)
    backend.close()
    backend.close()  # idempotent


def test_open_backend_selects_neo4j_for_every_scheme() -> None:
    for scheme in ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc"):
        b = open_backend(f"{scheme}://localhost:7687", auth=("neo4j", "pw"), database="x")
        assert isinstance(b, Neo4jBackend) and b.database == "x"
        b.close()


def test_unreachable_server_is_backend_unavailable_and_health_says_so() -> None:
    """A real driver against a closed local port (nothing listens on port 1)."""
    backend = Neo4jBackend(
        "bolt://127.0.0.1:1",
        auth=("neo4j", "pw"),
        connection_timeout=2,
        max_transaction_retry_time=0.5,
    )
    health = backend.health()
    assert health["ok"] is False and "127.0.0.1:1" in health["error"]
    with pytest.raises(BackendUnavailable, match="cannot reach Neo4j"):
        backend.count(Filter())
    with pytest.raises(BackendUnavailable):
        backend.connect()
    backend.close()
    with pytest.raises(BackendUnavailable, match="closed"):
        backend.count(Filter())


def test_bad_input_is_refused_before_any_connection() -> None:
    backend = Neo4jBackend("bolt://127.0.0.1:1", connection_timeout=1)
    with pytest.raises(InvalidInput):
        backend.match(Memory, Filter(), order_by="nope")
    with pytest.raises(InvalidInput):
        backend.touch(["m1"], datetime(2025, 1, 1))  # naive
    with pytest.raises(InvalidInput):
        backend.ensure_schema(embedding_dim=0)
    with pytest.raises(InvalidInput):
        backend.expand([NodeRef(NodeLabel.MEMORY, "m")], [EdgeType.NEXT], depth=-1)
    with pytest.raises(InvalidInput):
        backend.write(WriteBatch(nodes=[Memory(content="x")], edges=["not an edge"]))  # type: ignore[list-item]
    assert backend._driver is None  # none of these reached the network


@pytest.mark.parametrize(
    "paging",
    [
        {"order_by": None},
        {"offset": None},
        {"limit": 2.5},
        {"descending": "yes"},
        {"limit": True},
        {"offset": -1},
    ],
)
def test_paging_arguments_are_checked_before_any_cypher(paging: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        compile_match(Filter(), **paging)  # type: ignore[arg-type]

"""Hostile values in every field, on every backend: text that looks like Cypher, Lucene or
JSON, quotes and backticks in ids, huge metadata, odd tags. A value graphmem accepts comes
back exactly and every read finds it by it (on Neo4j every value travels as a parameter and
the full-text query quotes it); a value it refuses (a NUL or a lone surrogate where no store
can keep it) is InvalidInput and changes nothing.

The seeded fuzzer (tests/interfaces/api_fuzz.py) throws hostile types at every verb; these
are the hostile *strings*, each checked for what it reads back."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from graphmem.errors import InvalidInput, NotFound
from graphmem.memory import GraphMemory

LOOKS_LIKE_CODE = [
    "'}) MATCH (n) DETACH DELETE n //",
    '"}) MATCH (n) DETACH DELETE n //',
    "`) DETACH DELETE n //",
    "$rows",
    "a`b",
    "a'b",
    'a"b',
    "a\\b",
    "a\\",
    "{id: 'x'}",
    "content:* OR *:*",
    "AND OR NOT",
    '"',
    "*",
    "~1",
    "metadata.x",
    "_metadata_pairs",
    "n.id",
    "line\u2028two",
    "ünïcödé 𝔘 🙂",
    "x" * 128,
]
UNSTORABLE = ["a\x00b", "a\ud800", "\udfff"]


def _export(mem: GraphMemory) -> str:
    buf = io.StringIO()
    mem.transfer.export(buf)
    return buf.getvalue()


@pytest.mark.parametrize("text", LOOKS_LIKE_CODE)
def test_code_like_text_in_every_field_comes_back_exactly_and_is_found_by_it(
    mem: GraphMemory, text: str
) -> None:
    other = mem.remember("someone else's tea", agent_id="base")
    mem.namespaces.create(text, owner="alice", members=["bob"])
    m = mem.remember(
        f"{text} tea",
        agent_id=text,
        run_id=text,
        user_id=text,
        metadata={text: text, "v": text},
        reconcile="off",
    )
    got = mem.get(m.id)
    assert (got.content, got.agent_id, got.run_id) == (f"{text} tea", text, text)
    assert got.metadata == {text: text, "v": text, "user_id": text}
    filters: list[dict[str, Any]] = [
        {"agent_id": text},
        {"run_id": text},
        {"user_id": text},
        {"metadata": {text: text}},
    ]
    for flt in filters:  # each finds it, by list and by recall
        assert [x.id for x in mem.list(**flt)] == [m.id], flt
        assert [r.memory.id for r in mem.recall("tea", touch=False, **flt)] == [m.id], flt
    mine = [r.memory.id for r in mem.recall("tea", scope=text, touch=False)]
    assert m.id in mine and other.id not in mine
    assert mem.count(agent_id=text) == 1
    # a shared memory of a namespace so named: its member reads it, nobody else does
    shared = mem.remember(
        "shared tea", agent_id="alice", namespace=text, visibility="shared", reconcile="off"
    )
    assert shared.id in [r.memory.id for r in mem.recall("tea", scope="bob", touch=False)]
    assert shared.id not in [r.memory.id for r in mem.recall("tea", scope="eve", touch=False)]
    # the text as a query, a fact id, a run's events, a missing id
    mem.recall(text, touch=False)
    mem.recall(text, scope=text, touch=False, tags=["prefs"])
    mem.context(text, touch=False)
    mem.agents.register("cto", seniority="lead")
    mem.org.publish(f"{text} v1", author="cto", fact_id=text)
    mem.org.publish(f"{text} v2", author="cto", fact_id=text)
    assert [(f.version, f.content) for f in mem.org.versions(text)] == [
        (1, f"{text} v1"),
        (2, f"{text} v2"),
    ]
    for i in range(3):
        mem.runs.add_event("r" + text, "note", f"{text} event {i}")
    assert [e.seq for e in mem.runs.events("r" + text)] == [0, 1, 2]
    v2 = mem.update(m.id, f"{text} updated", metadata={text: "new"})
    assert mem.get(v2.id).metadata[text] == "new"
    for verb in (mem.get, mem.history, mem.forget):
        with pytest.raises(NotFound):
            verb(text)


@pytest.mark.parametrize("text", UNSTORABLE)
@pytest.mark.parametrize(
    "field", ["content", "agent_id", "namespace", "run_id", "user_id", "event_type", "tag", "key"]
)
def test_text_no_store_can_keep_is_refused_everywhere_and_changes_nothing(
    mem: GraphMemory, text: str, field: str
) -> None:
    mem.remember("something already there", agent_id="a")
    before = _export(mem)
    kw: dict[str, Any] = {"content": "x tea", "agent_id": "a", "reconcile": "off"}
    if field == "tag":
        kw["tags"] = [text]
    elif field == "key":
        kw["metadata"] = {text: 1}
    else:
        kw[field] = text
    with pytest.raises(InvalidInput):
        mem.remember(**kw)
    with pytest.raises(InvalidInput):
        mem.remember_many([{k: v for k, v in kw.items() if k != "reconcile"}])
    assert _export(mem) == before


@pytest.mark.parametrize(
    "meta",
    [
        {"big": "x" * 2_000_000},
        {"ints": list(range(100_000))},
        {"deep": [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]},
        {f"k{i}": "v" * 100 for i in range(128)},
        {"empty": [], "neg": -(2**63), "top": 2**63 - 1, "f": 1e308},
        {"odd`key": "`'\"\\", "nested": {"a": [{"b": "`'\"\\"}]}},
    ],
    ids=["2MB", "100k-ints", "deep", "128-keys", "bounds", "quotes"],
)
def test_huge_and_odd_metadata_comes_back(mem: GraphMemory, meta: dict[str, Any]) -> None:
    m = mem.remember("metadata tea", agent_id="a", metadata=meta, reconcile="off")
    got = mem.get(m.id).metadata
    for key, value in meta.items():
        # nested values are stored as JSON text (documented: metadata is flat on the node)
        flat = isinstance(value, dict) or (
            isinstance(value, list) and any(isinstance(v, list | dict) for v in value)
        )
        assert (json.loads(got[key]) if flat else got[key]) == value, key


@pytest.mark.parametrize(
    "tag", ["c++", "c#", "a.b", "x/y", "2024", "the", "a-the", "k:v", "s", "1.0", "a/b/c", "a" * 64]
)
def test_an_odd_tag_is_found_by_list_and_recall(mem: GraphMemory, tag: str) -> None:
    """Tags the full-text analyzer splits, stems or drops (stop words) still select their
    memories: the scope clause of the Lucene query names only values it surely keeps."""
    mem.remember("untagged tea", agent_id="a", reconcile="off")
    m = mem.remember("tagged tea", agent_id="a", tags=[tag], reconcile="off")
    assert [x.id for x in mem.list(tags=[tag])] == [m.id]
    assert [r.memory.id for r in mem.recall("tea", tags=[tag], touch=False)] == [m.id]
    assert [r.memory.id for r in mem.recall("tea", tags=[tag], agent_id="a", touch=False)] == [m.id]

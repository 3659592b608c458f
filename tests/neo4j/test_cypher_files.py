"""The cypher/ folder: every file is well formed, used by the code or a documented Browser
query, parameterised, and names only allowlisted labels and relationship types. No server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphmem.backends.base import STRUCTURAL, structural_targets
from graphmem.backends.neo4j import CYPHER_DIR, QUERY_NAMES, UNVECTORED, load_queries, parse_cypher
from graphmem.backends.neo4j.queries import (
    EDGE_UPSERT_QUERIES,
    GET_QUERIES,
    META_LABEL,
    SCHEMA_QUERIES,
    STRUCTURAL_SHAPES,
    UPSERT_QUERIES,
    VECTOR_INDEX_QUERY,
    strip_literals,
)
from graphmem.errors import ConfigError
from graphmem.models import EdgeType, NodeLabel, node_model

FILES = sorted(CYPHER_DIR.rglob("*.cypher"))
NAMES = {str(p.relative_to(CYPHER_DIR).with_suffix("")) for p in FILES}
README = (CYPHER_DIR / "README.md").read_text(encoding="utf-8")
ALLOWED = {label.value for label in NodeLabel} | {t.value for t in EdgeType}
ALLOWED |= {UNVECTORED, META_LABEL}
CYPHER_KEYWORDS = {"COUNT", "COLLECT", "EXISTS"}  # subqueries after a map key's colon


def _browser_listed() -> set[str]:
    """The files the README lists as Browser queries (its "Browser queries" section)."""
    section = README.split("## Browser queries", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`(browser/[a-z_]+)\.cypher`", section))


def test_the_folder_is_found_and_not_empty() -> None:
    assert CYPHER_DIR.is_dir()
    assert len(FILES) > 40


def test_every_file_is_loaded_by_the_code_or_listed_as_a_browser_query() -> None:
    browser = _browser_listed()
    assert browser, "README lists no Browser queries"
    unused = NAMES - set(QUERY_NAMES) - browser
    assert not unused, f"files neither loaded by the backend nor listed in README: {unused}"
    missing = (set(QUERY_NAMES) | browser) - NAMES
    assert not missing, f"loaded or listed but no such file: {missing}"
    assert not set(QUERY_NAMES) & browser, "a file is both a backend query and a Browser query"
    assert len(QUERY_NAMES) == len(set(QUERY_NAMES))


def test_every_file_is_documented_in_the_readme() -> None:
    for name in NAMES:
        assert f"`{name}.cypher`" in README, f"{name}.cypher is not described in README.md"
    assert "`browser/graphmem.grass`" in README


def test_the_backend_has_a_query_for_every_label_and_edge_type() -> None:
    from graphmem.models.edges import _EDGE_ENDPOINTS

    assert set(UPSERT_QUERIES) == set(NodeLabel) == set(GET_QUERIES)
    callers_write = {
        (etype, src, dst)
        for etype, pairs in _EDGE_ENDPOINTS.items()
        for src, dst in pairs
        if (src, etype) not in STRUCTURAL
    }
    assert set(EDGE_UPSERT_QUERIES) == callers_write
    for (etype, src, dst), name in EDGE_UPSERT_QUERIES.items():
        text = load_queries([name])[name].text
        assert f"MATCH (a:{src.value} {{id: row.src}})" in text
        assert f"MATCH (b:{dst.value} {{id: row.dst}})" in text
        assert f"MERGE (a)-[r:{etype.value}]->(b)" in text


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(CYPHER_DIR)))
def test_file_format(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    first = source.splitlines()[0]
    assert first.startswith("// ") and len(first) > 20, "must open with what the file does"
    q = parse_cypher(source, path.name)  # one statement, :param lines == $parameters used
    assert q.description
    params_lines = [ln for ln in source.splitlines() if ln.startswith(":param")]
    if q.params:
        assert len(params_lines) == len(q.params)
        for line in params_lines:  # Browser needs `;` after each command in a multi-statement
            assert line.rstrip().endswith(";")
    else:
        assert "// :param none" in source
    assert source.rstrip().endswith(";")


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(CYPHER_DIR)))
def test_no_placeholders_and_only_allowlisted_labels_and_types(path: Path) -> None:
    q = parse_cypher(path.read_text(encoding="utf-8"), path.name)
    structure = strip_literals(q.text)
    # a Cypher map literal always has `key: value`; `{name}`/`{0}` would be a format field
    assert not re.search(r"\{\s*\w*\s*\}", structure.replace("{}", "")), "format placeholder"
    assert "%s" not in structure and "%(" not in structure
    for match in re.finditer(r"(?<![\w$]):\s*([A-Za-z_]\w*(?:\s*\|\s*:?[A-Za-z_]\w*)*)", structure):
        names = [n.strip().lstrip(":") for n in match.group(1).split("|")]
        uppercase = [n for n in names if n[0].isupper() and n not in CYPHER_KEYWORDS]
        assert set(uppercase) <= ALLOWED, f"label/type outside the allowlist: {uppercase}"


def test_schema_files_create_objects_named_like_the_file() -> None:
    for name in (*SCHEMA_QUERIES, VECTOR_INDEX_QUERY):
        text = load_queries([name])[name].text
        stem = name.split("/", 1)[1]
        assert re.match(
            rf"CREATE (CONSTRAINT|INDEX|FULLTEXT INDEX|VECTOR INDEX) {stem} "
            r"IF NOT EXISTS\b",
            text,
        ), name


def test_stats_counts_every_label_and_edge_type() -> None:
    text = load_queries(["admin/stats"])["admin/stats"].text
    for label in NodeLabel:
        assert f"`{label.value}`: COUNT {{ (:{label.value}) }}" in text
    for etype in EdgeType:
        assert f"`{etype.value}`: COUNT {{ ()-[:{etype.value}]->() }}" in text
    assert "CALL" not in text  # CALL {} without a scope clause is deprecated on 5.23+


def test_node_upsert_files_maintain_exactly_the_structural_edges() -> None:
    """The per-label Cypher must write what the shared structural_targets says, no more."""
    shapes = {(label, etype) for label, s in STRUCTURAL_SHAPES.items() for etype, _t in s}
    assert shapes == set(STRUCTURAL)
    for label in NodeLabel:
        text = load_queries([UPSERT_QUERIES[label]])[UPSERT_QUERIES[label]].text
        for etype in (EdgeType.AUTHORED_BY, EdgeType.IN_RUN, EdgeType.RUN_BY, EdgeType.TAGGED):
            merged = re.search(rf"MERGE \((\w+)\)-\[:{etype.value}\]->", text)
            owned = [m.group(1) for m in re.finditer(rf"MERGE \((\w+)\)-\[:{etype.value}\]", text)]
            if (label, etype) in STRUCTURAL:
                assert merged, f"{label.value} upsert does not maintain {etype.value}"
                # stale edges of the node's own structural types are removed
                assert re.search(rf"\[x:{etype.value}\]", text), f"{label.value}: stale {etype}"
            else:
                # only the auto-created Run may get RUN_BY from another label's upsert
                assert all(v == "r" and etype is EdgeType.RUN_BY for v in owned), (
                    label,
                    etype,
                    owned,
                )
    # the sample nodes of the contract yield only shapes the files handle
    from graphmem.models import Agent, LogEntry, Memory, OrgFact, Run

    samples = [
        Memory(content="c", agent_id="a", run_id="r", tags=["t"]),
        Run(id="r", agent_id="a"),
        OrgFact(fact_id="f", content="c", author="a", tags=["t"]),
        LogEntry(agent_id="a", event_type="tool_call", run_id="r"),
        Agent(id="a"),
    ]
    for node in samples:
        targets = structural_targets(node.label, node.to_props())
        got = {(etype, tl) for etype, tl, _id, _d in targets}
        assert got == set(STRUCTURAL_SHAPES.get(node.label, frozenset())), node.label


def test_grass_style_captions_every_label_with_a_real_property() -> None:
    grass = (CYPHER_DIR / "browser" / "graphmem.grass").read_text(encoding="utf-8")
    block = r'(node\.\w+|relationship(?:\.\w+)?|node)\s*\{((?:[^{}"]|"[^"]*")*)\}'
    blocks = dict(re.findall(block, grass))
    assert len(blocks) == grass.count("\n}")  # every block parsed
    for label in NodeLabel:
        body = blocks.get(f"node.{label.value}")
        assert body is not None, f"no style for {label.value}"
        caption = re.search(r'caption:\s*"([^"]*)";', body)
        assert caption, f"{label.value} has no caption"
        props = re.findall(r"\{(\w+)\}", caption.group(1))
        assert props, caption.group(1)
        fields = set(node_model(label).model_fields)
        if label is NodeLabel.TAG:
            fields.add("name")
        assert set(props) <= fields, (label, props)
    for key in blocks:
        if key.startswith("relationship."):
            assert key.split(".", 1)[1] in {t.value for t in EdgeType}


def test_parser_rejects_malformed_files() -> None:
    good = "// Does a thing.\n:param id => 'x';\nMATCH (n:Memory {id: $id}) RETURN n;\n"
    assert parse_cypher(good).params == ("id",)
    bad = {
        "no description": ":param id => 'x';\nMATCH (n:Memory {id: $id}) RETURN n;",
        "undeclared": "// Does a thing.\n// :param none\nMATCH (n:Memory {id: $id}) RETURN n;",
        "unused": "// Does.\n:param id => 'x';\n:param k => 1;\nMATCH (n {id: $id}) RETURN n;",
        "two statements": "// Does.\n// :param none\nMATCH (n) RETURN n;\nMATCH (m) RETURN m;",
        "silent none": "// Does a thing.\nMATCH (n) RETURN n;",
    }
    for why, text in bad.items():
        with pytest.raises(ConfigError):
            parse_cypher(text, why)
    # `$` and `;` inside string literals or comments are not parameters or statement ends
    tricky = "// Does.\n// :param none\nMATCH (n) WHERE n.x = '$a; b' // $c;\nRETURN n;"
    assert parse_cypher(tricky).params == ()


def test_missing_folder_is_a_clear_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cypher"):
        load_queries(["nodes/memory_upsert"], tmp_path)

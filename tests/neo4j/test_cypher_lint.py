"""Every statement the Neo4j backend sends, checked by Neo4j's own Cypher front end without
a server: syntax, undefined variables and parameters, deprecated features.

The checker is the npm package ``@neo4j-cypher/language-support`` (Neo4j's parser and
semantic analysis compiled to JavaScript). Install it anywhere and point
``GRAPHMEM_CYPHER_LINT`` at that folder, e.g.::

    mkdir -p /tmp/cyl && (cd /tmp/cyl && npm install @neo4j-cypher/language-support@2.0.0-next.38)
    GRAPHMEM_CYPHER_LINT=/tmp/cyl python -m pytest tests/neo4j/test_cypher_lint.py

Without it the test skips. It complements, never replaces, a run on a real server: it
knows the newest Cypher 5, so it cannot say that a feature is missing from 5.18.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from graphmem.backends.base import Expect, WriteBatch
from graphmem.backends.neo4j import CYPHER_DIR, Neo4jBackend, parse_cypher
from graphmem.models import (
    Edge,
    EdgeType,
    Entity,
    Filter,
    LogEntry,
    Memory,
    NodeLabel,
    NodeRef,
    OrgFact,
    Run,
    TextQuery,
    VectorQuery,
)
from tests.neo4j.fake_driver import FakeDriver

T0 = datetime(2025, 1, 1, tzinfo=UTC)

_LINT_JS = r"""
const ls = require('@neo4j-cypher/language-support');
const items = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = [];
for (const it of items) {
  const res = ls.lintCypherQuery(it.text, {});
  const diags = Array.isArray(res) ? res : (res.diagnostics || []);
  for (const d of diags) out.push({name: it.name, message: d.message});
}
console.log(JSON.stringify(out));
"""


def _checker() -> Path:
    folder = os.environ.get("GRAPHMEM_CYPHER_LINT")
    if not folder or shutil.which("node") is None:
        pytest.skip(
            "set GRAPHMEM_CYPHER_LINT to a folder where @neo4j-cypher/language-support "
            "is installed with npm (and have node) to lint every statement offline"
        )
    path = Path(folder)
    if not (path / "node_modules" / "@neo4j-cypher" / "language-support").is_dir():
        pytest.skip(f"no @neo4j-cypher/language-support under {path}/node_modules")
    return path


def _sent_statements() -> list[dict[str, str]]:
    """What the backend sends for a mixed write, recall and the reads (recorded)."""
    fake = FakeDriver(dim=2)
    b = Neo4jBackend("bolt://127.0.0.1:7687", driver=fake, touch_flush_s=3600)
    b.ensure_schema()
    m = Memory(content="a", run_id="r1", tags=["t"], embedding=[1.0, 0.0])
    m2 = Memory(content="b")
    le, le2 = (LogEntry(agent_id="a", event_type=t, run_id="r1", at=T0) for t in ("x", "y"))
    e1, e2 = Entity(name="Alice", norm="alice"), Entity(name="Oslo", norm="oslo")
    b.touch([m.id], T0)
    b.write(
        WriteBatch(
            nodes=[
                m,
                m2,
                le,
                le2,
                e1,
                e2,
                Run(id="r2", agent_id="q", started_at=T0),
                OrgFact(fact_id="f", content="c", author="boss", tags=["t"], created_at=T0),
            ],
            edges=[
                Edge(type=EdgeType.NEXT, src=m, dst=m2),
                Edge(type=EdgeType.SUPERSEDES, src=m2, dst=m),
                Edge(type=EdgeType.CHILD_OF, src=le2, dst=le),
                Edge(type=EdgeType.MENTIONS, src=m, dst=e1),
                Edge(type=EdgeType.RELATES, src=e1, dst=e2, props={"predicate": "in"}),
            ],
            expect=[
                Expect(ref=m2.ref, exists=False),
                Expect(ref=NodeRef(NodeLabel.RUN, "r2"), exists=False),
                Expect(
                    ref=NodeRef(NodeLabel.MEMORY, "old"),
                    props={"valid_to": None},
                    incoming=(EdgeType.SUPERSEDES,),
                    sources=frozenset(),
                ),
                Expect(ref=NodeRef(NodeLabel.AGENT, "boss")),
            ],
            vectors={"m9": [0.5, 0.5]},  # type: ignore[call-arg]
        )
    )
    scope = Filter.for_memories(agent_id="a", tags=["t"])
    b.neighbours(["m1"], scope, tag_limit=8, entity_hub_limit=25)
    b.search_both(TextQuery(text="tea", filter=scope), VectorQuery(vector=(1.0, 0.0), filter=scope))
    b.search_text(TextQuery(text="tea", filter=scope))
    b.missing_vectors(3)
    b.stats()
    b.count(scope)
    b.match(Memory, scope, limit=3, order_by="created_at", descending=True)
    b.close()
    return [
        {"name": s.name, "text": re.sub(r"^// graphmem: .*\n", "", s.text)}
        for s in fake.recorder.statements
    ]


def test_every_statement_passes_neo4j_s_front_end() -> None:
    folder = _checker()
    items = [
        {
            "name": str(p.relative_to(CYPHER_DIR)),
            "text": parse_cypher(p.read_text(encoding="utf-8"), p.name).text,
        }
        for p in sorted(CYPHER_DIR.rglob("*.cypher"))
    ]
    items += _sent_statements()
    done = subprocess.run(
        ["node", "-e", _LINT_JS],
        input=json.dumps(items),
        text=True,
        capture_output=True,
        cwd=folder,
        timeout=300,
        check=True,
    )
    found: list[dict[str, Any]] = json.loads(done.stdout)
    # parameters are declared by the caller, not in the text; a subquery imports its
    # variables with a leading WITH because the scope clause that replaces it, CALL (x) {},
    # exists only from Neo4j 5.23 and graphmem runs on 5.18+
    accepted = (
        r"Parameter \$\S+ is not defined",
        r"CALL subquery without a variable scope clause is deprecated\. Use CALL \([\w, ]*\) \{",
    )
    problems = [
        f"{d['name']}: {d['message']}"
        for d in found
        if not any(re.match(pattern, d["message"]) for pattern in accepted)
    ]
    assert not problems, "\n".join(problems)
    assert len(items) > 80

"""Org facts: version chains, retraction, operation history, write access, queries,
policy pagination and core policies — on every backend (the ``mem`` fixture)."""

from __future__ import annotations

import pytest

from graphmem.config import OrgConfig, WriteRule
from graphmem.errors import AccessDenied, Conflict, InvalidInput, NotFound
from graphmem.memory import GraphMemory
from graphmem.models import EdgeType, Filter, NodeLabel, NodeRef, Status
from graphmem.org import OrgMemory

LEVELS = ["junior", "mid", "senior", "lead", "human"]

# who may write each category by default (the table in graphmem/org.py)
DEFAULT_MATRIX = {
    "policy": {"senior", "lead", "human"},
    "adr": {"senior", "lead", "human"},
    "security": {"lead", "human"},
    "procedure": {"mid", "senior", "lead", "human"},
    "convention": {"mid", "senior", "lead", "human"},
    "glossary": {"mid", "senior", "lead", "human"},  # any other category
}


def team(mem: GraphMemory) -> None:
    for level in LEVELS:
        mem.agents.register(level, seniority=level)


def org_nodes(mem: GraphMemory) -> tuple[int, int]:
    b = mem.backend
    return (
        b.count(Filter(label=NodeLabel.ORG_FACT)),
        b.count(Filter(label=NodeLabel.ORG_OPERATION)),
    )


@pytest.mark.parametrize("category", sorted(DEFAULT_MATRIX))
def test_default_write_access_matrix(mem: GraphMemory, category: str) -> None:
    team(mem)
    for level in LEVELS:
        allowed = level in DEFAULT_MATRIX[category]
        assert mem.org.can_write(level, category) is allowed, (level, category)
        before = org_nodes(mem)
        if allowed:
            fact = mem.org.publish(f"{category} by {level}", author=level, category=category)
            assert fact.author_seniority == level
            assert org_nodes(mem) == (before[0] + 1, before[1] + 1)
        else:
            with pytest.raises(AccessDenied):
                mem.org.publish(f"{category} by {level}", author=level, category=category)
            assert org_nodes(mem) == before  # a denied write writes nothing


def test_core_facts_need_lead_or_human_and_retract_follows_the_rules(mem: GraphMemory) -> None:
    team(mem)
    with pytest.raises(AccessDenied):
        mem.org.publish("always be kind", author="senior", core=True)
    assert org_nodes(mem) == (0, 0)
    f = mem.org.publish("always be kind", author="lead", core=True, fact_id="kind")
    # a senior agent may write policies, but not change a core one
    with pytest.raises(AccessDenied):
        mem.org.publish("be kind", author="senior", fact_id="kind")
    with pytest.raises(AccessDenied):
        mem.org.retract("kind", author="senior")
    with pytest.raises(AccessDenied):
        mem.org.retract("kind", author="mid")
    assert mem.org.get("kind") == f
    mem.org.retract("kind", author="human")
    assert mem.org.get("kind").status is Status.ARCHIVED


def test_unknown_author_and_unknown_seniority_are_denied(mem: GraphMemory) -> None:
    with pytest.raises(AccessDenied, match="unknown author"):
        mem.org.publish("x", author="ghost", category="procedure")
    mem.agents.register("intern", seniority="intern")
    with pytest.raises(AccessDenied):
        mem.org.publish("x", author="intern", category="procedure")
    mem.agents.register("ann", seniority="junior", kind="human")  # kind marks a human too
    assert mem.org.publish("x", author="ann", category="policy").author_seniority == "human"
    assert org_nodes(mem) == (1, 1)


def test_custom_rules_with_autonomy_and_humans_excluded(mem: GraphMemory) -> None:
    cfg = OrgConfig(rules={"runbook": WriteRule(min_seniority="mid", min_autonomy=3, humans=False)})
    org = OrgMemory(mem.backend, mem.writes, config=cfg)
    mem.agents.register("m1", seniority="mid", autonomy=2)
    mem.agents.register("m2", seniority="mid", autonomy=3)
    mem.agents.register("boss", seniority="human")
    with pytest.raises(AccessDenied):
        org.publish("restart the pod", author="m1", category="runbook")
    with pytest.raises(AccessDenied):
        org.publish("restart the pod", author="boss", category="runbook")
    assert org.publish("restart the pod", author="m2", category="runbook").version == 1
    # a rule that names no seniority admits no agent at all
    strict = OrgMemory(
        mem.backend, mem.writes, config=OrgConfig(rules={"legal": WriteRule(min_seniority=None)})
    )
    mem.agents.register("l1", seniority="lead", autonomy=5)
    assert not strict.can_write("l1", "legal")
    assert strict.can_write("boss", "legal")


def test_version_chain_supersedes_and_history_is_append_only(mem: GraphMemory) -> None:
    team(mem)
    v1 = mem.org.publish(
        "Deploys on Tuesdays", author="senior", fact_id="deploy-day", tags=["ops"], reason="initial"
    )
    v2 = mem.org.publish(
        "Deploys on Wednesdays", author="lead", fact_id="deploy-day", reason="moved"
    )
    v3 = mem.org.publish("Deploys on Thursdays", author="human", fact_id="deploy-day")
    versions = mem.org.versions("deploy-day")
    assert [v.version for v in versions] == [1, 2, 3]
    assert [v.status for v in versions] == [Status.SUPERSEDED, Status.SUPERSEDED, Status.ACTIVE]
    assert [v.content for v in versions] == [v1.content, v2.content, v3.content]
    assert v3.tags == ("ops",) and v3.category == "policy"  # inherited from the prior version
    assert mem.org.get("deploy-day") == v3
    # the chain is in the graph: v3 -> v2 -> v1
    sub = mem.backend.expand([v3.ref], [EdgeType.SUPERSEDES], direction="out", depth=5)
    chain = {(e.src.id, e.dst.id) for e in sub.edges}
    assert chain == {(v3.id, v2.id), (v2.id, v1.id)}
    edge = next(e for e in sub.edges if e.src.id == v2.id)
    assert edge.props["reason"] == "moved"
    retracted = mem.org.retract("deploy-day", author="senior", reason="no fixed day")
    assert retracted.retracted_at is not None and retracted.version == 3
    with pytest.raises(Conflict, match="already retracted"):
        mem.org.retract("deploy-day", author="senior")
    ops = mem.org.history("deploy-day")
    assert [(o.operation, o.version, o.author) for o in ops] == [
        ("publish", 1, "senior"),
        ("publish", 2, "lead"),
        ("publish", 3, "human"),
        ("retract", 3, "senior"),
    ]
    assert ops[0].reason == "initial" and ops[-1].reason == "no fixed day"
    # each operation RECORDS the version it touched
    for op in ops:
        out = mem.backend.expand([op.ref], [EdgeType.RECORDS], direction="out")
        targets = [n for n in out.nodes if n.label is NodeLabel.ORG_FACT]
        assert [t.version for t in targets] == [op.version]  # type: ignore[attr-defined]
    # republishing a retracted fact starts a new current version
    v4 = mem.org.publish("Deploys any day", author="senior", fact_id="deploy-day")
    assert v4.version == 4 and mem.org.get("deploy-day").status is Status.ACTIVE
    assert len(mem.org.history("deploy-day")) == 5


def test_expected_version_turns_races_into_conflicts(mem: GraphMemory) -> None:
    team(mem)
    mem.org.publish("a", author="senior", fact_id="f", expected_version=0)
    with pytest.raises(Conflict):
        mem.org.publish("b", author="senior", fact_id="f", expected_version=0)
    with pytest.raises(Conflict):
        mem.org.publish("b", author="senior", fact_id="f", expected_version=2)
    assert mem.org.publish("b", author="senior", fact_id="f", expected_version=1).version == 2
    assert [v.content for v in mem.org.versions("f")] == ["a", "b"]


def test_moving_a_fact_to_another_category_needs_both_rights(mem: GraphMemory) -> None:
    team(mem)
    mem.org.publish("use snake_case", author="mid", category="convention", fact_id="naming")
    # mid may write conventions but not policies: the move is denied and nothing changes
    with pytest.raises(AccessDenied):
        mem.org.publish("use snake_case", author="mid", category="policy", fact_id="naming")
    # a senior may; and a senior may not move a security fact out of its category
    assert (
        mem.org.publish(
            "use snake_case", author="senior", category="policy", fact_id="naming"
        ).category
        == "policy"
    )
    mem.org.publish("rotate keys", author="lead", category="security", fact_id="keys")
    with pytest.raises(AccessDenied):
        mem.org.publish("rotate keys", author="senior", category="policy", fact_id="keys")
    assert len(mem.org.versions("keys")) == 1


def test_bad_input_is_typed_and_writes_nothing(mem: GraphMemory) -> None:
    team(mem)
    for bad in ("", "   "):
        with pytest.raises(InvalidInput):
            mem.org.publish(bad, author="lead")
    with pytest.raises(InvalidInput):
        mem.org.publish("x", author="lead", category="Not A Category")
    with pytest.raises(InvalidInput):
        mem.org.publish("x", author="lead", tags=["bad tag!"])
    with pytest.raises(InvalidInput):
        mem.org.publish("x", author="lead", fact_id="config:1")  # reserved
    assert org_nodes(mem) == (0, 0)
    with pytest.raises(NotFound):
        mem.org.get("nope")
    with pytest.raises(NotFound):
        mem.org.retract("nope", author="lead")
    with pytest.raises(NotFound):
        mem.org.history("nope")


def test_query_by_text_categories_and_tags(mem: GraphMemory) -> None:
    team(mem)
    mem.org.publish(
        "All services log in JSON format",
        author="lead",
        category="convention",
        fact_id="c-log",
        tags=["logging"],
    )
    mem.org.publish(
        "Never log secrets or access tokens",
        author="lead",
        category="security",
        fact_id="s-secrets",
        tags=["logging", "secrets"],
    )
    mem.org.publish(
        "We chose PostgreSQL for the billing service",
        author="lead",
        category="adr",
        fact_id="adr-1",
    )
    mem.org.publish("Old logging rule", author="lead", category="convention", fact_id="c-old")
    mem.org.retract("c-old", author="lead")
    hits = mem.org.query("log secrets")
    assert [f.fact_id for f in hits][:2] == ["s-secrets", "c-log"]
    assert "c-old" not in [f.fact_id for f in hits]
    assert {f.fact_id for f in mem.org.query("logging", include_retracted=True)} == {
        "c-log",
        "s-secrets",
        "c-old",
    }
    assert "c-old" not in {f.fact_id for f in mem.org.query("logging")}
    assert [f.fact_id for f in mem.org.query("log", categories=["convention"])] == ["c-log"]
    assert [f.fact_id for f in mem.org.query(categories="adr")] == ["adr-1"]
    assert [f.fact_id for f in mem.org.query(tags=["secrets"])] == ["s-secrets"]
    assert mem.org.query("kubernetes") == []
    assert [f.fact_id for f in mem.org.query("billing database postgresql", limit=1)] == ["adr-1"]
    with pytest.raises(InvalidInput):
        mem.org.query("?!")
    assert [f.fact_id for f in mem.org.list(categories=["convention"])] == ["c-log"]


def test_list_policies_pages_in_a_stable_order(mem: GraphMemory) -> None:
    team(mem)
    org = OrgMemory(
        mem.backend, mem.writes, config=OrgConfig(core_policies=["Be honest.", "Be safe."])
    )
    written = [org.publish(f"policy {i}", author="senior", fact_id=f"p{i:02d}") for i in range(7)]
    core = org.publish("Escalate outages to a human.", author="lead", core=True, fact_id="z-core")
    org.publish("not a policy", author="lead", category="adr")
    org.publish("policy 3, revised", author="senior", fact_id="p03")  # stays in its place
    org.retract("p05", author="senior")
    expected = ["config:1", "config:2", "z-core"] + [f"p{i:02d}" for i in range(7) if i != 5]
    assert org.count_policies() == len(expected) == 9
    assert [f.fact_id for f in org.list_policies()] == expected
    for size in (1, 2, 3, 4, 10):
        pages = []
        for off in range(0, 12, size):
            pages.extend(org.list_policies(limit=size, offset=off))
        assert [f.fact_id for f in pages] == expected, size
    assert org.list_policies(limit=0) == []
    assert org.list_policies(offset=50) == []
    assert next(f for f in org.list_policies() if f.fact_id == "p03").version == 2
    assert org.core_policies() == ["Be honest.", "Be safe.", core.content]
    with pytest.raises(InvalidInput):
        org.list_policies(offset=-1)
    assert written[0].core is False


def test_configured_core_policies_are_validated() -> None:
    with pytest.raises(ValueError):
        OrgConfig(core_policies=["ok", ""])
    with pytest.raises(ValueError):
        OrgConfig(seniority_levels=("junior", "human"))
    assert OrgConfig(core_policies="one").core_policies == ("one",)


def test_org_fact_authored_by_edge_links_the_agent(mem: GraphMemory) -> None:
    team(mem)
    f = mem.org.publish("p", author="lead")
    sub = mem.backend.expand([f.ref], [EdgeType.AUTHORED_BY], direction="out")
    assert NodeRef(NodeLabel.AGENT, "lead") in {n.ref for n in sub.nodes}

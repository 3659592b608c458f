"""Multi-agent scoping: private by default, shared namespaces, org-wide memories.

The isolation property test builds a random world of agents, shared namespaces and
memories, then runs many random scoped queries through every candidate source (lexical,
vector, plain filtering and GraphMemory.recall) and checks each answer against an
independent model of who may read what: never another agent's private memory, never a
namespace the agent left, and — where the query is exhaustive — nothing missing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import pytest

from graphmem.errors import AccessDenied, Conflict, InvalidInput, NotFound
from graphmem.memory import GraphMemory
from graphmem.models import Filter, Memory, NodeLabel, TextQuery, VectorQuery, Visibility
from graphmem.scoping import Scope, scope_filter

# -- isolation property test ------------------------------------------------------------

SEEDS = [11, 22, 33]
N_AGENTS = 12
N_NAMESPACES = 4
N_MEMORIES = 300
N_QUERIES = 150
DIM = 8
WORDS = [
    "apple",
    "river",
    "castle",
    "engine",
    "forest",
    "garden",
    "harbor",
    "island",
    "jungle",
    "kettle",
    "ladder",
    "mirror",
]


@dataclass
class World:
    members: dict[str, set[str]]  # namespace -> members (the ground truth)
    owner: dict[str, str]
    memories: dict[str, tuple[str, Visibility, str, str]]  # id -> (author, vis, ns, content)


def build_world(mem: GraphMemory, rng: random.Random) -> World:
    agents = [f"agent-{i}" for i in range(N_AGENTS)]
    members: dict[str, set[str]] = {}
    owner: dict[str, str] = {}
    for j in range(N_NAMESPACES):
        name = f"team-{j}"
        own = rng.choice(agents)
        others = set(rng.sample(agents, rng.randint(0, 5))) - {own}
        mem.namespaces.create(name, owner=own, members=sorted(others))
        members[name] = {own, *others}
        owner[name] = own
    mem.backend.ensure_schema(embedding_dim=DIM)
    items: list[Memory] = []
    for i in range(N_MEMORIES):
        author = rng.choice(agents)
        mine = [n for n, m in members.items() if author in m]
        roll = rng.random()
        if roll < 0.5 or (roll < 0.8 and not mine):
            vis = Visibility.PRIVATE
            # private memories also live in shared namespaces: they must stay private there
            ns = rng.choice([*members, "default", f"scratch-{author}"])
        elif roll < 0.8:
            vis, ns = Visibility.SHARED, rng.choice(mine)
        else:
            vis, ns = Visibility.ORG, rng.choice(["default", *members])
        content = " ".join(rng.sample(WORDS, 3)) + f" note {i}"
        vec = np.asarray([rng.gauss(0, 1) for _ in range(DIM)], dtype=np.float32)
        items.append(
            Memory(
                content=content,
                agent_id=author,
                namespace=ns,
                visibility=vis,
                embedding=vec.tolist(),
                tags=[rng.choice(["x", "y"])],
            )
        )
    stored = mem.remember_many(items)
    world = World(
        members, owner, {m.id: (m.agent_id, m.visibility, m.namespace, m.content) for m in stored}
    )
    # membership changes after the writes: revocation must take effect at once
    for name in list(members)[:2]:
        leavers = sorted(members[name] - {owner[name]})
        if leavers:
            gone = rng.choice(leavers)
            mem.namespaces.remove_members(name, [gone], by=owner[name])
            members[name].discard(gone)
        newcomer = rng.choice(agents)
        mem.namespaces.add_members(name, [newcomer], by=owner[name])
        members[name].add(newcomer)
    return world


def allowed_ids(world: World, agent: str, own: bool, shared: set[str], org: bool) -> set[str]:
    out = set()
    for mid, (author, vis, ns, _c) in world.memories.items():
        if (
            (vis is Visibility.PRIVATE and own and author == agent)
            or (vis is Visibility.SHARED and ns in shared)
            or (vis is Visibility.ORG and org)
        ):
            out.add(mid)
    return out


def random_scope(rng: random.Random, world: World, agent: str) -> tuple[Scope, set[str] | None]:
    """A random scope and the namespaces it reads (None: the scope must be refused)."""
    mine = sorted(n for n, m in world.members.items() if agent in m)
    own, org = rng.random() < 0.8, rng.random() < 0.6
    roll = rng.random()
    if roll < 0.45:
        return Scope(agent_id=agent, own=own, org=org), set(mine)
    if roll < 0.6:
        return Scope(agent_id=agent, own=own, shared=(), org=org), set()
    if roll < 0.9 or len(mine) == N_NAMESPACES:
        pick = set(rng.sample(mine, rng.randint(0, len(mine))))
        return Scope(agent_id=agent, own=own, shared=sorted(pick), org=org), pick
    foreign = rng.choice(sorted(set(world.members) - set(mine)))
    return Scope(agent_id=agent, own=own, shared=[*mine, foreign], org=org), None


@pytest.mark.parametrize("seed", SEEDS)
def test_scoped_queries_never_leak_private_memories(mem: GraphMemory, seed: int) -> None:
    rng = random.Random(seed)
    world = build_world(mem, rng)
    agents = [f"agent-{i}" for i in range(N_AGENTS)] + ["outsider"]
    b = mem.backend
    checked = refused = 0
    for _ in range(N_QUERIES):
        agent = rng.choice(agents)
        scope, shared = (
            random_scope(rng, world, agent)
            if agent != "outsider"
            else (Scope(agent_id=agent), set())
        )
        if shared is None:
            with pytest.raises(AccessDenied):
                mem.recall(rng.choice(WORDS), scope=scope)
            refused += 1
            continue
        allowed = allowed_ids(world, agent, scope.own, shared, scope.org)
        flt = mem.namespaces.filter(scope)
        # plain filtering is exact: sound and complete
        assert {m.id for m in b.match(flt)} == allowed
        assert b.count(flt) == len(allowed)
        # lexical search over everything the scope admits, for one word: exact too
        word = rng.choice(WORDS)
        text_ids = {
            h.node.id for h in b.search_text(TextQuery(text=word, filter=flt, k=N_MEMORIES))
        }
        assert text_ids == {i for i in allowed if word in world.memories[i][3].split()}
        # vector search: exhaustive k returns exactly the allowed set; small k a subset
        vec = tuple(rng.gauss(0, 1) for _ in range(DIM))
        k = rng.randint(1, 40)
        assert {
            h.node.id for h in b.search_vector(VectorQuery(vector=vec, filter=flt, k=N_MEMORIES))
        } == allowed
        small = b.search_vector(VectorQuery(vector=vec, filter=flt, k=k))
        assert len(small) == min(k, len(allowed))  # the filter ran before the top-k cut
        # recall, with an extra caller filter ANDed in: never outside the scope
        extra = rng.choice([None, rng.choice(agents)])
        got = mem.recall(
            " ".join(rng.sample(WORDS, 2)), scope=scope, k=k, agent_id=extra, touch=False
        )
        for r in got:
            assert r.memory.id in allowed
            author, vis, _ns, _c = world.memories[r.memory.id]
            assert vis is not Visibility.PRIVATE or author == agent
            assert extra is None or author == extra
        checked += 1
    assert checked > N_QUERIES // 2 and refused > 0


# -- namespaces and writes ----------------------------------------------------------------


def test_memories_are_private_by_default(mem: GraphMemory) -> None:
    a = mem.remember("alpha likes tea", agent_id="alpha")
    mem.remember("beta likes tea", agent_id="beta")
    assert a.visibility is Visibility.PRIVATE and a.audience == "agent:alpha"
    assert [r.memory.id for r in mem.recall("tea", scope="alpha")] == [a.id]
    assert mem.recall("tea", scope=Scope(agent_id="alpha", own=False)) == []
    assert len(mem.recall("tea")) == 2  # unscoped: the application sees everything


def test_sharing_requires_a_shared_namespace_and_membership(mem: GraphMemory) -> None:
    with pytest.raises(AccessDenied, match="not shared"):
        mem.remember("plan", agent_id="a", namespace="team", visibility="shared")
    mem.namespaces.create("team", owner="a", members=["b"])
    with pytest.raises(AccessDenied, match="not a member"):
        mem.remember("plan", agent_id="c", namespace="team", visibility="shared")
    with pytest.raises(AccessDenied):  # one bad item denies the whole batch
        mem.remember_many(
            [
                {"content": "ok", "agent_id": "b", "namespace": "team", "visibility": "shared"},
                {"content": "no", "agent_id": "c", "namespace": "team", "visibility": "shared"},
            ]
        )
    assert mem.count(status=None) == 0
    shared = mem.remember("plan the launch", agent_id="b", namespace="team", visibility="shared")
    assert {r.memory.id for r in mem.recall("launch", scope="a")} == {shared.id}
    assert mem.recall("launch", scope="c") == []
    with pytest.raises(AccessDenied):
        mem.recall("launch", scope=Scope(agent_id="c", shared=["team"]))


def test_membership_changes_take_effect_at_once(mem: GraphMemory) -> None:
    mem.namespaces.create("ops", owner="lead", members=["x"])
    m = mem.remember("pager rota", agent_id="lead", namespace="ops", visibility="shared")
    assert [r.memory.id for r in mem.recall("pager", scope="x")] == [m.id]
    with pytest.raises(AccessDenied):
        mem.namespaces.remove_members("ops", ["x"], by="x")  # only the owner
    mem.namespaces.remove_members("ops", ["x"], by="lead")
    assert mem.recall("pager", scope="x") == []
    with pytest.raises(InvalidInput):
        mem.namespaces.remove_members("ops", ["lead"])
    mem.namespaces.add_members("ops", ["y"])  # the application itself (by=None)
    assert mem.namespaces.get("ops").members == ("lead", "y")
    assert [ns.id for ns in mem.namespaces.list(member="y")] == ["ops"]
    assert mem.namespaces.list(member="x") == []
    with pytest.raises(Conflict):
        mem.namespaces.create("ops", owner="z")
    with pytest.raises(NotFound):
        mem.namespaces.add_members("nope", ["y"])
    with pytest.raises(InvalidInput):
        mem.namespaces.add_members("ops", "y")  # type: ignore[arg-type]


def test_org_visible_memories_reach_every_agent_unless_excluded(mem: GraphMemory) -> None:
    m = mem.remember("office closes at six", agent_id="hr", visibility="org")
    assert [r.memory.id for r in mem.recall("office", scope="anyone")] == [m.id]
    assert mem.recall("office", scope=Scope(agent_id="anyone", org=False)) == []


def test_update_can_share_but_only_into_a_namespace_of_the_author(mem: GraphMemory) -> None:
    m = mem.remember("draft roadmap", agent_id="a", namespace="team")
    with pytest.raises(AccessDenied):
        mem.update(m.id, visibility="shared")
    assert mem.get(m.id).status.value == "active"  # the denied update wrote nothing
    mem.namespaces.create("team", owner="a", members=["b"])
    new = mem.update(m.id, visibility="shared")
    assert new.audience == "ns:team"
    assert [r.memory.id for r in mem.recall("roadmap", scope="b")] == [new.id]


def test_shared_events_are_checked_too(mem: GraphMemory) -> None:
    with pytest.raises(AccessDenied):
        mem.runs.add_events(
            "r1",
            [
                {
                    "event_type": "user_message",
                    "content": "hi",
                    "agent_id": "a",
                    "namespace": "team",
                    "visibility": "shared",
                }
            ],
        )
    assert mem.count(status=None) == 0


def test_audience_cannot_be_forged_through_props() -> None:
    m = Memory.from_props({"content": "x", "agent_id": "a", "audience": "org"})
    assert m.audience == "agent:a"
    assert Memory(content="x", agent_id="a").evolve(agent_id="b").audience == "agent:b"


def test_scope_filter_only_ever_narrows() -> None:
    base = Filter(any_of={"audience": ("agent:a", "org")})
    assert scope_filter(["agent:a", "ns:t"], base).any_of["audience"] == ("agent:a",)
    pinned = Filter(equals={"audience": "ns:t"})
    f = scope_filter(["agent:a"], pinned)
    assert f.any_of["audience"] == () and "audience" not in f.equals
    with pytest.raises(InvalidInput):
        scope_filter(["org"], Filter(label=NodeLabel.RUN))
    with pytest.raises(ValueError):
        Scope(agent_id=" a")
    assert Scope(agent_id="a", shared="team").shared == ("team",)

"""A seeded fuzzer of the Python API: every public verb of GraphMemory and of its
sub-objects, with hostile arguments.

Each call draws, per parameter, either a plausible value (an existing id, a known agent, a
short text) or a hostile one (None, bytes, floats, NaN, lone surrogates, huge integers,
wrong containers, arbitrary objects), sometimes leaves parameters out and sometimes adds an
unknown keyword. Two properties are checked for every call:

- every exception is a :class:`graphmem.errors.GraphMemError` (an *untyped* error is any
  other exception);
- a call that raised left the store exactly as it was (its export is unchanged).

The store is rebuilt every ``ROUND`` calls so that the export stays small. ``run_fuzz`` is
deterministic for a seed; ``tests/interfaces/test_fuzz.py`` runs it, and
``python -m tests.interfaces.api_fuzz`` prints the figures.
"""

from __future__ import annotations

import inspect
import io
import random
import sys
import typing
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import chdir, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from graphmem.boundary import _hints, _typed_dict_fields
from graphmem.errors import GraphMemError
from graphmem.memory import GraphMemory

#: the sub-objects of the face (``mem.<name>``)
PARTS = (
    "runs",
    "agents",
    "org",
    "namespaces",
    "lifecycle",
    "knowledge",
    "log",
    "vectors",
    "transfer",
)
#: public names that are not verbs a caller fuzzes: closing the store, plumbing that takes
#: callables or schedulers, and the write path's internals below ``mem.writes``' face
SKIP = {
    "close",
    "lifecycle.add_provider",
    "lifecycle.remove_provider",
    "lifecycle.scheduled",
    "lifecycle.scheduler",
    "vectors.close",
}
#: the face of ``mem.writes`` (graphmem.protocol.WritesAPI); the rest of Writes is internal
WRITES = ("reconcile", "supersede", "link", "set_status", "validate", "memories")
ROUND = 150


class _Odd:
    """An object of no type graphmem knows."""

    def __repr__(self) -> str:
        return "<odd>"


HOSTILE: list[Any] = [
    None,
    b"x",
    bytearray(b"x"),
    1.5,
    float("nan"),
    float("inf"),
    -1,
    0,
    2**70,
    -(2**70),
    True,
    "a\ud800",
    "",
    " ",
    "x" * 5000,
    "a\x00b",
    [],
    [None],
    ["a\ud800"],
    [1, 2],
    {},
    {"a": _Odd()},
    {"\ud800": 1},
    {1: "x"},
    ("a",),
    {"a"},
    _Odd(),
    datetime(1, 1, 1),
    datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5))),
    "9999-12-31T23:59:59-05:00",
    "bogus",
    object,
    print,
]
UNKNOWN_KWARGS = ["bogus", "agentid", "limit_", "x"]


@dataclass
class Report:
    """What a fuzz run saw."""

    calls: int = 0
    raised: int = 0
    untyped: Counter[str] = field(default_factory=Counter)
    changed: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    verbs: set[str] = field(default_factory=set)

    @property
    def untyped_total(self) -> int:
        return sum(self.untyped.values())

    def summary(self) -> str:
        lines = [
            f"{self.calls} calls over {len(self.verbs)} verbs, {self.raised} raised, "
            f"{self.untyped_total} untyped, {sum(self.changed.values())} changed the store "
            "although they raised"
        ]
        for kind, n in (self.untyped + self.changed).most_common():
            lines.append(f"  {n:5d}  {kind}  e.g. {self.examples[kind]}")
        return "\n".join(lines)


@dataclass
class World:
    """A store with something in it, and the ids a plausible argument picks from."""

    mem: GraphMemory
    tmp: Path
    memory_ids: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    fact_ids: list[str] = field(default_factory=list)


def _seed(mem: GraphMemory, tmp: Path) -> World:
    w = World(mem, tmp)
    mem.agents.register("cto", seniority="lead")
    mem.agents.register("alice")
    mem.agents.register("bob")
    mem.namespaces.create("team", owner="alice", members=["bob"])
    a = mem.remember("Alice prefers green tea", agent_id="alice", tags=["prefs"])
    b = mem.remember("Bob lives in Oslo", agent_id="bob", namespace="team", visibility="shared")
    c = mem.update(a.id, "Alice prefers black tea")
    run = mem.runs.start("alice", run_id="r1")
    mem.runs.add_event(run.id, "user_message", "hello from Alice")
    fact = mem.org.publish("Deploys need two reviews", author="cto", category="policy")
    mem.log.log("alice", "step", {"n": 1}, run_id=run.id)
    mem.log.set("k", "v")
    w.memory_ids = [a.id, b.id, c.id]
    w.run_ids = [run.id, "missing-run"]
    w.fact_ids = [fact.id, "missing-fact"]
    return w


def _plausible(name: str, annotation: str, w: World, rnd: random.Random) -> Any:
    """A value a careful caller might pass for this parameter."""
    n = name.lower()
    if n in ("memory_id", "derived_id", "merged_id", "new") or n.endswith("memory_id"):
        return rnd.choice([*w.memory_ids, "missing"])
    if n in ("ids", "source_ids", "olds", "memories", "memory_ids"):
        return rnd.sample(w.memory_ids, rnd.randint(1, len(w.memory_ids)))
    if n in ("run_id", "session_id"):
        return rnd.choice(w.run_ids)
    if n == "run_ids":
        return [rnd.choice(w.run_ids)]
    if n == "fact_id":
        return rnd.choice(w.fact_ids)
    if n in ("agent_id", "author", "owner", "member", "scope"):
        return rnd.choice(["alice", "bob", "cto", "nobody"])
    if n in ("members", "agent_ids"):
        return rnd.sample(["alice", "bob", "cto"], 2)
    if n in ("namespace", "name"):
        return rnd.choice(["default", "team", "Alice"])
    if n in ("dest", "src"):
        return str(w.tmp / rnd.choice(["out.jsonl", "missing/in.jsonl"]))
    if n == "items":
        return [{"content": "Carol likes jazz", "agent_id": "alice"}]
    if n == "messages":
        return [{"role": "user", "content": "I moved to Rome"}]
    if n == "events":
        return [{"event_type": "note", "content": "an event"}]
    if n in ("tags", "fields", "keys", "members_"):
        return ["prefs"]
    if n in ("metadata", "extra", "payload", "changes"):
        return {"source": "fuzz"}
    if n == "status":
        return rnd.choice(["active", "archived", "completed"])
    if n in ("category",):
        return rnd.choice(["semantic", "episodic", "policy"])
    if n == "tier":
        return rnd.choice(["short_term", "long_term"])
    if n == "visibility":
        return rnd.choice(["private", "shared", "org"])
    if n in ("type",):
        return rnd.choice(["person", "place"])
    if n == "embedder":
        return None
    if "datetime" in annotation:
        return datetime(2024, 5, 1, tzinfo=UTC)
    if "bool" in annotation:
        return rnd.random() < 0.5
    if "float" in annotation:
        return rnd.choice([0.0, 0.5, 1.0])
    if "int" in annotation:
        return rnd.choice([0, 1, 5])
    return rnd.choice(["Alice", "tea", "hello world", "k"])


def _value(name: str, annotation: str, w: World, rnd: random.Random) -> Any:
    if name in ("dest", "src", "path"):
        # a file argument never names a path outside the test's folder
        return rnd.choice(
            [
                str(w.tmp / "out.jsonl"),
                w.tmp / "missing" / "x.jsonl",
                str(w.tmp),
                io.StringIO("not json\n"),
                None,
                b"x",
                1.5,
                str(w.tmp / "a\x00b"),
                str(w.tmp / "a\ud800"),
            ]
        )
    if rnd.random() < 0.45:
        return _plausible(name, annotation, w, rnd)
    return rnd.choice(HOSTILE)


def verbs(mem: GraphMemory) -> list[tuple[str, Callable[..., Any]]]:
    """Every public verb: ``(dotted name, bound method)``."""
    out: list[tuple[str, Callable[..., Any]]] = []
    owners: list[tuple[str, Any]] = [("", mem), *((p, getattr(mem, p)) for p in PARTS)]
    for prefix, obj in owners:
        for name in sorted(dir(type(obj))):
            if name.startswith("_"):
                continue
            static = inspect.getattr_static(type(obj), name)
            if isinstance(static, property) or not callable(getattr(obj, name)):
                continue
            dotted = f"{prefix}.{name}" if prefix else name
            if dotted not in SKIP and dotted != "open":
                out.append((dotted, getattr(obj, name)))
    out.extend((f"writes.{n}", getattr(mem.writes, n)) for n in WRITES)
    return out


def _unpacked(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """The keys (and types) of ``**name`` when ``fn`` annotates it ``Unpack[SomeTypedDict]``."""
    tp = _hints(inspect.unwrap(fn)).get(name)
    if typing.get_origin(tp) is not typing.Unpack:
        return {}
    return dict(_typed_dict_fields(typing.get_args(tp)[0]))


def _arguments(
    fn: Callable[..., Any], w: World, rnd: random.Random
) -> tuple[list[Any], dict[str, Any]]:
    sig = inspect.signature(fn)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in sig.parameters.values():
        ann = str(p.annotation)
        if p.kind is p.VAR_POSITIONAL:
            args.extend(_value(p.name, ann, w, rnd) for _ in range(rnd.randint(0, 2)))
        elif p.kind is p.VAR_KEYWORD:
            keyed = _unpacked(fn, p.name)
            if keyed:  # ``**filters: Unpack[MemoryFilters]``: its keys, and one it lacks
                for key in rnd.sample([*keyed, "bogus"], 3):
                    if rnd.random() < 0.5:
                        kwargs[key] = _value(key, str(keyed.get(key, "")), w, rnd)
                continue
            for key in rnd.sample(["status", "agent_id", "tags", "limit", "bogus"], 2):
                if rnd.random() < 0.3:
                    kwargs[key] = _value(key, "", w, rnd)
        elif p.default is not p.empty and rnd.random() < 0.4:
            continue  # left out
        elif p.kind is p.POSITIONAL_OR_KEYWORD and not kwargs and rnd.random() < 0.5:
            args.append(_value(p.name, ann, w, rnd))
        elif p.default is p.empty and rnd.random() < 0.03:
            continue  # a required argument missing
        else:
            kwargs[p.name] = _value(p.name, ann, w, rnd)
    if rnd.random() < 0.08:
        kwargs[rnd.choice(UNKNOWN_KWARGS)] = rnd.choice(HOSTILE)
    return args, kwargs


def snapshot(mem: GraphMemory) -> str:
    buf = io.StringIO()
    mem.transfer.export(buf)
    return buf.getvalue()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."


def _call_text(verb: str, args: list[Any], kwargs: dict[str, Any]) -> str:
    parts = [_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()]
    return f"{verb}({', '.join(parts)})"


def _kind(verb: str, e: BaseException) -> str:
    return f"{verb}: {type(e).__name__}"


@contextmanager
def _world(tmp: Path, i: int, open_store: Opener) -> Iterator[World]:
    folder = tmp / f"round{i}"
    folder.mkdir()
    mem = open_store(folder)
    try:
        yield _seed(mem, folder)
    finally:
        mem.close()


def fuzz_open(tmp: Path, rnd: random.Random, report: Report, calls: int) -> None:
    """``GraphMemory.open`` with bad paths and options; every store it opens is closed."""
    blocker = tmp / "a-file"
    blocker.write_text("not a directory")
    garbage = tmp / "garbage.db"
    garbage.write_bytes(b"\x00\xffnot sqlite at all" * 64)
    urls: list[Any] = [
        str(blocker / "x.db"),  # a parent that is a file
        "/proc/graphmem-fuzz/x.db",  # a folder nobody can create
        str(tmp),  # a directory
        str(garbage),
        "a\ud800.db",
        "a\x00b.db",
        "",
        b"x.db",
        1.5,
        ["x"],
        "unknown-scheme://x",
        "memory://",
        str(tmp / "ok.db"),
    ]
    for _ in range(calls):
        url = rnd.choice(urls)
        kwargs: dict[str, Any] = {"embedder": None}
        if rnd.random() < 0.3:
            kwargs[rnd.choice(["vectors", "profile", "knowledge", "bogus"])] = rnd.choice(HOSTILE)
        report.calls += 1
        report.verbs.add("open")
        try:
            GraphMemory.open(url, **kwargs).close()
        except GraphMemError:
            report.raised += 1
        except Exception as e:
            report.raised += 1
            kind = _kind("open", e)
            report.untyped[kind] += 1
            report.examples.setdefault(kind, f"open({_short(url)}, {kwargs}) -> {e!r}"[:300])


Opener = Callable[[Path], GraphMemory]


def _file_store(folder: Path) -> GraphMemory:
    return GraphMemory.open(str(folder / "fuzz.db"), embedder=None)


def run_fuzz(
    tmp: Path,
    *,
    seed: int = 24,
    calls: int = 5000,
    open_calls: int = 200,
    open_store: Opener = _file_store,
) -> Report:
    """Fuzz ``calls`` verb calls (plus ``open_calls`` opens) in rounds on fresh stores,
    each made by ``open_store(folder)`` (default: an embedded file in ``folder``)."""
    with chdir(tmp):  # a relative path (open's default ./graphmem.db) stays in tmp
        return _run(tmp, seed, calls, open_calls, open_store)


def _run(tmp: Path, seed: int, calls: int, open_calls: int, open_store: Opener) -> Report:
    rnd = random.Random(seed)
    report = Report()
    fuzz_open(tmp, rnd, report, open_calls)
    done = 0
    i = 0
    while done < calls:
        with _world(tmp, i, open_store) as w:
            table = verbs(w.mem)
            for _ in range(min(ROUND, calls - done)):
                verb, fn = rnd.choice(table)
                args, kwargs = _arguments(fn, w, rnd)
                before = snapshot(w.mem)
                report.calls += 1
                report.verbs.add(verb)
                done += 1
                try:
                    result = fn(*args, **kwargs)
                    if inspect.isgenerator(result):
                        list(result)
                except GraphMemError as e:
                    report.raised += 1
                    if snapshot(w.mem) != before:
                        kind = f"{verb}: changed the store, then {type(e).__name__}"
                        report.changed[kind] += 1
                        report.examples.setdefault(kind, _call_text(verb, args, kwargs))
                except Exception as e:
                    report.raised += 1
                    kind = _kind(verb, e)
                    report.untyped[kind] += 1
                    report.examples.setdefault(
                        kind, f"{_call_text(verb, args, kwargs)} -> {e!r}"[:300]
                    )
        i += 1
    return report


def main() -> int:
    import tempfile

    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 24
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    with tempfile.TemporaryDirectory() as tmp:
        report = run_fuzz(Path(tmp), seed=seed, calls=calls)
    print(report.summary())
    return 0 if not report.untyped and not report.changed else 1


if __name__ == "__main__":
    sys.exit(main())

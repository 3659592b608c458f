"""A LangGraph ``BaseStore`` backed by graphmem: long-term memory for LangGraph agents and
langmem.

>>> from graphmem import GraphMemory
>>> from graphmem.integrations.langgraph import GraphMemStore
>>> store = GraphMemStore(GraphMemory.open("memory://", embedder="hash"), agent_id="assistant")
>>> store.put(("users", "alice"), "drink", {"content": "Alice drinks green tea"})
>>> store.get(("users", "alice"), "drink").value
{'content': 'Alice drinks green tea'}
>>> [i.key for i in store.search(("users",), query="what does alice drink?")]
['drink']

How the store maps onto graphmem:

- an item is one memory of ``agent_id``; its namespace tuple is the graphmem namespace
  (labels joined by ``.``, which LangGraph forbids inside a label), and every prefix of it is
  a tag, so ``search(prefix)`` is one tag filter;
- ``put`` on an existing key writes a new *version* (the old one stays, superseded, in
  ``mem.history``), ``put(..., None)`` and ``delete`` forget the item with its versions;
- the memory's content is the text of the indexed fields (``index=[...]`` paths, else the
  value's ``content``/``text``/``memory`` string, else the value as JSON), so
  ``search(query=...)`` is graphmem's hybrid recall; ``filter`` is matched on the value
  (``{"field": v}`` or operators ``$eq $ne $gt $gte $lt $lte``);
- ``list_namespaces`` reads the namespaces of this store's memories.

The value is kept as JSON in the memory's metadata; TTLs are not supported.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from graphmem.errors import NotFound
from graphmem.integrations import require

require("langgraph.store.base", "langgraph")

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
)

__all__ = ["GraphMemStore"]

_STORE_TAG = "langgraph-store"
_KEY = "lg_key"
_VALUE = "lg_value"
_CREATED = "lg_created_at"
_TEXT_FIELDS = ("content", "text", "memory")


def _ns(namespace: tuple[str, ...]) -> str:
    return ".".join(namespace)


def _prefix_tag(prefix: tuple[str, ...]) -> str:
    # tags are short lowercase identifiers; a digest keeps any label usable
    digest = hashlib.blake2b(_ns(prefix).encode("utf-8"), digest_size=10).hexdigest()
    return f"lgns:{digest}"


def _text_of(value: Mapping[str, Any], index: bool | list[str] | None) -> str:
    if isinstance(index, list) and index:
        parts = [t for path in index for t in get_text_at_path(value, path)]
        text = "\n".join(p for p in parts if p.strip())
        if text.strip():
            return text
    for name in _TEXT_FIELDS:
        if isinstance(value.get(name), str) and value[name].strip():
            return str(value[name])
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


_OPS: dict[str, Any] = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a is not None and a > b,
    "$gte": lambda a, b: a is not None and a >= b,
    "$lt": lambda a, b: a is not None and a < b,
    "$lte": lambda a, b: a is not None and a <= b,
}


def _compare(actual: Any, cond: Any) -> bool:
    if not isinstance(cond, Mapping):
        return bool(actual == cond)
    for op, want in cond.items():
        if op not in _OPS:
            raise ValueError(f"unsupported filter operator {op!r}")
        try:
            if not _OPS[op](actual, want):
                return False
        except TypeError:  # incomparable types: no match, as in LangGraph's own stores
            return False
    return True


def _matches(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    return not flt or all(_compare(value.get(k), c) for k, c in flt.items())


def _namespace_matches(ns: tuple[str, ...], cond: MatchCondition) -> bool:
    path = tuple(cond.path)
    if len(path) > len(ns):
        return False
    part = ns[: len(path)] if cond.match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


class GraphMemStore(BaseStore):
    """A LangGraph store whose items are graphmem memories of ``agent_id``.

    ``mem`` is an open :class:`~graphmem.memory.GraphMemory` (the caller closes it).
    Recall ranks with graphmem's hybrid scorer: ``SearchItem.score`` is its score.
    """

    supports_ttl = False

    def __init__(self, mem: Any, *, agent_id: str = "langgraph") -> None:
        self.mem = mem
        self.agent_id = agent_id

    # -- reading ---------------------------------------------------------------------

    def _current(self, namespace: tuple[str, ...], key: str) -> Any | None:
        found = self.mem.list(
            agent_id=self.agent_id,
            namespace=_ns(namespace),
            tags=[_STORE_TAG],
            metadata={_KEY: key},
            limit=1,
        )
        return found[0] if found else None

    def _item(self, memory: Any, score: float | None = None) -> SearchItem:
        meta = memory.metadata
        created = meta.get(_CREATED)
        namespace = tuple(memory.namespace.split("."))
        return SearchItem(
            namespace=namespace,
            key=str(meta[_KEY]),
            value=json.loads(meta[_VALUE]),
            created_at=datetime.fromisoformat(created) if created else memory.created_at,
            updated_at=memory.created_at,
            score=score,
        )

    def _get(self, op: GetOp) -> Item | None:
        memory = self._current(tuple(op.namespace), op.key)
        if memory is None:
            return None
        item = self._item(memory)
        return Item(
            value=item.value,
            key=item.key,
            namespace=item.namespace,
            created_at=item.created_at,
            updated_at=item.updated_at,
        )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        tags = [_STORE_TAG] + ([_prefix_tag(prefix)] if prefix else [])
        wanted = op.offset + op.limit
        if op.query:
            # recall a few more than asked when a filter may drop some
            k = wanted if not op.filter else max(wanted * 4, 50)
            results = self.mem.recall(op.query, k=k, agent_id=self.agent_id, tags=tags)
            hits: list[tuple[Any, float | None]] = [(r.memory, float(r.score)) for r in results]
        else:
            listed = self.mem.list(
                agent_id=self.agent_id,
                tags=tags,
                limit=None,
                order_by="created_at",
                descending=False,
            )
            hits = [(m, None) for m in listed]
        items = [self._item(m, s) for m, s in hits]
        items = [i for i in items if _matches(i.value, op.filter)]
        return items[op.offset : wanted]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        memories = self.mem.list(agent_id=self.agent_id, tags=[_STORE_TAG], limit=None)
        found: set[tuple[str, ...]] = set()
        for m in memories:
            ns = tuple(m.namespace.split("."))
            if all(_namespace_matches(ns, c) for c in op.match_conditions or ()):
                found.add(ns[: op.max_depth] if op.max_depth is not None else ns)
        return sorted(found)[op.offset : op.offset + op.limit]

    # -- writing ---------------------------------------------------------------------

    def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        old = self._current(namespace, op.key)
        if op.value is None:
            if old is not None:
                try:
                    self.mem.forget(old.id)
                except NotFound:  # forgotten meanwhile: the same outcome
                    pass
            return
        value = dict(op.value)
        index = op.index if op.index is not None else None
        content = _text_of(value, index if index is not False else None)
        meta = {
            _KEY: op.key,
            _VALUE: json.dumps(value, ensure_ascii=False, default=str),
            # a new item's creation time is its memory's; a new version keeps the first one
            _CREATED: (old.metadata.get(_CREATED) or old.created_at.isoformat()) if old else None,
        }
        tags = [_STORE_TAG] + [_prefix_tag(namespace[:i]) for i in range(1, len(namespace) + 1)]
        if old is None:
            self.mem.remember(
                content,
                agent_id=self.agent_id,
                namespace=_ns(namespace),
                tags=tags,
                metadata=meta,
                reconcile="off",
            )
        else:
            self.mem.update(old.id, content, reason="langgraph put", metadata=meta, tags=tags)

    # -- the BaseStore interface -------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; one result per op (None for puts)."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise ValueError(f"unknown store operation {op!r}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (graphmem's calls block)."""
        return await asyncio.to_thread(self.batch, list(ops))

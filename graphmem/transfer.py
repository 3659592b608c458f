"""Moving a whole store in and out (``mem.transfer``): export as JSON lines, import an
export.

An export is one header line (``{"format": "graphmem-jsonl", "version": 1}``, with the
``embedding_model`` that made its vectors when the store records one: an import into a
store of another model is refused, and a store without a record takes it), then one line
per node (``{"node": label, "props": {...}}``) and one per edge (``{"edge": type, "src":
[label, id], "dst": [label, id], "props": {...}}``); datetimes are ``{"$dt": iso}``. An
import validates every line before anything is written and loads through the write path.
"""

from __future__ import annotations

import builtins
import json
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from graphmem.backends.base import (
    STRUCTURAL,
    GraphBackend,
    GraphView,
    StoreFiles,
    structural_targets,
)
from graphmem.errors import InvalidInput
from graphmem.fingerprint import ModelRecord, check_incoming, record, recorded
from graphmem.models import Edge, EdgeType, GraphNode, Memory, node_model
from graphmem.protocol import ImportReport
from graphmem.writes import Writes

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "Transfer"]

EXPORT_FORMAT = "graphmem-jsonl"
EXPORT_VERSION = 1


class Transfer:
    """Export and import of a whole store (``mem.transfer``)."""

    def __init__(self, backend: GraphBackend, writes: Writes) -> None:
        self._backend = backend
        self.writes = writes
        #: the store's own files, which an export must never open to write (see export)
        self._files = backend if isinstance(backend, StoreFiles) else None

    def export(self, dest: str | Path | IO[str]) -> ImportReport:
        """Write the whole graph as JSON lines (a header line, nodes, then edges). A path
        that is one of the store's own files (its SQLite file, WAL, caches) is InvalidInput:
        opening it to write would truncate the store."""
        if isinstance(dest, str | Path):
            if self._files is not None:
                _refuse_store_file(dest, self._files.store_files())
            try:
                with _file(dest, "w") as f:
                    return self._export(f)
            except OSError as e:  # no space left, a quota, an I/O error
                raise InvalidInput(
                    f"cannot write the export to {str(dest)!r}: {e.strerror or e}"
                ) from e
        if not callable(getattr(dest, "write", None)):
            raise InvalidInput(
                f"export writes to a path or a text file object, not {type(dest).__name__}"
            )
        return self._export(dest)

    def _export(self, f: IO[str]) -> ImportReport:
        head: dict[str, Any] = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION}
        model = recorded(self._backend)
        if model is not None:  # the vectors' model, for the store they are loaded into
            head["embedding_model"] = json.loads(model.to_json())
        f.write(json.dumps(head) + "\n")
        n_nodes = n_edges = 0
        for nodes, edges in self._backend.scan():
            for n in nodes:
                f.write(
                    json.dumps({"node": n.label.value, "props": n.to_props()}, default=_jsonable)
                    + "\n"
                )
                n_nodes += 1
            for e in edges:
                f.write(
                    json.dumps(
                        {
                            "edge": e.type.value,
                            "src": list(e.src),
                            "dst": list(e.dst),
                            "props": e.props,
                        },
                        default=_jsonable,
                    )
                    + "\n"
                )
                n_edges += 1
        return ImportReport(nodes=n_nodes, edges=n_edges)

    def import_(self, src: str | Path | IO[str], *, batch_size: int = 2000) -> ImportReport:
        """Load an export. Every line is validated before anything is written (a bad line
        raises InvalidInput naming it); existing nodes with the same ids are replaced."""
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise InvalidInput("batch_size must be a positive int")
        if isinstance(src, str | Path):
            with _file(src, "r") as f:
                return self._import(f, batch_size)
        if not hasattr(src, "__iter__"):
            raise InvalidInput(
                f"import reads a path or a text file object, not {type(src).__name__}"
            )
        return self._import(src, batch_size)

    def _import(self, f: IO[str], batch_size: int) -> ImportReport:
        nodes: builtins.list[GraphNode] = []
        edges: builtins.list[Edge] = []
        model: ModelRecord | None = None
        for lineno, line in _numbered_lines(f):
            if not line.strip():
                continue
            try:
                try:
                    rec = json.loads(line)
                except RecursionError:
                    raise InvalidInput("JSON nested too deeply") from None
                if not isinstance(rec, dict):
                    raise InvalidInput("line is not a JSON object")
                if lineno == 1:
                    if rec.get("format") != EXPORT_FORMAT:
                        raise InvalidInput("not a graphmem export (missing header line)")
                    if rec.get("version") != EXPORT_VERSION:
                        raise InvalidInput(f"unsupported export version {rec.get('version')}")
                    if "embedding_model" in rec:
                        model = ModelRecord.from_json(json.dumps(rec["embedding_model"]))
                        if model is None:
                            raise InvalidInput("unreadable embedding_model")
                    continue
                if "node" in rec:
                    nodes.append(node_model(rec["node"]).from_props(_revive(rec["props"])))
                elif "edge" in rec:
                    edges.append(
                        Edge.from_row(
                            {
                                "type": rec["edge"],
                                "src_label": rec["src"][0],
                                "src": rec["src"][1],
                                "dst_label": rec["dst"][0],
                                "dst": rec["dst"][1],
                                "props": _revive(rec.get("props") or {}),
                            }
                        )
                    )
                else:
                    raise InvalidInput("line is neither a node nor an edge")
            except (ValueError, KeyError, TypeError, IndexError) as e:
                raise InvalidInput(f"import line {lineno}: {e}") from e
        by_key: dict[str, GraphNode] = {n.ref.key: n for n in nodes}  # the last line wins
        for edge in edges:
            for end in (edge.src, edge.dst):
                if end.key not in by_key and not self._backend.get(node_model(end.label), [end.id]):
                    raise InvalidInput(f"edge {edge.type.value} refers to missing node {end.key}")
            if (edge.src.label, edge.type) in STRUCTURAL:
                self._check_implied(edge, by_key)
        _refuse_cycles(edges)
        dims = {len(n.embedding) for n in nodes if isinstance(n, Memory) and n.embedding}
        if len(dims) > 1:
            raise InvalidInput(f"the export mixes embedding dimensions {sorted(dims)}")
        adopt = False
        if dims:
            dim = dims.pop()
            if model is not None and model.dim != dim:
                raise InvalidInput(
                    f"the export's vectors have {dim} dimensions, its model {model.dim}"
                )
            adopt = check_incoming(self._backend, model, "the import")
            self._backend.ensure_schema(embedding_dim=dim)
        for i in range(0, len(nodes), batch_size):
            self.writes.load(nodes[i : i + batch_size])
        for i in range(0, len(edges), batch_size):
            self.writes.load((), edges[i : i + batch_size])
        if adopt and model is not None:
            record(self._backend, model)
        return ImportReport(nodes=len(nodes), edges=len(edges))

    def _check_implied(self, edge: Edge, by_key: dict[str, GraphNode]) -> None:
        """InvalidInput unless the structural ``edge`` (authorship, run, tag) is one its
        source node's fields imply, as the node is imported or else stored: the backend
        refuses any other, and it would do so only after the nodes before it were
        written."""
        src = by_key.get(edge.src.key)
        if src is None:
            [src] = self._backend.get(node_model(edge.src.label), [edge.src.id])
        implied = {
            (etype, label, ident)
            for etype, label, ident, _props in structural_targets(src.label, src.to_props())
        }
        if (edge.type, edge.dst.label, edge.dst.id) not in implied:
            raise InvalidInput(
                f"{edge.type.value} edges follow the node's fields (agent_id, run_id, tags); "
                f"{edge.src.key} does not imply one to {edge.dst.key}"
            )


def _refuse_cycles(edges: builtins.list[Edge]) -> None:
    """InvalidInput when the SUPERSEDES or the DERIVED_FROM edges of an import go round in
    a cycle: a version chain with no current version, or something derived from itself
    (the write path makes neither)."""
    for etype in (EdgeType.SUPERSEDES, EdgeType.DERIVED_FROM):
        out: dict[str, builtins.list[str]] = {}
        for e in edges:
            if e.type is etype:
                out.setdefault(e.src.key, []).append(e.dst.key)
        done: set[str] = set()
        for start in out:
            if start in done:
                continue
            path, on_path = [(start, iter(out[start]))], {start}
            while path:  # depth first, without recursion (a chain can be long)
                node, ahead = path[-1]
                nxt = next(ahead, None)
                if nxt is None:
                    path.pop()
                    on_path.discard(node)
                    done.add(node)
                elif nxt in on_path:
                    raise InvalidInput(
                        f"the import's {etype.value} edges form a cycle through {nxt}"
                    )
                elif nxt not in done:
                    path.append((nxt, iter(out.get(nxt, ()))))
                    on_path.add(nxt)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"$dt": value.isoformat()}
    raise TypeError(f"cannot export {type(value).__name__}")


def _revive(props: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(props, dict):
        raise InvalidInput(f"props must be a JSON object, not {type(props).__name__}")
    return {
        k: datetime.fromisoformat(v["$dt"]) if isinstance(v, dict) and "$dt" in v else v
        for k, v in props.items()
    }


def _refuse_store_file(dest: str | Path, files: builtins.list[Path]) -> None:
    """InvalidInput when ``dest`` names one of ``files`` (however spelled: a relative
    path, a symbolic or hard link). Opening it to write truncates it: the store's rows gone,
    or its shared-memory index, which SQLite maps, cut under the process (a bus error)."""
    for own in files:
        try:
            same = os.path.realpath(dest) == os.path.realpath(own) or (
                own.exists() and os.path.exists(dest) and os.path.samefile(dest, own)
            )
        except (OSError, ValueError):  # a path that cannot be looked at: _file says why
            return
        if same:
            raise InvalidInput(
                f"cannot export to {str(dest)!r}: it is the store's own file {str(own)!r}"
            )


def _file(path: str | Path, mode: Literal["r", "w"]) -> IO[str]:
    """The export/import file, or InvalidInput saying why it cannot be opened."""
    try:
        return open(path, mode, encoding="utf-8")
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        raise InvalidInput(f"cannot open {str(path)!r}: {getattr(e, 'strerror', None) or e}") from e


def graph_snapshot(backend: GraphBackend) -> nx.MultiDiGraph:
    """The store as a read-only networkx graph: the live graph of the embedded backend, a
    snapshot built from a full scan for server backends (embeddings left out). A node's
    attributes are its properties as stored, except that a field the model holds as a
    tuple (a memory's or an org fact's tags) is that tuple on every backend."""
    if isinstance(backend, GraphView):
        return backend.graph
    import networkx as nx

    g = nx.MultiDiGraph()
    for nodes, edges in backend.scan():
        for n in nodes:
            props: dict[str, Any] = n.to_props()
            props.pop("embedding", None)
            for k, v in props.items():
                # a tuple field (tags) as the model and the embedded store's live view
                # hold it: one type on every backend
                if v.__class__ is list and isinstance(held := getattr(n, k, None), tuple):
                    props[k] = held
            g.add_node(n.ref.key, label=n.label.value, **props)
        for e in edges:
            g.add_edge(e.src.key, e.dst.key, key=e.type.value, type=e.type.value, **e.props)
    frozen: nx.MultiDiGraph = nx.freeze(g)
    return frozen


def _numbered_lines(f: IO[str]) -> Iterator[tuple[int, str]]:
    """The lines of an export with their numbers; a file that is not UTF-8 text is
    InvalidInput (the reader decodes ahead, so the line it fails on is not known)."""
    try:
        yield from enumerate(f, 1)
    except UnicodeDecodeError as e:
        raise InvalidInput(f"import: the file is not UTF-8 text ({e.reason})") from e

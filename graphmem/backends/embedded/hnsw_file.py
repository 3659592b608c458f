"""The HNSW graph of the embedded store's vector index, kept beside the store.

Building the graph over 100k vectors takes tens of seconds; keeping it in a file lets an
open use it at once. Two files sit beside the store ``X``: ``X-hnsw.bin`` (faiss's own
format, see ``ann_graph``) and ``X-hnsw.json`` (what the graph describes: format, store
id, dimension, the store's change-log position it reflects, the key of every graph label,
and the size and CRC-32 of the ``.bin``). Each is written to a temporary file, flushed to
disk and renamed over the old one, the ``.json`` last, so a crash leaves either the old
pair, the new pair, or a pair whose checksums disagree.

Nothing in them is trusted: :func:`load` returns ``None`` (with the reason logged) unless
the ``.json`` parses, names this store and dimension, and the ``.bin`` has the recorded
size and checksum (read through the same open file faiss then loads, so a rename in
between cannot slip another file in), and holds a graph of that dimension with one vector
per label. The caller then checks that the labels name exactly
the vectors it holds and replays the changes logged since (or rebuilds when it cannot).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
import zlib
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from sys import intern
from typing import Any

import orjson

from graphmem.backends.embedded.ann_graph import Graph, library

__all__ = [
    "Early",
    "Hint",
    "Known",
    "SavedGraph",
    "files_of",
    "known_of",
    "load",
    "load_since",
    "remove",
    "save",
    "temp_beside",
]

log = logging.getLogger("graphmem.backends.embedded")

#: 2: faiss's quantized HNSW graph (1 was hnswlib's: such a graph is rebuilt once)
FORMAT = 2
_CHUNK = 1 << 22


@dataclass
class SavedGraph:
    """A graph read back from disk and the store state it reflects."""

    ann: Graph
    label_keys: list[str | None]
    seq: int
    #: the files as their description names them: (seq, the graph file's size, its CRC-32)
    ident: tuple[int, int, int]
    #: the labels are the ``known`` ones the caller gave (see :func:`load`)
    known: bool = False


#: a graph file's labels kept elsewhere (the state file) with the graph's identity (see
#: :attr:`SavedGraph.ident`) when they were written
Known = tuple[tuple[int, int, int], list[str | None]]


def files_of(store: Path) -> tuple[Path, Path]:
    """The graph file and its description beside ``store``."""
    return store.with_name(store.name + "-hnsw.bin"), store.with_name(store.name + "-hnsw.json")


def _crc(f: Any) -> tuple[int, int]:
    crc, size = 0, 0
    while chunk := f.read(_CHUNK):
        crc = zlib.crc32(chunk, crc)
        size += len(chunk)
    return crc, size


@contextlib.contextmanager
def temp_beside(target: Path) -> Iterator[Path]:
    """A temporary file beside ``target`` for the caller to fill; on success it is flushed
    to disk and renamed over ``target`` (a reader sees the old file or the new, never a
    part), otherwise removed."""
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as f:  # on disk before the rename makes it visible
            os.fsync(f.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def save(
    store: Path,
    ann: Graph,
    label_keys: list[str | None],
    *,
    store_id: str,
    dim: int,
    seq: int,
) -> tuple[int, int, int]:
    """Write the graph and its description beside ``store`` (see the module docstring);
    returns the identity of what was written (see :attr:`SavedGraph.ident`)."""
    bin_path, meta_path = files_of(store)
    with temp_beside(bin_path) as tmp:
        ann.save(str(tmp))
        with open(tmp, "rb") as f:
            crc, size = _crc(f)
    meta = {
        "format": FORMAT,
        "store_id": store_id,
        "dim": dim,
        "seq": seq,
        "bin_size": size,
        "bin_crc32": crc,
        "labels": label_keys,
    }
    with temp_beside(meta_path) as tmp:
        tmp.write_bytes(orjson.dumps(meta))
    return seq, size, crc


def remove(store: Path) -> None:
    """Delete the files (a store without a graph, or one that went back to exact search)."""
    for p in files_of(store):
        with contextlib.suppress(OSError):
            p.unlink()


@dataclass
class Hint:
    """What an open knows of the graph files before it reads them: their labels as the
    state file kept them (``known``) and the files being read already (``early``)."""

    known: Known | None = None
    early: Early | None = None

    def drop(self) -> None:
        """Forget both, once the open is done (an early read nobody took is waited for:
        no thread outlives the open)."""
        if self.early is not None:
            with contextlib.suppress(Exception):
                self.early.take()
        self.known = self.early = None


class Early:
    """The graph files read in a thread of their own, from the start of an open: faiss
    reads the graph (0.3-0.5 s at 1M vectors) and zlib checks it without holding the
    GIL, beside the state file's unpickling. Its result is taken once (:meth:`take`)."""

    def __init__(self, store: Path, *, store_id: str, dim: int) -> None:
        self._got: _Read | BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(store, store_id, dim), name="graphmem-graph-read", daemon=True
        )
        self._thread.start()

    @classmethod
    def of(cls, store: Path, *, store_id: str, dim: int) -> Early | None:
        """The files beside ``store`` being read, when both are there."""
        return (
            cls(store, store_id=store_id, dim=dim)
            if all(map(Path.exists, files_of(store)))
            else None
        )

    def _run(self, store: Path, store_id: str, dim: int) -> None:
        try:
            lib = library()
            self._got = None if lib is None else _read(lib, store, store_id=store_id, dim=dim)
        except BaseException as e:  # handed to the taker, who logs it or raises it
            self._got = e

    def take(self) -> _Read | None:
        """The files as read (raising what reading them raised); None once taken."""
        self._thread.join()
        got, self._got = self._got, None
        if isinstance(got, BaseException):
            raise got
        return got


#: the description's labels as they are, the files' identity and the graph
_Read = tuple[list[Any], tuple[int, int, int], Graph]


def _read(lib: Any, store: Path, *, store_id: str, dim: int) -> _Read:
    """Both files, checked (ValueError and the like when they do not check out)."""
    bin_path, meta_path = files_of(store)
    meta = orjson.loads(meta_path.read_bytes())
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError("unknown format")
    if meta.get("store_id") != store_id:
        raise ValueError("it belongs to another store")
    if meta.get("dim") != dim:
        raise ValueError(f"dimension {meta.get('dim')} is not the store's {dim}")
    labels = meta["labels"]
    seq = meta["seq"]
    ident = (seq, meta.get("bin_size"), meta.get("bin_crc32"))
    if not isinstance(labels, list) or not isinstance(seq, int):
        raise ValueError("malformed description")
    with open(bin_path, "rb") as f:
        crc, size = _crc(f)
        if (seq, size, crc) != ident:
            raise ValueError("the graph file does not match its checksum")
        # load what was checked: the open file, even if the name was replaced since
        fd_path = f"/proc/self/fd/{f.fileno()}"
        source = fd_path if os.path.exists(fd_path) else str(bin_path)
        ann = Graph.load(lib, source, dim)
    if len(ann) != len(labels):
        raise ValueError("the graph's vectors are not the labels its description names")
    return labels, (seq, size, crc), ann


def load(
    lib: Any,
    store: Path,
    *,
    store_id: str,
    dim: int,
    own: Callable[[str], str] = intern,
    hint: Hint | None = None,
) -> SavedGraph | None:
    """The saved graph when both files are there and check out, else None (reason logged).
    Its labels are the ``own`` strings of the keys the description names (the store's
    node keys: one string per key), or the ``hint``'s known ones when they were kept for
    these very files (same identity, as many labels): no million strings to check and
    look up at 1M vectors."""
    bin_path, meta_path = files_of(store)
    if not meta_path.exists() and not bin_path.exists():
        return None
    try:
        early = None if hint is None or hint.early is None else hint.early.take()
        labels, ident, ann = early or _read(lib, store, store_id=store_id, dim=dim)
        known = None if hint is None else hint.known
        use_known = known is not None and known[0] == ident and len(known[1]) == len(labels)
        if use_known:
            assert known is not None
            labels = known[1]
        if not set(map(type, labels)) <= {str, type(None)}:
            raise ValueError("malformed labels")
        if not use_known:
            # the store's node keys: the labels become those strings instead of a second
            # copy of each (~90 MB at 1M vectors)
            labels = [None if key is None else own(key) for key in labels]
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, orjson.JSONDecodeError) as e:
        log.warning("not using the saved vector graph beside %s (%s); rebuilding it", store, e)
        return None
    return SavedGraph(ann=ann, label_keys=labels, seq=ident[0], ident=ident, known=use_known)


def known_of(filed: Any) -> Known | None:
    """The graph files' identity and labels a state file kept (see :func:`load`), when
    they are of the expected shape."""
    if not (isinstance(filed, tuple) and len(filed) == 2):
        return None
    ident, labels = filed
    if not (
        isinstance(ident, tuple)
        and len(ident) == 3
        and all(v.__class__ is int for v in ident)
        and isinstance(labels, list)
    ):
        return None
    return (ident[0], ident[1], ident[2]), labels


def load_since(
    store: Path,
    *,
    store_id: str,
    dim: int,
    changes: Callable[[int], Collection[str] | None],
    own: Callable[[str], str] = intern,
    hint: Hint | None = None,
    since: int | None = None,
) -> tuple[SavedGraph, set[str]] | None:
    """The graph saved beside ``store`` (see :func:`load`) and the keys the store changed
    after it — after ``since`` when that is older —, ``changes(seq)`` giving those after
    ``seq``; None when there is none, faiss is not installed or the change log does not
    reach back that far."""
    lib = library()
    if lib is None:
        return None
    saved = load(lib, store, store_id=store_id, dim=dim, own=own, hint=hint)
    if saved is None:
        return None
    changed = changes(saved.seq)  # None too for a graph ahead of the store
    if changed is not None and since is not None and since < saved.seq:
        changed = changes(since)
    if changed is None:
        log.info("the saved HNSW graph beside %s is too old to catch up; rebuilding", store)
        return None
    return saved, set(changed)

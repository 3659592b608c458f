"""The embedded store's in-memory state, kept beside the store so that an open reads it
whole instead of decoding every row.

Opening a store builds its graph from the SQLite rows: a JSON decode, a few datetimes, ten
index entries and the structural edges per node, about 25 µs a node — seconds at 100k.
The same state written by the last process that held it reads back several times faster.
One file sits beside the store ``X``: ``X-state.bin``, made of a fixed magic, the body (the
node table — memories as columns, see ``records`` —, the edge dicts and the index buckets
as a pickle, then the vectors as raw float32 rows), a JSON header (format, store id, the
change-log position the state reflects and the key logged there, node count, vector
dimension, the body's sizes and CRC-32) and a trailer (the header's length and the magic
again). The header comes last so that the
body streams to the file as it is pickled: a closing process at 1M memories does not
hold a second, gigabyte-sized copy of its state as one bytes object. A vector index whose
HNSW graph holds the one copy of its vectors (see ``vector_index``) has its keys written
and no rows, and the header says so (``"vectors": "graph"``): the graph file beside the
store and the store's own rows hold them. The file is written to a temporary file,
flushed to disk and renamed over the old one, so a reader sees an old file or a new one,
never a mix. A file of an older format is not read (the reason is logged; the rows are
the truth) and is replaced at the next close.

Nothing in it is trusted: :func:`load` returns ``None`` (with the reason logged) unless
the header parses, names this store, and the body has the recorded size and checksum. The
pickle is read by an unpickler that knows only the datetime types, so a file planted
beside a store cannot run code. The caller then checks the position against the store's
change log and catches up with what was written since (or reads the rows when it cannot).
"""

from __future__ import annotations

import io
import logging
import os
import pickle
import struct
import threading
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson

from graphmem.backends.embedded.adjacency import Adjacency
from graphmem.backends.embedded.buckets import MemoryBucket
from graphmem.backends.embedded.hnsw_file import Known, temp_beside

__all__ = [
    "FileBucket",
    "MostOf",
    "SavedState",
    "file_of",
    "index_apart",
    "index_whole",
    "load",
    "payload_of",
    "save",
]

log = logging.getLogger("graphmem.backends.embedded")

#: 3: a value held by one node is indexed by its key, not a one-key set; 4: one string
#: per node key (an older file holds a copy per adjacency entry: read the rows once);
#: 5: tags as tuples, the sets of a bucket held by most of a label as what they leave
#: out (:func:`index_apart`); 6: the memories' attributes as columns (``records``); 7: the
#: index buckets the memory columns answer are not filed (``buckets.MemoryBucket``); 8: nor
#: the content-hash bucket (a million 64-character strings at 1M memories, 0.37 s of the
#: open: ``buckets.by_hash`` works it out from the hash column when first asked for)
FORMAT = 8
#: older formats read as they are (their buckets the columns answer not used)
_READ = (6, 7, FORMAT)
#: format 1 began with this magic and its header
_MAGIC_1 = b"GMSTATE\n"
_MAGIC = b"GMSTAT2\n"
#: the trailer: the header's length, then the magic
_TAIL = struct.Struct("<I8s")
#: the only globals a state pickle may name: what a node's datetime needs
_ALLOWED = {("datetime", "datetime"), ("datetime", "timezone"), ("datetime", "timedelta")}


@dataclass
class SavedState:
    """A state read back from disk, and the store position it reflects."""

    payload: dict[str, Any]
    vec_keys: list[str]
    #: float32 rows, one per vec_keys entry; None when the vectors are the HNSW graph's
    vectors: np.ndarray | None
    seq: int
    seq_key: str | None
    nodes: int
    #: the file's format (an older one read as it is is replaced at the next close)
    format: int = FORMAT


def file_of(store: Path) -> Path:
    """The state file beside ``store``."""
    return store.with_name(store.name + "-state.bin")


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a saved state")
        return super().find_class(module, name)


def save(
    store: Path,
    payload: dict[str, Any],
    vec_keys: list[str],
    vectors: np.ndarray | None,
    *,
    store_id: str,
    dim: int | None,
    seq: int,
    seq_key: str | None,
    nodes: int,
) -> None:
    """Write the state beside ``store`` (see the module docstring); ``vectors`` None: the
    keys only (the HNSW graph holds the vectors)."""
    in_graph = vectors is None
    vecs = np.ascontiguousarray(
        np.zeros((0, dim or 0)) if vectors is None else vectors, dtype=np.float32
    )
    with temp_beside(file_of(store)) as tmp, open(tmp, "wb") as f:
        f.write(_MAGIC)
        out = _Summed(f)
        pickle.dump({"state": payload, "vec_keys": vec_keys}, out, protocol=5)
        body_size = out.size
        out.write(vecs.data)
        head = orjson.dumps(
            {
                "format": FORMAT,
                "store_id": store_id,
                "seq": seq,
                "seq_key": seq_key,
                "nodes": nodes,
                "dim": dim,
                "pickle_size": body_size,
                "vec_rows": int(vecs.shape[0]),
                "crc32": out.crc,
                **({"vectors": "graph"} if in_graph else {}),
            }
        )
        f.write(head)
        f.write(_TAIL.pack(len(head), _MAGIC))


#: an index bucket as the file holds it: value -> a node key or a set of them
FileBucket = dict[Any, "str | set[str]"]
#: a set of a bucket held by most nodes of its label, as the file holds it: (label, field,
#: value, the label's keys it leaves out, its keys that are not the label's)
MostOf = tuple[str, str, Any, list[str], list[str]]


def index_apart(
    index: dict[tuple[str, str], FileBucket], by_label: dict[str, set[str]]
) -> tuple[dict[tuple[str, str], FileBucket], list[MostOf]]:
    """The index buckets for the file, the sets that hold most of their label's nodes
    taken out as what they leave out (every memory's status, category, tier, event type:
    four million keys at 1M memories, a quarter of unpickling a state). :func:`index_whole`
    puts them back as copies of the label's key set, a C copy instead of a key at a time.
    The buckets themselves are not changed."""
    kept: dict[tuple[str, str], FileBucket] = {}
    most: list[MostOf] = []
    for (label, field), bucket in index.items():
        every = by_label.get(label, set())
        big = [
            v for v, held in bucket.items() if held.__class__ is set and 2 * len(held) > len(every)
        ]
        if big:
            bucket = dict(bucket)
            for v in big:
                held = bucket.pop(v)
                assert isinstance(held, set)
                most.append((label, field, v, list(every - held), list(held - every)))
        kept[(label, field)] = bucket
    return kept, most


def index_whole(
    index: dict[tuple[str, str], FileBucket], most: list[MostOf], by_label: dict[str, set[str]]
) -> dict[tuple[str, str], FileBucket]:
    """The index buckets :func:`index_apart` took apart (KeyError, TypeError or ValueError
    when the parts do not fit)."""
    for label, field, value, left_out, extra in most:
        held = by_label[label].difference(left_out)
        held.update(extra)
        bucket = index[(label, field)]
        if value in bucket or len(held) < 2:
            raise ValueError("a bucket's set is not what the file says")
        bucket[value] = held
    return index


def payload_of(
    g: Adjacency,
    rid_of: dict[str, int],
    by_label: Mapping[Any, set[str]],
    index: Mapping[tuple[Any, str], FileBucket],
    graph: Known | None,
) -> dict[str, Any]:
    """What the file keeps of an in-memory state (the graph's dicts, its row ids, labels
    and index buckets — not those the memory columns answer: the columns are filed —, and
    ``graph``, the vector graph files' identity and labels, when given: the next open reads
    them from here)."""
    labels = {str(lab): keys for lab, keys in by_label.items()}
    filed, most = index_apart(
        {
            (str(lab), f): bucket
            for (lab, f), bucket in index.items()
            if bucket.__class__ is not MemoryBucket
        },
        labels,
    )
    payload = {
        "nodes": g._node.to_file(),
        "succ": g._succ,
        "pred": g._pred,
        "rid_of": rid_of,
        "by_label": labels,
        "index": filed,
        "most": most,
    }
    if graph is not None:
        payload["graph"] = graph
    return payload


def _crc_of(f: io.BufferedReader, size: int) -> int:
    """The CRC-32 of the next ``size`` bytes of ``f``, read a block at a time (ValueError
    when the file ends first)."""
    crc, left = 0, size
    block = bytearray(min(size, 1 << 20))
    view = memoryview(block)
    while left:
        got = f.readinto(view[: min(left, len(block))])
        if not got:
            raise ValueError("the file is not the size its header records")
        crc = zlib.crc32(view[:got], crc)
        left -= got
    return crc


def _crc_beside(path: Path, start: int, size: int) -> Callable[[], int]:
    """The CRC-32 of ``size`` bytes of the file at ``path`` from ``start``, worked out in a
    thread of its own while the caller unpickles the same bytes: the reads and zlib release
    the GIL, so the check (0.3 s of CPU at 1M memories, a second read of the whole body)
    leaves the open's main thread. The returned call waits for it (ValueError when the file
    ends first, OSError when it cannot be read)."""
    got: list[int | OSError | ValueError] = []

    def run() -> None:
        try:
            with open(path, "rb") as f:
                f.seek(start)
                got.append(_crc_of(f, size))
        except (OSError, ValueError) as e:
            got.append(e)

    worker = threading.Thread(target=run, name="graphmem-state-check", daemon=True)
    worker.start()

    def result() -> int:
        worker.join()
        crc = got[0]
        if not isinstance(crc, int):
            raise crc
        return crc

    return result


class _Summed:
    """A file's ``write`` that keeps the size and CRC-32 of what went through it."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self.size = 0
        self.crc = 0

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.crc = zlib.crc32(view, self.crc)
        self.size += view.nbytes
        self._f.write(view)
        return view.nbytes


def load(store: Path, *, store_id: str, dim: int | None) -> SavedState | None:
    """The saved state when the file is there and checks out, else None (reason logged)."""
    path = file_of(store)
    if not path.exists():
        return None
    try:
        with open(path, "rb") as f:
            magic = f.read(len(_MAGIC))
            if magic == _MAGIC_1:
                raise ValueError("an older format (1); it is replaced at the next close")
            if magic != _MAGIC:
                raise ValueError("not a state file")
            end = f.seek(0, os.SEEK_END)
            if end < len(_MAGIC) + _TAIL.size:
                raise ValueError("the file is not the size its header records")
            f.seek(end - _TAIL.size)
            head_len, magic = _TAIL.unpack(f.read(_TAIL.size))
            if magic != _MAGIC or head_len > end - len(_MAGIC) - _TAIL.size:
                raise ValueError("the file has no trailer")
            head_at = end - _TAIL.size - head_len
            f.seek(head_at)
            head = orjson.loads(f.read(head_len))
            if not isinstance(head, dict):
                raise ValueError("malformed header")
            fmt = head.get("format")
            if fmt.__class__ is int and 1 < fmt < FORMAT and fmt not in _READ:
                raise ValueError(f"an older format ({fmt}); it is replaced at the next close")
            if fmt not in _READ:
                raise ValueError("unknown format")
            if head.get("store_id") != store_id:
                raise ValueError("it belongs to another store")
            if head.get("dim") != dim:
                raise ValueError(f"dimension {head.get('dim')} is not the store's {dim}")
            seq, seq_key, nodes = head["seq"], head["seq_key"], head["nodes"]
            in_graph = head.get("vectors") == "graph"
            size, rows = head["pickle_size"], head["vec_rows"]
            if not all(isinstance(v, int) for v in (seq, nodes, size, rows)):
                raise ValueError("malformed header")
            if in_graph and rows:
                raise ValueError("malformed header")
            if seq_key is not None and not isinstance(seq_key, str):
                raise ValueError("malformed header")
            width = dim or 0
            if len(_MAGIC) + size + 4 * rows * width != head_at or size < 0 or rows < 0:
                raise ValueError("the file is not the size its header records")
            # the checksum is worked out beside the unpickling and checked before anything
            # unpickled is used (the unpickler makes only builtins and datetimes, so a
            # damaged body read first costs nothing but the time); the body is unpickled
            # from the file, not read whole: its bytes are never held beside what they make
            # (~480 MB at 1M memories)
            crc_of_all = _crc_beside(path, len(_MAGIC), head_at - len(_MAGIC))
            unread: Exception | None = None
            try:
                f.seek(len(_MAGIC))
                try:
                    data = _Unpickler(f).load()
                except Exception as e:  # whatever a damaged pickle raises: not a state
                    unread = e
                ends = f.tell()
                f.seek(len(_MAGIC) + size)
                vectors = np.fromfile(f, dtype=np.float32, count=rows * width)
            finally:
                crc = crc_of_all()
            if crc != head["crc32"]:
                raise ValueError("the file does not match its checksum")
            if unread is not None:
                raise ValueError(f"unreadable body: {unread}") from unread
            if ends != len(_MAGIC) + size:
                raise ValueError("the body does not end where its header says")
            if vectors.size != rows * width:
                raise ValueError("the file is not the size its header records")
        if not isinstance(data, dict):
            raise ValueError("malformed body")
        payload, vec_keys = data["state"], data["vec_keys"]
        if not isinstance(payload, dict) or not isinstance(vec_keys, list):
            raise ValueError("malformed body")
        if len(vec_keys) != rows and not in_graph:
            raise ValueError("the vectors do not match their keys")
    except (OSError, ValueError, KeyError, TypeError, struct.error) as e:
        log.warning("not using the saved state beside %s (%s); reading the store", store, e)
        return None
    return SavedState(
        payload=payload,
        vec_keys=vec_keys,
        vectors=None if in_graph else vectors.reshape(rows, width),
        seq=seq,
        seq_key=seq_key,
        nodes=nodes,
        format=fmt,
    )

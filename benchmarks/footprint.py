"""What the embedded store's memory is made of, per memory, by part.

    python benchmarks/footprint.py STORE.db

Opens the store in this process (embedder=None) and walks its in-memory state: the memories'
attribute columns (by column) and the other nodes' attribute dicts, the adjacency dicts, the
index buckets (by field), the row-id maps, the vector matrix and the HNSW graph (hnswlib's
level-0 block, estimated from M and the dimension). Each object is counted once, at the
first part that reaches it (node keys first, so the adjacency and buckets count only their
containers).
Prints bytes per memory and the process's resident memory before and after the open.
"""

from __future__ import annotations

import gc
import sys
import time
from collections import Counter
from typing import Any


def _rss_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


class _Walk:
    """sys.getsizeof summed over containers and their items, each object once."""

    def __init__(self) -> None:
        self.seen: set[int] = set()

    def size(self, root: Any) -> int:
        total, stack = 0, [root]
        while stack:
            o = stack.pop()
            if id(o) in self.seen:
                continue
            self.seen.add(id(o))
            total += sys.getsizeof(o)
            if isinstance(o, dict):
                stack.extend(o.keys())
                stack.extend(o.values())
            elif isinstance(o, (list, tuple, set, frozenset)):
                stack.extend(o)
        return total


def main(path: str) -> None:
    before = _rss_mb()
    from graphmem.memory import GraphMemory
    from graphmem.models import NodeLabel

    imported = _rss_mb()
    t = time.perf_counter()
    mem = GraphMemory.open(path, embedder=None)
    opened_s = time.perf_counter() - t
    after = _rss_mb()
    b: Any = mem.backend
    g = b._g
    n = max(len(b._by_label.get(NodeLabel.MEMORY, ())), 1)
    walk = _Walk()
    table = g._node
    parts: dict[str, int] = {"node keys": sum(walk.size(k) for k in table)}
    # the memories' columns (records.MemoryTable), by column; the other nodes' dicts
    by_field: Counter[str] = Counter()
    cols = table.memories
    by_field["memory row maps (key -> row, free rows)"] = walk.size(cols.row_of) + walk.size(
        cols.free
    )
    by_field["keys (the list)"] = walk.size(cols.keys)
    by_field["content"] = walk.size(cols.content)
    by_field["content_hash"] = sys.getsizeof(cols.hashes)
    for group in (cols.codes, cols.floats, cols.ints, cols.times):
        for f, col in group.items():
            by_field[f] = sys.getsizeof(col)
    for f, values in cols.values.items():
        by_field[f] += walk.size(values) + walk.size(cols.value_code[f])
    by_field["tags"] = sys.getsizeof(cols.tags) + walk.size(cols.tagsets) + walk.size(cols.tag_code)
    by_field["metadata.* (extra)"] = walk.size(cols.extra)
    parts["memory columns"] = sum(by_field.values())
    parts["other nodes' attribute dicts"] = sum(walk.size(d) for d in table.dicts.values())
    parts["adjacency, out"] = walk.size(g._succ)
    parts["adjacency, in"] = walk.size(g._pred)
    parts["row-id maps"] = walk.size(b._rid_of) + walk.size(b._key_of)
    parts["keys by label"] = walk.size(b._by_label)
    buckets = {f"{lab.value}.{f}": walk.size(bk) for (lab, f), bk in b._index.items()}
    parts["index buckets"] = sum(buckets.values())
    vi = b._vindex
    if vi is not None:
        parts["vector matrix and norms"] = vi._mat.nbytes + vi._norm.nbytes
        parts["vector index keys"] = walk.size(vi._keys) + walk.size(vi._row)
        parts["HNSW labels"] = walk.size(vi._label) + walk.size(vi._label_keys)
        if vi._ann is not None:
            ann = vi._ann
            # level 0 per element: 2M links + count, the vector, the label
            per = (2 * ann.M + 1) * 4 + ann.dim * 4 + 8
            parts["HNSW graph (level 0, estimated)"] = ann.get_current_count() * per
    print(
        f"{path}: {n:,} memories, {len(g._node):,} nodes; open {opened_s:.2f} s; "
        f"RSS {before:.0f} MB at start, {imported:.0f} after imports, {after:.0f} after the "
        f"open ({(after - imported) * 1048576 / n:,.0f} B a memory); "
        f"{len(gc.get_objects()):,} objects tracked by the collector\n"
    )
    total = sum(parts.values())
    print("| part | MB | B a memory |\n|---|---:|---:|")
    for k, v in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"| {k} | {v / 1e6:,.1f} | {v / n:,.0f} |")
    print(f"| total counted | {total / 1e6:,.1f} | {total / n:,.0f} |\n")
    print("| memory column | B a memory |\n|---|---:|")
    for k, v in by_field.most_common():
        if v / n >= 1:
            print(f"| {k} | {v / n:,.0f} |")
    print("\n| index bucket | B a memory |\n|---|---:|")
    for k, v in sorted(buckets.items(), key=lambda kv: -kv[1]):
        if v / n >= 1:
            print(f"| {k} | {v / n:,.0f} |")
    b._closed = True  # leave the files as they are


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])

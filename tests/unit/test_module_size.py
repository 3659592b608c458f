"""The house keeps every module small enough to read in one sitting.

A module past the limit is a sign that it owns two things; split it along what it owns
(docs/house.md shows how earlier splits went) rather than raising the limit.
"""

from __future__ import annotations

from pathlib import Path

import graphmem

LIMIT = 800


def test_every_module_is_at_most_800_lines() -> None:
    root = Path(graphmem.__file__).parent
    sizes = {
        str(path.relative_to(root.parent)): sum(1 for _ in path.open(encoding="utf-8"))
        for path in root.rglob("*.py")
    }
    assert len(sizes) > 50, "the package was not found where the test looked"
    too_long = {name: n for name, n in sizes.items() if n > LIMIT}
    assert not too_long, f"modules over {LIMIT} lines: {too_long}"

"""A context budget too small for any memory is reported, not silently empty."""

from __future__ import annotations

import logging

import pytest

from tests.conftest import Stores


def test_a_budget_that_fits_no_memory_says_so(
    stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    with stores.open("m1.db", embedder=None) as mem:
        mem.remember("Alice drinks green tea every morning before work", agent_id="a")
        with caplog.at_level(logging.WARNING, logger="graphmem.memory"):
            tiny = mem.context("what does alice drink", agent_id="a", max_tokens=60)
        assert "Alice" not in tiny
        assert any("fits none of the 1 memories" in r.getMessage() for r in caplog.records)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="graphmem.memory"):
            roomy = mem.context("what does alice drink", agent_id="a", max_tokens=400)
            nothing = mem.context("quantum chromodynamics", agent_id="a", max_tokens=60)
        assert "Alice drinks green tea" in roomy and nothing == ""
        assert not caplog.records  # no warning when it fits, or when nothing matched

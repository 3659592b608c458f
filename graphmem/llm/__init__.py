"""LLM passes over memories: an :class:`LLM` protocol, an Anthropic implementation and a
deterministic offline fallback.

Four passes, each a method of every implementation:

- ``summarize`` — condense a run or a set of memories (``purpose="merge"`` asks for a
  synthesis that keeps every distinct fact, used by consolidation);
- ``improve`` — rewrite memories for precision and flag contradictions between them
  (the caller resolves each with a SUPERSEDES edge carrying the reason);
- ``extract_facts`` — durable facts stated in one conversation turn (none when there are none);
- ``reflect`` — answer a question from recalled memories, citing memory ids.

The passes only *compute*; writing their results as new nodes with DERIVED_FROM /
SUPERSEDES provenance is done by :mod:`graphmem.consolidation`. No pass is ever called on
the write path (``remember``).

Memory content handed to a model is fenced as untrusted data (XML-escaped inside
``<memory>`` elements, with a system directive that it is not instructions). Dense content
— code, identifiers, structured data, detected by :func:`is_dense` — is never paraphrased:
it is kept verbatim next to the model's summary and never rewritten.

The package: ``protocol`` (the results, the ``LLM`` Protocol, ``BaseLLM``, shared text
helpers) <- ``offline`` (:class:`OfflineLLM`) and ``anthropic`` (:class:`AnthropicLLM`).

Example (offline, no network)::

    >>> from graphmem.models import Memory
    >>> llm = OfflineLLM()
    >>> ms = [Memory(content="Alice prefers tea."), Memory(content="Alice lives in Oslo.")]
    >>> s = llm.summarize(ms)
    >>> "tea" in s.content and "Oslo" in s.content
    True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from graphmem.llm.offline import Claim, OfflineLLM, claim_of
from graphmem.llm.protocol import (
    LLM,
    BaseLLM,
    Contradiction,
    Fact,
    Improvement,
    PassUsage,
    Reflection,
    Rewrite,
    Summary,
    SummaryPurpose,
    fence_memories,
    is_dense,
    merge_sentences,
    tokens,
)
from graphmem.text import split_sentences

if TYPE_CHECKING:
    from graphmem.llm.anthropic import AnthropicLLM

__all__ = [
    "LLM",
    "AnthropicLLM",
    "BaseLLM",
    "Claim",
    "Contradiction",
    "Fact",
    "Improvement",
    "OfflineLLM",
    "PassUsage",
    "Reflection",
    "Rewrite",
    "Summary",
    "SummaryPurpose",
    "claim_of",
    "fence_memories",
    "is_dense",
    "merge_sentences",
    "split_sentences",
    "tokens",
]


def __getattr__(name: str) -> Any:
    # The Anthropic client's module (its prompts and response models) loads when it is
    # first named: a recall or a command that uses no LLM never pays for it. The import
    # system's module lock makes a first use from many threads safe.
    if name == "AnthropicLLM":
        value = importlib.import_module("graphmem.llm.anthropic").AnthropicLLM
        globals()[name] = value
        return value
    raise AttributeError(f"module 'graphmem.llm' has no attribute {name!r}")

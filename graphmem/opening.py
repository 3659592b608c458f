"""Open what settings describe: the memory (a NullMemory when switched off) and its LLM.

The settings (:mod:`graphmem.config`) sit at the bottom of the house and import nothing that
acts on them; the command line and the servers open their store here, from above.

>>> from graphmem.config import Settings
>>> with open_memory(Settings(url="memory://", embedder="none")) as mem:
...     mem.remember("Alice prefers tea", agent_id="assistant").content
'Alice prefers tea'
>>> type(open_memory(Settings(enabled=False))).__name__
'NullMemory'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphmem.config import Settings
from graphmem.memory import GraphMemory

if TYPE_CHECKING:
    from graphmem.llm import LLM

__all__ = ["make_llm", "open_memory"]


def make_llm(settings: Settings) -> LLM | None:
    """The LLM ``settings.llm`` names (constructed lazily: no network here)."""
    # imported here: a command that uses no LLM does not pay for the clients
    if settings.llm == "none":
        return None
    if settings.llm == "offline":
        from graphmem.llm import OfflineLLM

        return OfflineLLM()
    from graphmem.llm import AnthropicLLM

    key = settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None
    return AnthropicLLM(
        model=settings.llm_model,
        max_tokens=settings.llm_max_tokens,
        api_key=key,
        base_url=settings.anthropic_base_url,
    )


def open_memory(settings: Settings, **options: Any) -> GraphMemory:
    """Open the GraphMemory ``settings`` describe (``options`` go to
    :meth:`GraphMemory.open <graphmem.memory.GraphMemory.open>`); a
    :class:`~graphmem.null.NullMemory` when ``settings.enabled`` is false."""
    if not settings.enabled:
        # imported here: the null face pulls in what a command on a real store never needs
        from graphmem.null import NullMemory

        return NullMemory()  # type: ignore[return-value]
    options.setdefault("embedder", settings.embedder)
    options.setdefault("llm", make_llm(settings))
    return GraphMemory.open(settings=settings, **options)

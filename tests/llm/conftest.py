from __future__ import annotations

from collections.abc import Iterator

import pytest

from graphmem.llm import AnthropicLLM
from tests.llm.anthropic_stub import StubAnthropic


@pytest.fixture
def stub() -> Iterator[StubAnthropic]:
    with StubAnthropic() as s:
        yield s


@pytest.fixture
def claude(stub: StubAnthropic) -> Iterator[AnthropicLLM]:
    llm = AnthropicLLM(
        base_url=stub.url, api_key="sk-test-key", model="claude-test", max_tokens=512, max_retries=3
    )
    yield llm
    llm.close()

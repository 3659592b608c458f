"""The LLM passes against a hostile Messages API (the local stub): answers that cannot be
stored, bodies the SDK hands over unvalidated, slow servers and long retry-after waits.
Expected everywhere: a typed graphmem error or the offline fallback, the caller never held
past the timeout, and the store unchanged when a pass fails."""

from __future__ import annotations

import io
import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from graphmem.backends import open_backend
from graphmem.config import LifecycleConfig, Settings
from graphmem.errors import InvalidInput, LLMResponseError, LLMUnavailable, NotFound
from graphmem.lifecycle import MaintenanceReport
from graphmem.llm import AnthropicLLM
from graphmem.memory import GraphMemory
from graphmem.models import MAX_CONTENT_CHARS, Memory
from tests.llm.anthropic_stub import (
    Reply,
    StubAnthropic,
    _message,
    auto_reply,
    error_reply,
    tool_reply,
)

NOW = datetime(2024, 6, 1, tzinfo=UTC)
NO_RECONCILE = Settings(reconcile={"mode": "off"})  # type: ignore[arg-type]


def mems(*texts: str) -> list[Memory]:
    return [
        Memory(id=f"m{i}", content=t, created_at=NOW + timedelta(minutes=i))
        for i, t in enumerate(texts)
    ]


def store(stub: StubAnthropic, **llm_options: Any) -> GraphMemory:
    llm = AnthropicLLM(base_url=stub.url, api_key="k", **{"max_retries": 0, **llm_options})
    return GraphMemory(
        open_backend("memory://"), embedder=None, llm=llm, clock=lambda: NOW, settings=NO_RECONCILE
    )


def exported(mem: GraphMemory) -> str:
    out = io.StringIO()
    mem.transfer.export(out)
    return out.getvalue()


# -- bodies the SDK hands over as they are ------------------------------------------------


def _summary_message(**changes: Any) -> dict[str, Any]:
    block = {"type": "tool_use", "id": "t", "name": "record_summarize", "input": {"summary": "ok"}}
    return {**_message([block], (5, 1), "tool_use"), **changes}


@pytest.mark.parametrize(
    "reply",
    [
        Reply(200, [1, 2, 3]),  # a JSON array, not a message
        Reply(200, _message([{"type": "text"}], (1, 1), "end_turn")),  # a text block, no text
        Reply(200, _message([{"type": "text", "text": 42}], (1, 1), "end_turn")),
        Reply(200, {**_message([], (1, 1), "end_turn"), "content": "not a list"}),
    ],
    ids=["array", "text-without-text", "text-not-a-string", "content-not-a-list"],
)
def test_a_body_that_is_no_message_is_a_response_error(
    stub: StubAnthropic, claude: AnthropicLLM, reply: Reply
) -> None:
    """The SDK builds its Message without validating it: these raised AttributeError and
    TypeError from the parsing, past the passes' offline fallback."""
    stub.push(reply)
    with pytest.raises(LLMResponseError):
        claude.summarize(mems("Alice likes tea."))


def test_token_counts_that_are_not_counts_are_recorded_as_zero(
    stub: StubAnthropic, claude: AnthropicLLM
) -> None:
    """A usable answer with a malformed usage block is still the answer (the counts were a
    ValueError from int("lots"))."""
    bad_usage = {"input_tokens": "lots", "output_tokens": -3}
    stub.push(Reply(200, _summary_message(usage=bad_usage)))
    assert claude.summarize(mems("Alice likes tea.")).content == "ok"
    u = claude.usage["summarize"]
    assert (u.calls, u.input_tokens, u.output_tokens) == (1, 0, 0)


# -- answers that cannot be stored ------------------------------------------------------


UNSTORABLE = {
    "nul": "Alice likes\x00 tea.",
    "too-long": "Alice likes tea. " * (MAX_CONTENT_CHARS // 17 + 1),
    "blank": "   \n ",
}


@pytest.mark.parametrize("text", UNSTORABLE.values(), ids=UNSTORABLE.keys())
def test_a_summary_that_cannot_be_stored_is_a_response_error_and_falls_back(
    stub: StubAnthropic, text: str
) -> None:
    """The model's text went into the summary memory unchecked: its validation then raised
    InvalidInput (as if the caller had erred) instead of the offline fallback."""
    mem = store(stub)
    a = mem.remember("The build failed on the payments table.", created_at=NOW)
    b = mem.remember("We fixed it by adding an index.", created_at=NOW + timedelta(minutes=1))
    stub.push(tool_reply("record_summarize", {"summary": text}))
    with pytest.raises(LLMResponseError):
        mem.llm.summarize([a, b])  # type: ignore[union-attr]
    stub.push(tool_reply("record_summarize", {"summary": text}))
    summary = mem.lifecycle.summarize([a.id, b.id])
    assert summary.metadata["llm_fallback"] == "LLMResponseError"
    assert "payments" in summary.content and "\x00" not in summary.content
    assert len(mem.lifecycle.provenance(summary.id).nodes) == 3


@pytest.mark.parametrize("text", [UNSTORABLE["nul"], UNSTORABLE["too-long"]], ids=["nul", "long"])
def test_a_rewrite_that_cannot_be_stored_falls_back_to_the_offline_pass(
    stub: StubAnthropic, text: str
) -> None:
    mem = store(stub)
    vague = mem.remember("basically the deploy runs on fridays i think", created_at=NOW)
    stub.push(
        tool_reply(
            "record_improve",
            {"rewrites": [{"id": vague.id, "content": text, "reason": "r"}], "contradictions": []},
        )
    )
    report = mem.lifecycle.improve([vague.id])
    assert report.llm_failures == 1
    assert all("\x00" not in m.content and len(m.content) < 1000 for m in report.created)


@pytest.mark.parametrize(
    "fact",
    [
        {"content": "Sam loves hiking.", "tags": ["Outdoor Activities"]},
        {"content": "Sam loves hiking.", "tags": [f"t{i}" for i in range(100)]},
        {"content": "Sam loves\x00 hiking."},
    ],
    ids=["tag-with-a-space", "too-many-tags", "nul"],
)
def test_a_fact_that_cannot_be_stored_falls_back_to_the_offline_rules(
    stub: StubAnthropic, fact: dict[str, Any]
) -> None:
    """A tag the store refuses ("Outdoor Activities" is what a model will write unless told
    the rule) made extract_facts raise InvalidInput and store nothing."""
    mem = store(stub)
    before = mem.count()
    stub.push(tool_reply("record_extract_facts", {"facts": [fact]}))
    report = mem.lifecycle.extract_facts("I love hiking and I live in Lisbon.", speaker="Sam")
    assert report.created  # the offline rules' facts
    assert mem.count() == before + len(report.created)
    assert all("\x00" not in m.content for m in report.created)
    stub.push(tool_reply("record_extract_facts", {"facts": [fact]}))
    with pytest.raises(LLMResponseError):
        mem.llm.extract_facts("I love hiking.", speaker="Sam")  # type: ignore[union-attr]


def test_the_facts_schema_tells_the_model_the_tag_rule(
    stub: StubAnthropic, claude: AnthropicLLM
) -> None:
    claude.extract_facts("I love hiking.", speaker="Sam")
    schema = stub.requests[0]["json"]["tools"][0]["input_schema"]
    assert "lowercase" in str(schema)


# -- dense memories kept verbatim, within what a memory may hold -------------------------


def test_a_summary_of_large_dense_memories_stays_within_the_content_limit() -> None:
    """Dense memories are appended verbatim; two of 60,000 characters made a summary of
    120,000 that the store refused, so on_run_end failed with InvalidInput."""
    mem = GraphMemory(open_backend("memory://"), embedder=None, clock=lambda: NOW)
    code = "\n".join(f"def step_{i}(x):\n    return x + {i}" for i in range(2100))
    assert len(code) > MAX_CONTENT_CHARS // 2
    events = [
        mem.runs.add_event("r1", "tool_output", code.replace("x", v), created_at=NOW)
        for v in ("a", "b")
    ]
    mem.runs.add_event("r1", "user_message", "Please refactor the step functions.")
    report = mem.lifecycle.on_run_end("r1")
    [summary_id] = report.ids("create", step="summarize")
    summary = mem.get(summary_id)
    assert len(summary.content) <= MAX_CONTENT_CHARS
    assert events[0].content in summary.content  # the first kept verbatim
    assert events[1].content not in summary.content  # the one that did not fit is named
    assert "1 more" in summary.content
    sources = {n.id for n in mem.lifecycle.provenance(summary_id).nodes} - {summary_id}
    assert {e.id for e in events} <= sources


# -- a slow server, a long retry-after ---------------------------------------------------


def test_an_answer_that_trickles_in_is_given_up_at_the_timeout(stub: StubAnthropic) -> None:
    """The SDK's timeout bounds each read: a server sending a byte every 20 ms (a valid
    answer, 9 s in all) held the caller for all of it with timeout=0.5."""
    llm = AnthropicLLM(base_url=stub.url, api_key="k", max_retries=0, timeout=0.5)
    slow = tool_reply("record_summarize", {"summary": "ok"})
    slow.drip = 0.02
    stub.push(slow)
    started = time.monotonic()
    with pytest.raises(LLMUnavailable, match=r"within 0\.5 s"):
        llm.summarize(mems("Alice likes tea."))
    assert time.monotonic() - started < 4  # well before the answer's 9 s
    # the next call gets a fresh connection and its answer
    assert llm.summarize(mems("Alice likes tea.")).content.startswith("Synthesis")
    llm.close()


def test_a_retry_after_longer_than_the_timeout_is_not_waited(stub: StubAnthropic) -> None:
    """The SDK sleeps whatever retry-after asks (an hour here) before its retry."""
    llm = AnthropicLLM(base_url=stub.url, api_key="k", max_retries=2, timeout=0.5)
    stub.push(error_reply(429, "rate_limit_error", retry_after_ms=None))
    stub.script[0].headers["retry-after"] = "3600"
    started = time.monotonic()
    with pytest.raises(LLMUnavailable):
        llm.reflect("what?", mems("Alice likes tea."))
    assert time.monotonic() - started < 4
    assert len(stub.requests) == 1


def test_a_pass_falls_back_when_the_server_is_too_slow(stub: StubAnthropic) -> None:
    mem = store(stub, timeout=0.5)
    a = mem.remember("The build failed on the payments table.")
    slow = tool_reply("record_summarize", {"summary": "ok"})
    slow.drip = 0.02
    stub.push(slow)
    summary = mem.lifecycle.summarize([a.id])
    assert summary.metadata["llm_fallback"] == "LLMUnavailable"


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), True])
def test_a_timeout_that_is_no_positive_number_of_seconds_is_refused(timeout: float) -> None:
    with pytest.raises(InvalidInput):
        AnthropicLLM(api_key="k", timeout=timeout)


# -- a failed pass changes nothing; a forgotten source never comes back ------------------


@pytest.fixture
def gated() -> Iterator[tuple[StubAnthropic, threading.Event, threading.Event]]:
    """A stub whose answers wait until the test opens the gate."""
    asked, gate = threading.Event(), threading.Event()

    def responder(body: dict[str, Any]) -> Reply:
        asked.set()
        gate.wait(10)
        return auto_reply(body)

    with StubAnthropic(responder) as s:
        yield s, asked, gate
        gate.set()


def test_a_source_forgotten_while_the_summary_is_made_is_not_summarised_into(
    gated: tuple[StubAnthropic, threading.Event, threading.Event],
) -> None:
    """The rule: a summary's sources must still exist when it is written (checked in the
    write's transaction); a summary of a forgotten memory is not written (NotFound)."""
    stub, asked, gate = gated
    mem = store(stub, timeout=10)
    a = mem.runs.add_event("r1", "user_message", "My card number ends in 4242.")
    b = mem.runs.add_event("r1", "user_message", "Book the flight to Oslo.")
    outcome: list[BaseException | Memory] = []

    def summarise() -> None:
        try:
            outcome.append(mem.lifecycle.summarize([a.id, b.id]))
        except BaseException as e:
            outcome.append(e)

    worker = threading.Thread(target=summarise)
    worker.start()
    assert asked.wait(10)
    mem.forget(a.id)
    after_forget = exported(mem)
    gate.set()
    worker.join(10)
    [result] = outcome
    assert isinstance(result, NotFound)
    assert exported(mem) == after_forget
    assert "4242" not in after_forget


def test_improve_failing_on_a_bad_answer_changes_nothing(stub: StubAnthropic) -> None:
    """A contradiction naming another agent's memory is refused; with no offline change
    to make, the store is exactly as before."""
    mem = store(stub)
    mine = mem.remember("The deploy runs on Fridays.", agent_id="a")
    theirs = mem.remember("The deploy runs on Mondays.", agent_id="b")
    before = exported(mem)
    stub.push(
        tool_reply(
            "record_improve",
            {
                "rewrites": [{"id": theirs.id, "content": "Hijacked.", "reason": "r"}],
                "contradictions": [
                    {"keep_id": mine.id, "superseded_ids": [theirs.id], "reason": "r"}
                ],
            },
        )
    )
    report = mem.lifecycle.improve([mine.id])
    assert report.llm_failures == 1 and not report.created and not report.superseded_ids
    assert exported(mem) == before


def test_a_run_end_that_fails_archives_nothing_for_a_summary_it_did_not_write(
    gated: tuple[StubAnthropic, threading.Event, threading.Event],
) -> None:
    """on_run_end archived the memories "replaced by the run summary" before it wrote the
    summary: when the summary then failed (a source forgotten during the LLM call:
    NotFound), they stayed archived with no summary to replace them."""
    stub, asked, gate = gated
    mem = store(stub, timeout=10)
    mem.lifecycle.configure(LifecycleConfig(run_end_keep_recent=1))
    events = [
        mem.runs.add_event("r1", "user_message", text, created_at=NOW + timedelta(minutes=i))
        for i, text in enumerate(
            ["Book the flight to Oslo.", "My card ends in 4242.", "A window seat, please."]
        )
    ]

    def states() -> dict[str, tuple[str, str]]:
        return {m.id: (m.status.value, m.tier.value) for m in mem.list(status=None)}

    before = states()
    outcome: list[BaseException | object] = []

    def end_run() -> None:
        try:
            outcome.append(mem.lifecycle.on_run_end("r1"))
        except BaseException as e:
            outcome.append(e)

    worker = threading.Thread(target=end_run)
    worker.start()
    assert asked.wait(10)
    mem.forget(events[1].id)
    gate.set()
    worker.join(10)
    [result] = outcome
    assert isinstance(result, NotFound)
    del before[events[1].id]
    assert states() == before  # nothing archived, promoted or summarised
    report = mem.lifecycle.on_run_end("r1")  # again: it does what it would have done
    [summary_id] = report.ids("create", step="summarize")
    assert "4242" not in mem.get(summary_id).content
    assert mem.get(events[0].id).status.value == "archived"


def test_a_memory_updated_while_improve_waits_for_the_llm_only_skips_its_own_rewrite() -> None:
    """One memory of the batch updated by its agent during the LLM call made the whole
    improve write a Conflict: the other rewrites were lost, and on_idle failed before it
    reached consolidation. Now each replacement whose memory changed is skipped."""
    asked, gate = threading.Event(), threading.Event()

    def rewrite_all(body: dict[str, Any]) -> Reply:
        if body.get("tool_choice", {}).get("name") != "record_improve":
            return auto_reply(body)
        asked.set()
        gate.wait(10)
        ids = re.findall(r'<memory id="([^"]+)"', body["messages"][0]["content"])
        rewrites = [{"id": i, "content": f"Precise fact {i[-4:]}.", "reason": "r"} for i in ids]
        return tool_reply("record_improve", {"rewrites": rewrites, "contradictions": []})

    with StubAnthropic(rewrite_all) as stub:
        mem = store(stub, timeout=10)
        mem.lifecycle.configure(LifecycleConfig(improve_rewrites=True))
        vague = [
            mem.remember(f"basically fact {i} i think", created_at=NOW - timedelta(minutes=i))
            for i in range(3)
        ]
        outcome: list[BaseException | MaintenanceReport] = []

        def idle() -> None:
            try:
                outcome.append(mem.lifecycle.on_idle())
            except BaseException as e:
                outcome.append(e)

        worker = threading.Thread(target=idle)
        worker.start()
        assert asked.wait(10)
        mine = mem.update(vague[0].id, "fact 0 as its agent restated it")
        gate.set()
        worker.join(10)
        [report] = outcome
        assert isinstance(report, MaintenanceReport), report
        assert report.improvement is not None and report.improvement.skipped == 1
        assert set(report.improvement.superseded_ids) == {vague[1].id, vague[2].id}
        assert report.consolidation is not None  # the cycle went on
        current = {m.content for m in mem.list()}
        assert current == {
            mine.content,
            f"Precise fact {vague[1].id[-4:]}.",
            f"Precise fact {vague[2].id[-4:]}.",
        }


def test_a_contradiction_won_by_a_rewrite_that_was_skipped_is_skipped_too() -> None:
    asked, gate = threading.Event(), threading.Event()

    def rewrite_and_contradict(body: dict[str, Any]) -> Reply:
        asked.set()
        gate.wait(10)
        old, new = re.findall(r'<memory id="([^"]+)"', body["messages"][0]["content"])
        data = {
            "rewrites": [{"id": new, "content": "Alice lives in Bergen.", "reason": "r"}],
            "contradictions": [{"keep_id": new, "superseded_ids": [old], "reason": "moved"}],
        }
        return tool_reply("record_improve", data)

    with StubAnthropic(rewrite_and_contradict) as stub:
        mem = store(stub, timeout=10)
        oslo = mem.remember("Alice lives in Oslo.", created_at=NOW - timedelta(days=2))
        bergen = mem.remember("alice lives in bergen now", created_at=NOW - timedelta(days=1))
        outcome: list[BaseException | object] = []
        worker = threading.Thread(
            target=lambda: outcome.append(mem.lifecycle.improve([oslo.id, bergen.id]))
        )
        worker.start()
        assert asked.wait(10)
        mem.update(bergen.id, "Alice lives in Trondheim.")
        gate.set()
        worker.join(10)
        [report] = outcome
        assert getattr(report, "skipped", None) == 2 and not getattr(report, "created", ())
        assert mem.get(oslo.id).status.value == "active"  # not superseded by an unwritten winner

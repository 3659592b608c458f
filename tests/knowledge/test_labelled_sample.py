"""Extraction quality on a labelled sample written for it (tests/knowledge/data): the
precision of what the rules extract, the people and places they type right, and no
sentence-initial common word or imperative taken for a name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from graphmem.knowledge.extract import extract, normalise

SAMPLE = Path(__file__).parent / "data" / "labelled_sample.json"


def _sentences() -> list[dict[str, Any]]:
    data: dict[str, Any] = json.loads(SAMPLE.read_text(encoding="utf-8"))
    return list(data["sentences"])


def _score() -> dict[str, Any]:
    tp = fp = fn = typed = typed_ok = 0
    wrong: list[str] = []
    for s in _sentences():
        gold = {normalise(e["name"]): e["type"] for e in s["entities"]}
        got = {m.norm: m.type.value for m in extract(s["text"]).mentions}
        for norm, etype in got.items():
            if norm in gold:
                tp += 1
                if gold[norm] in ("person", "place"):
                    typed += 1
                    typed_ok += etype == gold[norm]
            else:
                fp += 1
                wrong.append(norm)
        fn += len(set(gold) - set(got))
    return {"tp": tp, "fp": fp, "fn": fn, "typed": typed, "typed_ok": typed_ok, "wrong": wrong}


def test_the_sample_is_what_it_says() -> None:
    sentences = _sentences()
    assert len(sentences) == 60
    assert sum(len(s["entities"]) for s in sentences) == 109


def test_precision_is_at_least_90_percent() -> None:
    s = _score()
    precision = s["tp"] / (s["tp"] + s["fp"])
    assert precision >= 0.90, (precision, s["wrong"])


def test_people_and_places_found_are_mostly_typed_right() -> None:
    s = _score()
    assert s["typed_ok"] / s["typed"] >= 0.75, s


def test_no_sentence_initial_imperative_or_heading_is_an_entity() -> None:
    for text in (
        "Review the billing service before Friday.",
        "Migrate the user table to the new cluster and drop the old indexes.",
        "Audit the permissions on the shared drive.",
        "Speed up the image upload by resizing on the client.",
        "Add retries to the webhook sender.",
        "Done: moved the cron jobs to the new runner.",
        "Noted: vegetarian, tea instead of coffee.",
        "Plan - Rotate the leaked token",
        "The flaky tests came from a shared database.",
    ):
        assert extract(text).mentions == (), text

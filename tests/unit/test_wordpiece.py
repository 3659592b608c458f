"""The Python path for one plain text's token ids gives the tokenizers library's ids."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest

from graphmem.embeddings import bundled_model_path
from graphmem.embeddings.wordpiece import FastWordPiece, LazyWordPiece

pytest.importorskip("tokenizers", reason="the tokenizers package is not installed")
MODEL = bundled_model_path()
if MODEL is None:
    pytest.skip("the model is neither installed nor fetched", allow_module_level=True)
assert MODEL is not None
MAX_LENGTH = 256


def _library() -> object:
    from graphmem.embeddings.onnx import _tokenizer

    assert MODEL is not None
    return _tokenizer(MODEL, MAX_LENGTH)


def _plain_texts() -> list[str]:
    rng = random.Random(7)
    words = ["Alice", "re-booked", "U.S.", "don't", "2024-05-07", "tea", "_under_"]
    texts = [
        "What did Caroline research?",
        "When did Melanie paint a sunrise? (answer: 8 May 2023)",
        "",
        "   ",
        "Mixing tabs\tand\nnewlines\r\nin one memory",
        "{json: [1, 2]} `code` ~tilde~ a|b \\ back\\slash @home #tag $5 %20 ^caret",
        "supercalifragilisticexpialidocious antidisestablishmentarianism",
        "x" * 150 + " after a word too long to piece",
        "zzqxj qqqqzzz xkcd",  # pieces that need continuations or are unknown
        "the quarterly tax filing is due on the fifteenth " * 40,  # past the length limit
        "[not a special token] [CLS is not closed",
    ]
    texts += [" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for _ in range(50)]
    alphabet = string.ascii_letters + string.digits + string.punctuation + " \t\n\r"
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80))) for _ in range(500)]
    return texts


def test_plain_texts_get_the_library_ids() -> None:
    assert MODEL is not None
    fast = FastWordPiece.from_file(MODEL / "tokenizer.json", MAX_LENGTH)
    assert fast is not None
    lib = _library()
    for text in _plain_texts():
        assert fast.ids(text) == lib.encode(text).ids, text  # type: ignore[attr-defined]
    # a second time from the per-word memo
    for text in _plain_texts()[:20]:
        assert fast.ids(text) == lib.encode(text).ids, text  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "text",
    [
        "What did she see at the café?",  # accents: the library strips them
        "a\x01b",  # a control character: the library deletes it, joining a and b
        "vertical\x0btab",
        "what is [MASK]?",  # a special token's text: the library matches it first
        "[SEP]",
        "中文",
    ],
)
def test_other_texts_are_left_to_the_library(text: str) -> None:
    assert MODEL is not None
    fast = FastWordPiece.from_file(MODEL / "tokenizer.json", MAX_LENGTH)
    assert fast is not None and fast.ids(text) is None


def test_another_tokenizer_configuration_has_no_fast_path(tmp_path: Path) -> None:
    assert MODEL is not None
    spec = json.loads((MODEL / "tokenizer.json").read_text(encoding="utf-8"))
    spec["normalizer"]["lowercase"] = False  # a cased model: lower-casing would be wrong
    cased = tmp_path / "tokenizer.json"
    cased.write_text(json.dumps(spec), encoding="utf-8")
    assert FastWordPiece.from_file(cased, MAX_LENGTH) is None
    assert FastWordPiece.from_file(tmp_path / "missing.json", MAX_LENGTH) is None
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    assert FastWordPiece.from_file(tmp_path / "broken.json", MAX_LENGTH) is None


def test_the_python_path_is_made_at_the_second_text(tmp_path: Path) -> None:
    """A process that embeds one query does not read the tokenizer file a second time."""
    assert MODEL is not None
    lazy = LazyWordPiece(MODEL / "tokenizer.json", MAX_LENGTH)
    assert lazy.ids("What did Caroline research?") is None and not lazy.ready
    assert (
        lazy.ids("What did Caroline research?")
        == _library()
        .encode(  # type: ignore[attr-defined]
            "What did Caroline research?"
        )
        .ids
    )
    assert lazy.ready
    other = LazyWordPiece(tmp_path / "missing.json", MAX_LENGTH)
    assert [other.ids("x") for _ in range(4)] == [None] * 4 and not other.ready

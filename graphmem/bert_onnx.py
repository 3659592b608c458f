"""Build the ONNX graph of a BERT encoder straight from its safetensors weights.

This is what lets the default embedder run without torch: the weights of a BERT-style
sentence-transformers model (``model.safetensors`` + ``config.json``) are read with numpy and
laid into an ONNX graph with the ``onnx`` helper API, once, into the user cache. The graph
takes ``input_ids`` and ``attention_mask`` (int64, ``[batch, tokens]``) and returns the last
hidden state as ``token_embeddings`` (float32, ``[batch, tokens, hidden]``); pooling and
normalisation stay in numpy, as for any other model.

Only what BERT with absolute positions and GELU needs is built; anything else (another
architecture, relative positions, a different activation) is refused with a ConfigError, so
the caller can fall back to sentence-transformers.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np

from graphmem.errors import ConfigError

__all__ = ["build_bert_onnx", "read_safetensors"]

_DTYPES = {
    "F32": np.float32,
    "F16": np.float16,
    "F64": np.float64,
    "I64": np.int64,
    "I32": np.int32,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}
# The opset LayerNormalization first appeared in; old enough for any onnxruntime we accept.
OPSET = 17


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """All tensors of a ``.safetensors`` file as numpy arrays (the format: an 8-byte little-
    endian header length, a JSON header of dtype/shape/offsets, then the raw data)."""
    try:
        with path.open("rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
            data = f.read()
    except (OSError, ValueError, struct.error) as e:
        raise ConfigError(f"cannot read the model weights {path}: {e}") from e
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ConfigError(f"{path.name}: tensor {name} has unsupported dtype {info['dtype']}")
        start, end = info["data_offsets"]
        arr = np.frombuffer(data[start:end], dtype=np.dtype(dtype).newbyteorder("<"))
        out[name] = arr.reshape(info["shape"])
    return out


class _Graph:
    """Collects nodes and initialisers with unique names."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self.helper = helper
        self.numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(self.numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, kind: str, inputs: list[str], **attrs: Any) -> str:
        self._n += 1
        out = f"{kind.lower()}_{self._n}"
        self.nodes.append(self.helper.make_node(kind, inputs, [out], **attrs))
        return out


def _config(model_dir: Path) -> dict[str, Any]:
    try:
        cfg: dict[str, Any] = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read {model_dir / 'config.json'}: {e}") from e
    if cfg.get("model_type") != "bert":
        raise ConfigError(
            f"only BERT models can be built without torch, not {cfg.get('model_type')}"
        )
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        raise ConfigError("only absolute position embeddings can be built without torch")
    if cfg.get("hidden_act", "gelu") != "gelu":
        raise ConfigError(f"activation {cfg.get('hidden_act')} cannot be built without torch")
    return cfg


def build_bert_onnx(model_dir: Path, target: Path) -> None:
    """Write the ONNX graph of the BERT encoder in ``model_dir`` to ``target``."""
    try:
        import onnx
    except ImportError as e:
        raise ConfigError(
            "building the ONNX model needs the onnx package once (pip install onnx)"
        ) from e
    cfg = _config(model_dir)
    weights = read_safetensors(model_dir / "model.safetensors")
    # Some exports prefix every name with the model's class ("bert.").
    if "bert.embeddings.word_embeddings.weight" in weights:
        weights = {k.removeprefix("bert."): v for k, v in weights.items()}
    hidden = int(cfg["hidden_size"])
    heads = int(cfg["num_attention_heads"])
    head_dim = hidden // heads
    eps = float(cfg.get("layer_norm_eps", 1e-12))

    def w(name: str) -> np.ndarray:
        try:
            return np.asarray(weights[name], dtype=np.float32)
        except KeyError as e:
            raise ConfigError(f"{model_dir.name}: weight {name} is missing") from e

    g = _Graph()

    def linear(x: str, prefix: str) -> str:
        # torch keeps Linear weights as [out, in]; MatMul wants [in, out]
        weight = g.const(prefix + ".weight", w(prefix + ".weight").T)
        return g.op(
            "Add", [g.op("MatMul", [x, weight]), g.const(prefix + ".bias", w(prefix + ".bias"))]
        )

    def layer_norm(x: str, prefix: str) -> str:
        return g.op(
            "LayerNormalization",
            [
                x,
                g.const(prefix + ".weight", w(prefix + ".weight")),
                g.const(prefix + ".bias", w(prefix + ".bias")),
            ],
            axis=-1,
            epsilon=eps,
        )

    # embeddings: word + position + token type 0 (graphmem never sends a second segment)
    words = g.op(
        "Gather", [g.const("word_embeddings", w("embeddings.word_embeddings.weight")), "input_ids"]
    )
    # the first n_tokens rows of the position table, n_tokens read from the input's shape
    n_tokens = g.op("Shape", ["input_ids"], start=1, end=2)
    pos = g.op(
        "Slice",
        [
            g.const("position_embeddings", w("embeddings.position_embeddings.weight")),
            g.const("zero_1d", np.array([0], dtype=np.int64)),
            n_tokens,
            g.const("axis_0", np.array([0], dtype=np.int64)),
        ],
    )
    segment = g.const("token_type_0", w("embeddings.token_type_embeddings.weight")[0])
    x = layer_norm(g.op("Add", [g.op("Add", [words, pos]), segment]), "embeddings.LayerNorm")

    # additive mask [batch, 1, 1, tokens]: 0 where a token is, a large negative where padding is
    mask = g.op("Cast", ["attention_mask"], to=onnx.TensorProto.FLOAT)
    mask = g.op("Unsqueeze", [mask, g.const("mask_axes", np.array([1, 2], dtype=np.int64))])
    mask = g.op(
        "Mul",
        [
            g.op("Sub", [g.const("one_f32", np.array(1.0, dtype=np.float32)), mask]),
            g.const("mask_min", np.array(np.finfo(np.float32).min, dtype=np.float32)),
        ],
    )
    split = g.const("split_heads", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge = g.const("merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    scale = g.const("scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    half = g.const("half", np.array(0.5, dtype=np.float32))
    one = g.const("one", np.array(1.0, dtype=np.float32))
    sqrt2 = g.const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))

    for i in range(int(cfg["num_hidden_layers"])):
        p = f"encoder.layer.{i}."

        def heads_of(name: str, perm: list[int], x: str = x, p: str = p) -> str:
            return g.op("Transpose", [g.op("Reshape", [linear(x, p + name), split])], perm=perm)

        q = heads_of("attention.self.query", [0, 2, 1, 3])
        k = heads_of("attention.self.key", [0, 2, 3, 1])
        v = heads_of("attention.self.value", [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), mask])
        probs = g.op("Softmax", [scores], axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, merge])
        x = layer_norm(
            g.op("Add", [linear(ctx, p + "attention.output.dense"), x]),
            p + "attention.output.LayerNorm",
        )
        inner = linear(x, p + "intermediate.dense")
        # exact GELU, as BERT's "gelu": 0.5 * x * (1 + erf(x / sqrt 2))
        gelu = g.op(
            "Mul",
            [
                g.op("Mul", [inner, half]),
                g.op("Add", [g.op("Erf", [g.op("Div", [inner, sqrt2])]), one]),
            ],
        )
        x = layer_norm(g.op("Add", [linear(gelu, p + "output.dense"), x]), p + "output.LayerNorm")

    g.nodes.append(g.helper.make_node("Identity", [x], ["token_embeddings"]))
    dims = ["batch", "tokens"]
    graph = g.helper.make_graph(
        g.nodes,
        "bert_encoder",
        [
            g.helper.make_tensor_value_info("input_ids", onnx.TensorProto.INT64, dims),
            g.helper.make_tensor_value_info("attention_mask", onnx.TensorProto.INT64, dims),
        ],
        [
            g.helper.make_tensor_value_info(
                "token_embeddings", onnx.TensorProto.FLOAT, [*dims, hidden]
            )
        ],
        g.inits,
    )
    model = g.helper.make_model(graph, opset_imports=[g.helper.make_opsetid("", OPSET)])
    model.ir_version = 8  # readable by every onnxruntime since 1.13
    onnx.checker.check_model(model)
    onnx.save_model(model, str(target))

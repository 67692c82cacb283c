"""Reading a llama-family GGUF file the way llama.cpp does: hyperparameters from the `llama.*`
metadata, weights by llama.cpp's tensor names, each weight's type checked.

`read_gguf(path)` → `GGUFModel`: the `Hparams`, every tensor as a `Weight` (its GGUF type, its
`[n, k]` shape in nn.Linear order and a copy of its bytes or values) and the raw metadata.
Nothing here touches the device; `model.Llama` uploads what it needs.

Rules (llama.cpp's `llama_model_loader` / `llm_load_hparams` for LLM_ARCH_LLAMA):

* `general.architecture` must be "llama" (anything else: ValueError naming it);
* required keys: `llama.block_count`, `llama.embedding_length`, `llama.feed_forward_length`,
  `llama.attention.head_count`, `llama.attention.layer_norm_rms_epsilon`,
  `llama.context_length`; optional with llama.cpp's defaults: `llama.attention.head_count_kv`
  (= head_count), `llama.rope.freq_base` (10000), `llama.rope.dimension_count` (= head_dim),
  `llama.attention.key_length` / `value_length` (= embedding_length / head_count);
* vocabulary size: the length of `tokenizer.ggml.tokens` when present, else `llama.vocab_size`,
  else the rows of `token_embd.weight`;
* tensors `token_embd`, `output_norm`, `output` (absent: tied to `token_embd`) and per layer N
  `blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up,
  ffn_down}` (`.weight`), with the shapes the hyperparameters give;
* weight types F32, F16, BF16, Q8_0, Q4_K, Q6_K; any other is a ValueError naming the tensor
  and its type.  Rope: llama.cpp's "norm" rope (adjacent pairs 2i, 2i+1 — convert_hf_to_gguf
  permutes the rows of attn_q / attn_k so this equals Hugging Face's rotate-half).
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np

#: GGUF weight types this package runs
SUPPORTED_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_K", "Q6_K")
#: quantised types → (values per block, bytes per block)
QUANT_BLOCKS = {"Q8_0": (32, 34), "Q4_K": (256, 144), "Q6_K": (256, 210)}

LAYER_TENSORS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                 "ffn_gate", "ffn_up", "ffn_down")


@dataclasses.dataclass(frozen=True)
class Hparams:
    n_layers: int
    dim: int
    ffn: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    eps: float
    rope_theta: float
    context_length: int
    vocab: int


@dataclasses.dataclass
class Weight:
    """One GGUF tensor: `kind` its type name, `shape` `[n, k]` (or `[n]`) in nn.Linear order
    (GGUF lists dimensions fastest-first), `data` a host copy: uint8 `[n, row_bytes]` for the
    quantised types and BF16, float16 / float32 `[n, k]` otherwise."""
    name: str
    kind: str
    shape: tuple
    data: np.ndarray

    def dense(self, rows=None) -> np.ndarray:
        """float32 values of the tensor (or of the given rows of a 2-d tensor)."""
        d = self.data if rows is None else self.data[rows]
        if self.kind in ("F32", "F16"):
            return np.asarray(d, np.float32)
        if self.kind == "BF16":
            bits = np.ascontiguousarray(d).view(np.uint16).astype(np.uint32) << 16
            return bits.view(np.float32)
        from .. import quant
        return quant.dequantize(np.ascontiguousarray(d), self.kind.lower())


@dataclasses.dataclass
class GGUFModel:
    path: str
    hparams: Hparams
    weights: dict
    metadata: dict

    def tied_output(self) -> bool:
        return "output.weight" not in self.weights


def _field_value(field):
    """A reader field as Python: str, int, float, bool or a list of them."""
    from gguf import GGUFValueType
    types = field.types
    if not types:
        return None
    if types[0] == GGUFValueType.ARRAY:
        sub = types[1] if len(types) > 1 else None
        if sub == GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8", errors="replace") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    part = field.parts[field.data[0]]
    if types[0] == GGUFValueType.STRING:
        return bytes(part).decode("utf-8", errors="replace")
    v = part.tolist()[0]
    if types[0] == GGUFValueType.BOOL:
        return bool(v)
    return v


def read_metadata(reader) -> dict:
    return {name: _field_value(f) for name, f in reader.fields.items()
            if not name.startswith("GGUF.")}


def _open(path: str):
    from gguf import GGUFReader
    if not os.path.isfile(path):
        raise FileNotFoundError(f"llama: no such GGUF file: {path!r}")
    try:
        return GGUFReader(path)
    except Exception as e:                           # bad magic, truncated file, ...
        raise ValueError(f"llama: {path!r} is not a readable GGUF file ({e})") from None


def _int(meta: dict, key: str, path: str, default=None) -> int:
    v = meta.get(key, default)
    if v is None:
        raise ValueError(f"llama: {path!r} lacks the metadata key {key!r}")
    if isinstance(v, list):                          # per-layer arrays (head_count_kv etc.)
        if len(set(v)) != 1:
            raise ValueError(f"llama: {key!r} differs between layers ({v}); per-layer values "
                             f"are not supported")
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
        raise ValueError(f"llama: metadata key {key!r} must be a positive integer, got {v!r}")
    return int(v)


def _float(meta: dict, key: str, path: str, default=None) -> float:
    v = meta.get(key, default)
    if v is None:
        raise ValueError(f"llama: {path!r} lacks the metadata key {key!r}")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v <= 0:
        raise ValueError(f"llama: metadata key {key!r} must be a positive number, got {v!r}")
    return float(v)


def read_hparams(meta: dict, path: str, embd_rows: int | None) -> Hparams:
    arch = meta.get("general.architecture")
    if arch is None:
        raise ValueError(f"llama: {path!r} lacks the metadata key 'general.architecture'")
    if arch != "llama":
        raise ValueError(f"llama: {path!r} has general.architecture {arch!r}; only 'llama' "
                         f"files are supported")
    p = "llama."
    n_layers = _int(meta, p + "block_count", path)
    dim = _int(meta, p + "embedding_length", path)
    ffn = _int(meta, p + "feed_forward_length", path)
    n_heads = _int(meta, p + "attention.head_count", path)
    n_kv = _int(meta, p + "attention.head_count_kv", path, n_heads)
    eps = _float(meta, p + "attention.layer_norm_rms_epsilon", path)
    ctx = _int(meta, p + "context_length", path)
    theta = _float(meta, p + "rope.freq_base", path, 10000.0)
    if dim % n_heads:
        raise ValueError(f"llama: embedding_length {dim} is not a multiple of head_count "
                         f"{n_heads}")
    head_dim = dim // n_heads
    for key in ("attention.key_length", "attention.value_length"):
        if _int(meta, p + key, path, head_dim) != head_dim:
            raise ValueError(f"llama: {p + key} = {meta[p + key]} differs from "
                             f"embedding_length / head_count = {head_dim}; not supported")
    rot = _int(meta, p + "rope.dimension_count", path, head_dim)
    if rot != head_dim:
        raise ValueError(f"llama: {p}rope.dimension_count = {rot} differs from the head "
                         f"dimension {head_dim} (partial rotary embeddings are not supported)")
    if n_heads % n_kv:
        raise ValueError(f"llama: head_count {n_heads} is not a multiple of head_count_kv "
                         f"{n_kv}")
    scaling = meta.get(p + "rope.scaling.type")
    if scaling not in (None, "none"):
        raise ValueError(f"llama: {p}rope.scaling.type = {scaling!r} is not supported")
    tokens = meta.get("tokenizer.ggml.tokens")
    if tokens is not None:
        vocab = len(tokens)
    elif meta.get(p + "vocab_size") is not None:
        vocab = _int(meta, p + "vocab_size", path)
    elif embd_rows is not None:
        vocab = embd_rows
    else:
        raise ValueError(f"llama: {path!r} has neither 'tokenizer.ggml.tokens' nor a "
                         f"'token_embd.weight' tensor to take the vocabulary size from")
    return Hparams(n_layers, dim, ffn, n_heads, n_kv, head_dim, eps, theta, ctx, vocab)


def expected_shapes(h: Hparams) -> dict:
    """tensor name → [n, k] (or [n]) in nn.Linear order."""
    kv = h.n_kv_heads * h.head_dim
    shapes = {"token_embd.weight": (h.vocab, h.dim), "output_norm.weight": (h.dim,),
              "output.weight": (h.vocab, h.dim)}
    for i in range(h.n_layers):
        b = f"blk.{i}."
        shapes.update({b + "attn_norm.weight": (h.dim,), b + "attn_q.weight": (h.dim, h.dim),
                       b + "attn_k.weight": (kv, h.dim), b + "attn_v.weight": (kv, h.dim),
                       b + "attn_output.weight": (h.dim, h.dim),
                       b + "ffn_norm.weight": (h.dim,), b + "ffn_gate.weight": (h.ffn, h.dim),
                       b + "ffn_up.weight": (h.ffn, h.dim), b + "ffn_down.weight": (h.dim, h.ffn)})
    return shapes


def read_gguf(path) -> GGUFModel:
    """Read and check a llama GGUF file (module docstring); the tensors are copied out of the
    memory map, so the file is closed when this returns."""
    path = os.fspath(path)
    reader = _open(path)
    try:
        meta = read_metadata(reader)
        by_name = {t.name: t for t in reader.tensors}
        embd = by_name.get("token_embd.weight")
        embd_rows = int(embd.shape[-1]) if embd is not None and len(embd.shape) == 2 else None
        h = read_hparams(meta, path, embd_rows)
        if "rope_freqs.weight" in by_name:
            raise ValueError("llama: tensor 'rope_freqs.weight' (llama 3.1 rope frequency "
                             "factors) is not supported yet")
        weights = {}
        for name, shape in expected_shapes(h).items():
            t = by_name.get(name)
            if t is None:
                if name == "output.weight":
                    continue                         # tied to token_embd
                raise ValueError(f"llama: {path!r} lacks the tensor {name!r}")
            kind = t.tensor_type.name
            if kind not in SUPPORTED_TYPES:
                raise ValueError(f"llama: tensor {name!r} has type {kind}; supported: "
                                 f"{', '.join(SUPPORTED_TYPES)}")
            got = tuple(int(d) for d in reversed(np.asarray(t.shape).tolist()))
            if got != shape:
                raise ValueError(f"llama: tensor {name!r} has shape {list(got)}, expected "
                                 f"{list(shape)} from the hyperparameters")
            if kind in QUANT_BLOCKS and shape[-1] % QUANT_BLOCKS[kind][0]:
                raise ValueError(f"llama: tensor {name!r} ({kind}) has rows of {shape[-1]} "
                                 f"values, not a multiple of its block ({QUANT_BLOCKS[kind][0]})")
            if len(shape) == 1 and kind not in ("F32", "F16", "BF16"):
                raise ValueError(f"llama: norm tensor {name!r} must be F32, F16 or BF16, got "
                                 f"{kind}")
            data = np.array(t.data)                  # a copy: the map closes with the reader
            if len(shape) == 2:
                data = data.reshape(shape[0], -1)
            else:
                data = data.reshape(-1)
            weights[name] = Weight(name, kind, shape, data)
    finally:
        del reader                                   # releases the memory map
    return GGUFModel(path, h, weights, meta)

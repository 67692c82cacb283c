"""Tiny random llama models for tests/test_llama_gguf.py: a transformers LlamaForCausalLM with
seeded weights, written to GGUF the way llama.cpp's convert_hf_to_gguf.py writes a llama:

* metadata `general.architecture = "llama"`, `llama.{context_length, embedding_length,
  block_count, feed_forward_length, rope.dimension_count, rope.freq_base,
  attention.head_count, attention.head_count_kv, attention.layer_norm_rms_epsilon,
  vocab_size}`, `general.file_type`, and a tokenizer (`tokenizer.ggml.*`);
* tensors renamed (embed_tokens → token_embd, layers.N.input_layernorm → blk.N.attn_norm,
  self_attn.{q,k,v,o}_proj → attn_{q,k,v,output}, post_attention_layernorm → ffn_norm,
  mlp.{gate,up,down}_proj → ffn_{gate,up,down}, norm → output_norm, lm_head → output, absent when
  tied);
* attn_q / attn_k rows permuted for llama.cpp's adjacent-pair rope: per head (q: n_heads, k:
  n_kv_heads) the rows [first half | second half] are interleaved, row 2j ← j, row 2j+1 ←
  j + head_dim/2 (transformers' GGUF loader undoes exactly this);
* 1-d tensors (norms) stay F32; matrices in the requested type.

The reference is the same file loaded back by transformers
(`AutoModelForCausalLM.from_pretrained(dir, gguf_file=name)`), which dequantises with gguf-py.
"""
from __future__ import annotations

import os

import numpy as np

from gguf import GGMLQuantizationType as QT
from gguf import GGUFWriter

from stdlib_kernels import quant

#: the mixes: tensor role → GGUF type ("norm" tensors are always F32)
MIXES = {
    "f32": dict.fromkeys(("embd", "q", "k", "v", "o", "gate", "up", "down", "output"), "F32"),
    "f16": dict.fromkeys(("embd", "q", "k", "v", "o", "gate", "up", "down", "output"), "F16"),
    "bf16": dict.fromkeys(("embd", "q", "k", "v", "o", "gate", "up", "down", "output"), "BF16"),
    # llama.cpp's Q4_K_M flavour: Q4_K mostly, Q6_K for attn_v / output, Q8_0 for ffn_down
    "quant": {"embd": "Q4_K", "q": "Q4_K", "k": "Q4_K", "v": "Q6_K", "o": "Q4_K",
              "gate": "Q4_K", "up": "Q4_K", "down": "Q8_0", "output": "Q6_K"},
}
_ROLE = {"self_attn.q_proj": ("attn_q", "q"), "self_attn.k_proj": ("attn_k", "k"),
         "self_attn.v_proj": ("attn_v", "v"), "self_attn.o_proj": ("attn_output", "o"),
         "mlp.gate_proj": ("ffn_gate", "gate"), "mlp.up_proj": ("ffn_up", "up"),
         "mlp.down_proj": ("ffn_down", "down")}


def hf_model(vocab=384, hidden=256, layers=1, heads=4, kv_heads=2, ffn=512, tied=False,
             theta=10000.0, eps=1e-5, ctx=256, seed=0):
    """A seeded LlamaForCausalLM with O(1) logits (weights ~ N(0, 1/k), embeddings N(0, 1),
    norm weights 1 + 0.1·N(0, 1))."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=ffn,
                      num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv_heads, rms_norm_eps=eps,
                      max_position_embeddings=ctx, tie_word_embeddings=tied,
                      rope_parameters={"rope_type": "default", "rope_theta": theta},
                      bos_token_id=1, eos_token_id=2)
    model = LlamaForCausalLM(cfg).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif "embed_tokens" in name:
                p.copy_(torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p.shape[1] ** 0.5)
    return model


def permute_rope_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF rotate-half rows → llama.cpp adjacent pairs, per head (module docstring)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def _encode(w: np.ndarray, kind: str):
    """(array, raw_dtype) for GGUFWriter.add_tensor."""
    w = np.ascontiguousarray(w, np.float32)
    if kind == "F32":
        return w, None
    if kind == "F16":
        return w.astype(np.float16), None
    if kind == "BF16":
        bits = w.view(np.uint32)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)   # RNE
        return bits.view(np.uint8).reshape(w.shape[0], -1), QT.BF16
    if kind.lower() in quant.SIZES:
        return quant.quantize(w, kind.lower()), QT[kind]
    from gguf import quants                              # other types (error tests)
    return quants.quantize(w, QT[kind]), QT[kind]


def write_gguf(model, path: str, mix="f32", tokenizer=None, name="tiny-llama",
               drop_keys=(), arch="llama", types=None) -> str:
    """Write `model` to `path` as convert_hf_to_gguf would (module docstring).  `mix` a key
    of MIXES (or a dict); `types` overrides single tensors' GGUF types by GGUF name;
    `tokenizer` a `vocab.*` dict (default: an SPM vocabulary of the model's size);
    `drop_keys` metadata keys to leave out; `arch` the architecture string (error tests)."""
    cfg = model.config
    mix = MIXES[mix] if isinstance(mix, str) else mix
    types = types or {}
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    hd = cfg.hidden_size // heads
    theta = cfg.rope_parameters["rope_theta"]
    w = GGUFWriter(path, arch)
    kv_pairs = {
        "general.name": name,
        f"{arch}.context_length": cfg.max_position_embeddings,
        f"{arch}.embedding_length": cfg.hidden_size,
        f"{arch}.block_count": cfg.num_hidden_layers,
        f"{arch}.feed_forward_length": cfg.intermediate_size,
        f"{arch}.rope.dimension_count": hd,
        f"{arch}.attention.head_count": heads,
        f"{arch}.attention.head_count_kv": kv,
        f"{arch}.rope.freq_base": float(theta),
        f"{arch}.attention.layer_norm_rms_epsilon": float(cfg.rms_norm_eps),
        f"{arch}.vocab_size": cfg.vocab_size,
    }
    from gguf import GGUFValueType as VT
    for key, value in kv_pairs.items():
        if key in drop_keys:
            continue
        if isinstance(value, str):
            w.add_string(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        else:
            w.add_uint32(key, value)
    tok = tokenizer if tokenizer is not None else None
    if tok is None:
        tok = spm_vocab(cfg.vocab_size)
    _write_tokenizer(w, tok, drop_keys)
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    tensors = {"token_embd.weight": (sd["model.embed_tokens.weight"], mix["embd"]),
               "output_norm.weight": (sd["model.norm.weight"], "F32")}
    if not cfg.tie_word_embeddings:
        tensors["output.weight"] = (sd["lm_head.weight"], mix["output"])
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        tensors[f"blk.{i}.attn_norm.weight"] = (sd[p + "input_layernorm.weight"], "F32")
        tensors[f"blk.{i}.ffn_norm.weight"] = (sd[p + "post_attention_layernorm.weight"], "F32")
        for hf, (gg, role) in _ROLE.items():
            m = sd[p + hf + ".weight"]
            if role == "q":
                m = permute_rope_rows(m, heads)
            elif role == "k":
                m = permute_rope_rows(m, kv)
            tensors[f"blk.{i}.{gg}.weight"] = (m, mix[role])
    for tname, (arr, kind) in tensors.items():
        kind = types.get(tname, kind)
        data, raw = _encode(arr, kind)
        if raw is None:
            w.add_tensor(tname, data)
        else:
            w.add_tensor(tname, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _write_tokenizer(w, tok: dict, drop_keys) -> None:
    keys = {"tokenizer.ggml.model": ("str", tok["model"]),
            "tokenizer.ggml.tokens": ("strs", tok["tokens"]),
            "tokenizer.ggml.token_type": ("ints", tok["token_type"])}
    if "pre" in tok:
        keys["tokenizer.ggml.pre"] = ("str", tok["pre"])
    if "scores" in tok:
        keys["tokenizer.ggml.scores"] = ("floats", tok["scores"])
    if "merges" in tok:
        keys["tokenizer.ggml.merges"] = ("strs", tok["merges"])
    for k in ("bos_token_id", "eos_token_id", "unknown_token_id"):
        if k in tok:
            keys["tokenizer.ggml." + k] = ("u32", tok[k])
    for k in ("add_bos_token", "add_eos_token", "add_space_prefix"):
        if k in tok:
            keys["tokenizer.ggml." + k] = ("bool", tok[k])
    from gguf import GGUFValueType as VT
    for key, (kind, value) in keys.items():
        if key in drop_keys:
            continue
        if kind == "str":
            w.add_string(key, value)
        elif kind == "strs":
            w.add_array(key, list(value))
        elif kind == "ints":
            w.add_array(key, [int(v) for v in value])
        elif kind == "floats":
            w.add_array(key, [float(v) for v in value])
        elif kind == "u32":
            w.add_uint32(key, int(value))
        else:
            w.add_bool(key, bool(value))


def hf_from_gguf(path: str):
    """transformers' own GGUF loader on the file (dequantised with gguf-py), float32."""
    import torch
    from transformers import AutoModelForCausalLM
    d, f = os.path.split(path)
    return AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()


# ---- vocabularies ------------------------------------------------------------------------------

CORPUS = ("the quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away! "
          "Pack my box with five dozen liquor jugs, then thank the jolly quartz sphinx. "
          "Numbers 12345 and 2024 stay; it's what they'll do, we've seen, I'm here, you'd go. "
          "théâtre café naïve résumé — über straße 東京 ")


def _train(words: list, n_merges: int):
    """Plain BPE over lists of symbols: the most frequent adjacent pair (ties: the first seen)
    merged `n_merges` times; returns the merges in order."""
    words = [list(w) for w in words]
    merges = []
    for _ in range(n_merges):
        counts = {}
        for w in words:
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + 1
        if not counts:
            break
        pair = max(counts, key=lambda k: counts[k])
        merges.append(pair)
        for w in words:
            i = 0
            while i < len(w) - 1:
                if (w[i], w[i + 1]) == pair:
                    w[i:i + 2] = [w[i] + w[i + 1]]
                i += 1
    return merges


def spm_vocab(size: int, corpus: str = CORPUS) -> dict:
    """A SentencePiece-BPE style llama vocabulary of exactly `size` tokens: <unk>, <s>, </s>,
    the 256 byte-fallback tokens <0xXX>, the corpus' characters (spaces as U+2581) and BPE
    merges of its words; score = -(rank) so earlier pieces win (llama.cpp's SPM tokenizer
    merges the best-scoring pair)."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    scores = [0.0] * len(tokens)
    text = CORPUS.replace(" ", "\u2581")
    words = ["\u2581" + w for w in CORPUS.split(" ") if w]
    chars = sorted(set(text) - {"\u2581"}, key=text.index)
    # a few characters are left out of the vocabulary: they go through byte fallback
    chars = ["\u2581"] + [c for c in chars if c not in "東ß"]
    pieces = list(chars)
    for a, b in _train([[c if c in chars else "?" for c in w] for w in words],
                       size - len(tokens) - len(chars)):
        if "?" not in a + b and a + b not in pieces:
            pieces.append(a + b)
    pieces = pieces[:size - len(tokens)]
    while len(tokens) + len(pieces) < size:
        pieces.append(f"<extra_{len(pieces)}>")
    if len(tokens) + len(pieces) != size:
        raise ValueError(f"spm_vocab: {size} tokens are too few for this corpus")
    for i, p in enumerate(pieces):
        tokens.append(p)
        types.append(1)
        scores.append(-float(i))
    return {"model": "llama", "tokens": tokens, "token_type": types, "scores": scores,
            "bos_token_id": 1, "eos_token_id": 2, "unknown_token_id": 0,
            "add_bos_token": True, "add_eos_token": False}


def bpe_vocab(size: int, corpus: str = CORPUS, pre: str = "llama-bpe") -> dict:
    """A byte-level BPE (tokenizer.ggml.model "gpt2") vocabulary of exactly `size` tokens:
    the 256 byte characters, merges trained on the corpus' pre-tokenized words, and two
    control tokens at the end (<|begin_of_text|>, <|end_of_text|>)."""
    import regex
    from stdlib_kernels.llama.tokenizer import PRE_SPLITS, byte_unicode
    table = byte_unicode()
    words = ["".join(table[b] for b in w.encode("utf-8"))
             for w in regex.findall(PRE_SPLITS[pre], corpus)]
    base = [table[b] for b in range(256)]
    merges = []
    tokens = list(base)
    for a, b in _train(words, size - 2 - 256):
        if a + b not in tokens:
            merges.append(f"{a} {b}")
            tokens.append(a + b)
    while len(tokens) < size - 2:
        tokens.append(f"<|reserved_{len(tokens)}|>")
    tokens += ["<|begin_of_text|>", "<|end_of_text|>"]
    types = [1] * (size - 2) + [3, 3]
    for i, t in enumerate(tokens[:-2]):
        if t.startswith("<|reserved"):
            types[i] = 3
    return {"model": "gpt2", "pre": pre, "tokens": tokens, "token_type": types,
            "merges": merges, "bos_token_id": size - 2, "eos_token_id": size - 1,
            "add_bos_token": True}

"""`Llama`: a llama-family GGUF model run with stdlib kernels (see docs/llama.md).

Device state: every weight uploaded once (quantised weights as their raw GGUF bytes for
q4k_matmul / q6k_matmul / q8_0_matmul; F32 / F16 / BF16 matrices as one float32 `[k, n]` copy
for `gemm`; norms as float32), and a paged KV cache per layer: pools `[pages, n_kv_heads,
page_size, head_dim]` of which the sequence owns pages 0, 1, ... in order (block table
`arange`), so token t sits in slot t.

Prefill (`forward(tokens)`, n tokens at once): one launch per operation over all n rows —
rmsnorm, the q/k/v matmuls (the quantised ones take the int8 tensor-core path for n > 8), rope at
positions past..past+n-1, one `paged_kv_scatter` of the n tokens' K/V, then causal GQA
`flash_attention` of the n queries against the past+n cached keys (the mask aligned to the end),
the output projection, SwiGLU MLP, residual adds, final norm and the output matmul.
`flash_attention` wants head-major contiguous `[heads, seq, d]` arrays while the matmuls produce
token-major rows and the cache is paged (f16 or f32): two small kernels (`kernels.py`) gather the
cache's pages into head-major float32 K/V and swap q to head-major and the attention output back.

Decode (`step(token)`): the launches of one token (the same operations with m = 1: dp4a GEMVs,
fused Q4_K gate/up+SwiGLU, `paged_attention` over the block table) captured once in a
`pyptx.graph()`; each step writes the token's embedding row, position, cache slot and length
into device arrays the graph reads and replays it (`use_graph = False`: the same launches run
directly, for profiling and debugging).
"""
from __future__ import annotations

import numpy as np

import pyptx
import stdlib_kernels as sk
from stdlib_kernels import _validate as V

from .kernels import gather_heads, swap01
from .loader import GGUFModel, read_gguf

#: quantised GGUF types → fused matmul
_QMATMUL = {"Q4_K": sk.q4k_matmul, "Q6_K": sk.q6k_matmul, "Q8_0": sk.q8_0_matmul}
KV_DTYPES = ("f32", "f16")
_KV_NP = {"f32": np.float32, "f16": np.float16}


class _Linear:
    """A weight `[n, k]` on the device: raw bytes for a quantised type, else float32 Wᵀ."""

    def __init__(self, w):
        self.kind, self.n, self.k = w.kind, w.shape[0], w.shape[1]
        if w.kind in _QMATMUL:
            self.data = pyptx.to_device(np.ascontiguousarray(w.data).reshape(-1))
        else:
            self.data = pyptx.to_device(np.ascontiguousarray(w.dense().T))

    def __call__(self, x):
        if self.kind in _QMATMUL:
            return _QMATMUL[self.kind](x, self.data, self.n)
        return sk.gemm(x, self.data)


class Llama:
    """A llama GGUF model with a paged KV cache for one sequence (module docstring).

    Build it with `Llama.from_gguf(path)`; `forward(tokens)` → logits `[n, vocab]` (prefill,
    appends to the cache), `step(token)` → logits `[vocab]` (decode, one graph replay, or
    launch by launch with `use_graph = False`),
    `reset()`, `generate(prompt, max_new_tokens, temperature=0.0, seed=None)`, `kv_bytes()`.
    """

    def __init__(self, gguf: GGUFModel, max_seq: int | None = None, kv_dtype: str = "f16",
                 page_size: int = 16, use_graph: bool = True):
        h = gguf.hparams
        self.hparams, self.metadata, self.path = h, gguf.metadata, gguf.path
        if kv_dtype not in KV_DTYPES:
            raise ValueError(f"Llama: kv_dtype must be one of {KV_DTYPES}, got {kv_dtype!r}")
        if max_seq is None:
            max_seq = h.context_length
        max_seq = V.int_scalar("Llama", "max_seq", max_seq, 1, 2**31 - 1)
        page_size = V.int_scalar("Llama", "page_size", page_size, 1, 2**16)
        if page_size & (page_size - 1):
            raise ValueError(f"Llama: page_size must be a power of two, got {page_size}")
        self.max_seq, self.page_size, self.kv_dtype = max_seq, page_size, kv_dtype
        w = gguf.weights
        embd = w["token_embd.weight"]
        self._embd = embd                            # host rows for get_rows
        self.tied = gguf.tied_output()
        self.vocab = h.vocab

        def norm(name):
            return pyptx.to_device(np.ascontiguousarray(w[name].dense(), np.float32))

        self.layers = []
        for i in range(h.n_layers):
            b = f"blk.{i}."
            self.layers.append({
                "attn_norm": norm(b + "attn_norm.weight"),
                "ffn_norm": norm(b + "ffn_norm.weight"),
                **{t: _Linear(w[b + t + ".weight"]) for t in
                   ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                    "ffn_down")}})
        self.output_norm = norm("output_norm.weight")
        self.output = _Linear(embd if self.tied else w["output.weight"])
        # the KV cache: pages 0.. in order for the one sequence
        self.n_pages = V.ceil_div(max_seq, page_size)
        pool = (self.n_pages, h.n_kv_heads, page_size, h.head_dim)
        kv = _KV_NP[kv_dtype]
        self.k_pages = [pyptx.to_device(np.zeros(pool, kv)) for _ in range(h.n_layers)]
        self.v_pages = [pyptx.to_device(np.zeros(pool, kv)) for _ in range(h.n_layers)]
        self._table = pyptx.to_device(np.arange(self.n_pages, dtype=np.int32)[None, :])
        # decode inputs the graph reads
        self._x = pyptx.to_device(np.zeros((1, h.dim), np.float32))
        self._pos = pyptx.to_device(np.zeros(1, np.int32))
        self._len = pyptx.to_device(np.zeros(1, np.int32))
        self._graph = None
        self._graph_logits = None
        #: decode by one graph replay (True) or launch by launch (False: for profiling and
        #: debugging; the same launches and logits, results allocated per step)
        self.use_graph = bool(use_graph)
        self.length = 0

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_gguf(cls, path, max_seq: int | None = None, kv_dtype: str = "f16",
                  page_size: int = 16, device=None, use_graph: bool = True) -> "Llama":
        """Read a llama GGUF file (loader docstring) and upload it.  `max_seq` (default the
        file's context_length) sizes the KV cache; `kv_dtype` "f16" (llama.cpp's and vLLM's
        default: half the bytes on the bandwidth-bound decode path) or "f32"; `device` an index
        or pyptx device the model lives on (default the current one); `use_graph` False makes
        `step` run its launches one by one instead of replaying the decode graph (the
        `use_graph` attribute, changeable at any time)."""
        if kv_dtype not in KV_DTYPES:
            raise ValueError(f"Llama: kv_dtype must be one of {KV_DTYPES}, got {kv_dtype!r}")
        gguf = read_gguf(path)
        if device is None:
            return cls(gguf, max_seq, kv_dtype, page_size, use_graph)
        with pyptx.use_device(device):
            m = cls(gguf, max_seq, kv_dtype, page_size, use_graph)
        m._device = device
        return m

    # -- helpers -----------------------------------------------------------------------------
    def _tokens(self, tokens, what="tokens") -> np.ndarray:
        a = np.asarray(tokens)
        if a.ndim == 0:
            a = a.reshape(1)
        if a.ndim != 1 or a.size == 0:
            raise ValueError(f"Llama: {what} must be a non-empty 1-d sequence of token ids, "
                             f"got shape {a.shape}")
        if not (np.issubdtype(a.dtype, np.integer) or a.dtype == object):
            raise TypeError(f"Llama: {what} must be integer token ids, got {a.dtype}")
        ids = []
        for t in a.tolist():
            if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
                raise TypeError(f"Llama: {what} must be integer token ids, got {t!r}")
            if not 0 <= t < self.vocab:
                raise ValueError(f"Llama: token id {t} is outside the vocabulary [0, "
                                 f"{self.vocab})")
            ids.append(int(t))
        return np.array(ids, np.int64)

    def _room(self, n: int) -> None:
        if self.length + n > self.max_seq:
            raise ValueError(f"Llama: {self.length} cached + {n} new tokens = "
                             f"{self.length + n} exceeds max_seq {self.max_seq}")

    def embed(self, ids) -> np.ndarray:
        """float32 `[n, dim]` embedding rows, decoded on the host (llama.cpp's get_rows)."""
        return self._embd.dense(np.asarray(ids, np.int64)).reshape(len(ids), -1)

    def _device_ctx(self):
        d = getattr(self, "_device", None)
        if d is None:
            import contextlib
            return contextlib.nullcontext()
        return pyptx.use_device(d)

    # -- prefill -----------------------------------------------------------------------------
    def forward(self, tokens) -> np.ndarray:
        """Logits float32 `[n, vocab]` of the n tokens (appended to the KV cache)."""
        ids = self._tokens(tokens)
        n = ids.size
        self._room(n)
        with self._device_ctx():
            logits = self._prefill(ids).copy_to_host()
        self.length += n
        return logits

    def _prefill(self, ids):
        h = self.hparams
        n, past = ids.size, self.length
        H, KV, d = h.n_heads, h.n_kv_heads, h.head_dim
        L = past + n
        x = pyptx.to_device(self.embed(ids))
        pos = pyptx.to_device(np.arange(past, L, dtype=np.int32))
        slots = pos                                  # block table arange: slot = position
        for i, lw in enumerate(self.layers):
            y = sk.rmsnorm(x, lw["attn_norm"], h.eps)
            q = sk.rope(lw["attn_q"](y).reshape(n, H, d), pos, h.rope_theta, "gptj")
            k = sk.rope(lw["attn_k"](y).reshape(n, KV, d), pos, h.rope_theta, "gptj")
            v = lw["attn_v"](y).reshape(n, KV, d)
            sk.paged_kv_scatter(k, v, self.k_pages[i], self.v_pages[i], slots)
            # the cached L tokens head-major [KV, L, d] (f32), q head-major [H, n, d]
            kh = gather_heads(self.k_pages[i], L)
            vh = gather_heads(self.v_pages[i], L)
            o = sk.flash_attention(swap01(q), kh, vh, causal=True)
            a = swap01(o)                            # [n, H, d]
            x = sk.add(x, lw["attn_output"](a.reshape(n, H * d)))
            y = sk.rmsnorm(x, lw["ffn_norm"], h.eps)
            x = sk.add(x, lw["ffn_down"](self._mlp(lw, y, n)))
        return self.output(sk.rmsnorm(x, self.output_norm, h.eps))

    @staticmethod
    def _mlp(lw, y, m):
        g, u = lw["ffn_gate"], lw["ffn_up"]
        if g.kind == u.kind == "Q4_K" and m <= 8:   # the fused GEMV (decode)
            return sk.q4k_gate_up_swiglu(y, g.data, u.data, g.n)
        return sk.swiglu(g(y), u(y))

    # -- decode ------------------------------------------------------------------------------
    def step(self, token) -> np.ndarray:
        """Logits float32 `[vocab]` of one token (appended to the KV cache): one replay of
        the decode graph (captured on the first step), or the same launches one by one when
        `use_graph` is False."""
        ids = self._tokens([token] if np.ndim(token) == 0 else token, "token")
        if ids.size != 1:
            raise ValueError(f"Llama: step takes one token, got {ids.size}")
        self._room(1)
        t = self.length
        with self._device_ctx():
            self._x.copy_from_host(self.embed(ids))
            self._pos.copy_from_host(np.array([t], np.int32))
            self._len.copy_from_host(np.array([t + 1], np.int32))
            if not self.use_graph:
                logits = self._decode_launches().copy_to_host().reshape(-1)
            else:
                if self._graph is None:
                    with pyptx.graph() as g:
                        self._graph_logits = self._decode_launches()
                    self._graph = g
                self._graph.launch()
                logits = self._graph_logits.copy_to_host().reshape(-1)
        self.length += 1
        return logits

    def _decode_launches(self):
        """The launches of one decode step on the device inputs `_x`, `_pos`, `_len`."""
        h = self.hparams
        H, KV, d = h.n_heads, h.n_kv_heads, h.head_dim
        x = self._x
        for i, lw in enumerate(self.layers):
            y = sk.rmsnorm(x, lw["attn_norm"], h.eps)
            q = sk.rope(lw["attn_q"](y).reshape(1, H, d), self._pos, h.rope_theta, "gptj")
            k = sk.rope(lw["attn_k"](y).reshape(1, KV, d), self._pos, h.rope_theta, "gptj")
            v = lw["attn_v"](y).reshape(1, KV, d)
            sk.paged_kv_scatter(k, v, self.k_pages[i], self.v_pages[i], self._pos)
            a = sk.paged_attention(q, self.k_pages[i], self.v_pages[i], self._table, self._len)
            x = sk.add(x, lw["attn_output"](a.reshape(1, H * d)))
            y = sk.rmsnorm(x, lw["ffn_norm"], h.eps)
            x = sk.add(x, lw["ffn_down"](self._mlp(lw, y, 1)))
        return self.output(sk.rmsnorm(x, self.output_norm, h.eps))

    @property
    def decode_graph(self):
        """The captured decode graph (`launch()`, `launches`), None before the first graph
        step: replaying it alone redoes the last step's position (for timing)."""
        return self._graph

    # -- the rest ----------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the cached tokens (the next forward starts at position 0)."""
        self.length = 0

    def kv_bytes(self) -> int:
        """Bytes of the KV cache pools (all layers, K and V)."""
        return sum(p.nbytes for p in self.k_pages) + sum(p.nbytes for p in self.v_pages)

    def generate(self, prompt, max_new_tokens: int, temperature: float = 0.0,
                 seed=None, on_token=None) -> list:
        """Reset, prefill `prompt`, then decode `max_new_tokens` tokens: greedy (argmax) for
        temperature 0, else sampled from softmax(logits / temperature) with
        `np.random.default_rng(seed)`.  Returns the new ids; `on_token(id)` is called after
        each one."""
        ids = self._tokens(prompt, "prompt")
        max_new = V.int_scalar("Llama.generate", "max_new_tokens", max_new_tokens, 0,
                               2**31 - 1)
        temperature = V.float_scalar("Llama.generate", "temperature", temperature)
        if temperature < 0:
            raise ValueError(f"Llama.generate: temperature must be >= 0, got {temperature}")
        if ids.size + max(max_new - 1, 0) > self.max_seq:
            raise ValueError(f"Llama.generate: {ids.size} prompt + {max_new} new tokens need "
                             f"{ids.size + max_new - 1} cache slots; max_seq is {self.max_seq}")
        rng = np.random.default_rng(seed)
        self.reset()
        out = []
        if max_new == 0:
            return out
        logits = self.forward(ids)[-1]
        while True:
            tok = _pick(logits, temperature, rng)
            out.append(tok)
            if on_token is not None:
                on_token(tok)
            if len(out) == max_new:
                return out
            logits = self.step(tok)


def _pick(logits: np.ndarray, temperature: float, rng) -> int:
    if temperature == 0.0:
        return int(np.argmax(logits))
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max())
    return int(rng.choice(p.size, p=p / p.sum()))

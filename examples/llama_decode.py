"""A real decode loop: a tiny llama model written to a GGUF file, then run by
`stdlib_kernels.llama.Llama` (docs/llama.md) and checked against an independent reference.

    python examples/llama_decode.py [--tokens N] [--kv-dtype f16|f32]   # the tokens, then PASS

Model: 2 layers, dim 256, 4 query heads / 2 KV heads (head_dim 64), FFN 704, vocab 512,
context_length 128, random weights quantised like llama.cpp's Q4_K_M mix: Q4_K for attention
and gate/up, Q6_K for attn_v and the output head, Q8_0 for ffn_down (its input dim 704 is not a
multiple of 256, the Q4_K/Q6_K block), token embedding Q4_K, F32 norms.

`Llama.from_gguf(path, kv_dtype=..., page_size=8)` reads the file back and uploads it; the prompt
is prefilled with one `forward` (all its positions at once), then each new token is one greedy
`step` (one `pyptx.graph()` replay of the decode launches, captured on the first step).  Every
position's logits — the prompt's and each step's — are checked against `Reference`, a float64
numpy forward over the dequantised weights with a plain KV cache, and every greedy token must
match the reference's.

Bound on max |error| / max |logit|: with the default float16 KV cache, 2.5e-3 — ten times the
worst measured (2.48e-4, the same with 16 tokens as over the whole 128-token context; K and V
rounded to float16, a relative step of 2^-11 ≈ 4.9e-4); with `--kv-dtype f32`, 1e-3 (measured
worst 6.7e-5).  On a GPU it also prints the tokens/s of the replays and each kernel's share of
the GPU time of one step run launch by launch (`use_graph = False`).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFWriter

import pyptx
from stdlib_kernels import quant
from stdlib_kernels.llama import Llama
from stdlib_kernels.llama.model import KV_DTYPES

DIM, N_LAYERS, N_HEADS, N_KV, FFN, VOCAB = 256, 2, 4, 2, 704, 512
HEAD_DIM = DIM // N_HEADS
EPS, THETA = 1e-5, 10000.0                          # rope: adjacent pairs (llama.cpp's)
CONTEXT, PAGE = 128, 8                              # context_length; KV pages of 8 tokens
PROMPT = [1, 17, 300, 42]
TOL = {"f16": 2.5e-3, "f32": 1e-3}                  # max |err| / max |logit| (docstring)

# tensor name -> (shape [n, k] or [n], GGUF type)
TENSORS = {"token_embd.weight": ((VOCAB, DIM), QT.Q4_K),
           "output_norm.weight": ((DIM,), QT.F32),
           "output.weight": ((VOCAB, DIM), QT.Q6_K)}
for _l in range(N_LAYERS):
    TENSORS.update({
        f"blk.{_l}.attn_norm.weight": ((DIM,), QT.F32),
        f"blk.{_l}.attn_q.weight": ((DIM, DIM), QT.Q4_K),
        f"blk.{_l}.attn_k.weight": ((N_KV * HEAD_DIM, DIM), QT.Q4_K),
        f"blk.{_l}.attn_v.weight": ((N_KV * HEAD_DIM, DIM), QT.Q6_K),
        f"blk.{_l}.attn_output.weight": ((DIM, DIM), QT.Q4_K),
        f"blk.{_l}.ffn_norm.weight": ((DIM,), QT.F32),
        f"blk.{_l}.ffn_gate.weight": ((FFN, DIM), QT.Q4_K),
        f"blk.{_l}.ffn_up.weight": ((FFN, DIM), QT.Q4_K),
        f"blk.{_l}.ffn_down.weight": ((DIM, FFN), QT.Q8_0),
    })


def write_model(path: str, rng) -> None:
    w = GGUFWriter(path, "llama")
    w.add_block_count(N_LAYERS)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(FFN)
    w.add_head_count(N_HEADS)
    w.add_head_count_kv(N_KV)
    w.add_layer_norm_rms_eps(EPS)
    w.add_rope_freq_base(THETA)
    w.add_context_length(CONTEXT)
    for name, (shape, qtype) in TENSORS.items():
        if qtype == QT.F32:
            w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32))
            continue
        scale = 1.0 if name.startswith("token_embd") else 1.0 / np.sqrt(shape[1])
        dense = (rng.standard_normal(shape) * scale).astype(np.float32)
        w.add_tensor(name, quant.quantize(dense, qtype.name.lower()), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


class Reference:
    """The same model in float64 numpy over the file's weights (read with gguf-py's reader and
    dequantised by `stdlib_kernels.quant`, nothing of `stdlib_kernels.llama`), with a plain
    KV cache: `step(token, t)` → the logits of position t."""

    def __init__(self, path: str):
        reader = GGUFReader(path)
        self.w = {}
        for t in reader.tensors:
            kind, data = t.tensor_type.name, np.array(t.data)   # a copy: the map closes
            self.w[t.name] = (data.reshape(-1) if kind == "F32" else
                              quant.dequantize(data, kind.lower())).astype(np.float64)
        del reader                                   # release the memory map
        self.k = [[] for _ in range(N_LAYERS)]
        self.v = [[] for _ in range(N_LAYERS)]

    @staticmethod
    def _norm(x, w):
        return x / np.sqrt((x * x).mean() + EPS) * w

    @staticmethod
    def _rope(x, t):                                 # x [heads, head_dim], adjacent pairs
        i = np.arange(HEAD_DIM // 2)
        inv = (THETA ** (-2.0 * i / HEAD_DIM)).astype(np.float32).astype(np.float64)
        ang = t * inv
        a, b = x[:, 0::2], x[:, 1::2]
        out = np.empty_like(x)
        out[:, 0::2] = a * np.cos(ang) - b * np.sin(ang)
        out[:, 1::2] = b * np.cos(ang) + a * np.sin(ang)
        return out

    def step(self, token: int, t: int) -> np.ndarray:
        w = self.w
        x = w["token_embd.weight"][token]
        group = N_HEADS // N_KV
        for layer in range(N_LAYERS):
            p = f"blk.{layer}."
            h = self._norm(x, w[p + "attn_norm.weight"])
            q = self._rope((w[p + "attn_q.weight"] @ h).reshape(N_HEADS, HEAD_DIM), t)
            k = self._rope((w[p + "attn_k.weight"] @ h).reshape(N_KV, HEAD_DIM), t)
            self.k[layer].append(k)
            self.v[layer].append((w[p + "attn_v.weight"] @ h).reshape(N_KV, HEAD_DIM))
            ks, vs = np.stack(self.k[layer], 1), np.stack(self.v[layer], 1)   # [kv, t, d]
            att = np.empty((N_HEADS, HEAD_DIM))
            for hh in range(N_HEADS):
                s = ks[hh // group] @ q[hh] / np.sqrt(HEAD_DIM)
                e = np.exp(s - s.max())
                att[hh] = e / e.sum() @ vs[hh // group]
            x = x + w[p + "attn_output.weight"] @ att.reshape(-1)
            h = self._norm(x, w[p + "ffn_norm.weight"])
            g, u = w[p + "ffn_gate.weight"] @ h, w[p + "ffn_up.weight"] @ h
            x = x + w[p + "ffn_down.weight"] @ (g / (1.0 + np.exp(-g)) * u)
        return w["output.weight"] @ self._norm(x, w["output_norm.weight"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=16, help="tokens to generate (default 16)")
    ap.add_argument("--kv-dtype", choices=KV_DTYPES, default="f16",
                    help="KV cache element type (default f16, Llama's default)")
    args = ap.parse_args(argv)
    if args.tokens < 1 or len(PROMPT) + args.tokens - 1 > CONTEXT:
        raise SystemExit(f"--tokens must be 1 .. {CONTEXT - len(PROMPT) + 1} (the context)")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tiny-llama.gguf")
        write_model(path, np.random.default_rng(0))
        m = Llama.from_gguf(path, kv_dtype=args.kv_dtype, page_size=PAGE)
        ref = Reference(path)
    tol = TOL[args.kv_dtype]
    worst, ok, times = 0.0, True, []

    def check(logits, token, t) -> int:              # the greedy next token
        nonlocal worst, ok
        want = ref.step(token, t)
        err = float(np.abs(logits - want).max() / np.abs(want).max())
        worst = max(worst, err)
        nxt = int(np.argmax(logits))
        ok &= err <= tol and nxt == int(np.argmax(want))
        return nxt

    logits = m.forward(PROMPT)                       # prefill: the prompt's positions at once
    for t, token in enumerate(PROMPT):
        nxt = check(logits[t], token, t)
    out = [nxt]
    while len(out) < args.tokens:                    # decode: one graph replay per token
        t0 = time.perf_counter()
        logits = m.step(out[-1])
        times.append(time.perf_counter() - t0)
        out.append(check(logits, out[-1], m.length - 1))
    graph = m.decode_graph
    launches = graph.launches if graph is not None else 0
    ok &= len(out) == args.tokens and (args.tokens == 1 or launches > 0)
    print(f"prompt {PROMPT} -> generated {out}")
    print(f"{launches} launches per step in one graph; worst logit error {worst:.2e} "
          f"(max |err| / max |logit|, kv {args.kv_dtype}, bound {tol:g})")
    if pyptx.device() == "gpu" and len(times) > 1:
        _gpu_report(m, out[-1], times[1:])
    print(f"{'PASS' if ok else 'FAIL'} (on the {pyptx.device()})")
    return 0 if ok else 1


def _gpu_report(m: Llama, token: int, step_times) -> None:
    """Tokens/s of graph replays, and each kernel's share of the GPU time of one step run
    launch by launch (`use_graph = False`)."""
    print(f"{len(step_times) / sum(step_times):.1f} tokens/s (graph replay + logits copy)")
    if not hasattr(pyptx, "profile") or m.length >= m.max_seq:
        return
    m.use_graph = False
    with pyptx.profile() as prof:
        m.step(token)
    share: dict = {}
    for rec in prof.launches:
        share[rec.kernel] = share.get(rec.kernel, 0.0) + (rec.gpu_ms or 0.0)
    total = sum(share.values()) or 1.0
    for name, ms in sorted(share.items(), key=lambda kv: -kv[1]):
        print(f"  {name:28s} {100 * ms / total:5.1f}%")


if __name__ == "__main__":
    sys.exit(main())

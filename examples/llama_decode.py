"""A real decode loop: a tiny llama model written to a GGUF file, read back, and greedily
decoded with stdlib kernels only, through a paged KV cache and one launch graph per step.

    python examples/llama_decode.py [--tokens N]      # prints the tokens, then PASS

Model: 2 layers, dim 256, 4 query heads / 2 KV heads (head_dim 64), FFN 704, vocab 512, random
weights quantised like llama.cpp's Q4_K_M mix: Q4_K for attention and gate/up, Q6_K for
attn_v and the output head, Q8_0 for ffn_down (its input dim 704 is not a multiple of 256, the
Q4_K/Q6_K block), token embedding Q4_K (its row is decoded on the host, llama.cpp's get_rows),
F32 norms.  Per layer: rmsnorm → q/k/v fused quantised matmuls → rope → paged_kv_scatter →
paged_attention → o matmul → add → rmsnorm → q4k_gate_up_swiglu → down matmul → add; then
rmsnorm → output matmul → softmax.  Step 0 runs launch by launch (the activations are
DeviceArrays); the same step is captured once with `pyptx.graph()` and every later step is one
`g.launch()` after the host wrote the token's embedding, position, cache slot and length.
Every step's logits are checked against a float64 numpy forward pass over the dequantised
weights (max |error| / max |logit| ≤ 1e-3, same greedy token).
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
import stdlib_kernels as sk
from stdlib_kernels import quant

DIM, N_LAYERS, N_HEADS, N_KV, FFN, VOCAB = 256, 2, 4, 2, 704, 512
HEAD_DIM = DIM // N_HEADS
EPS, THETA, LAYOUT = 1e-5, 10000.0, "gptj"         # llama.cpp's LLAMA rope: adjacent pairs
PAGE, PAGES = 8, 16                                 # KV pages of 8 tokens, a pool of 16
PROMPT = [1, 17, 300, 42]
TOL = 1e-3

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
    w.add_context_length(PAGES * PAGE)
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


class Model:
    """The GGUF tensors: raw bytes on the device for the kernels, dequantised float64 copies
    for the reference, and the embedding table's bytes on the host for row lookups."""

    def __init__(self, reader: GGUFReader):
        self.dev, self.ref, self.kind = {}, {}, {}
        for t in reader.tensors:
            kind = t.tensor_type.name
            data = np.array(t.data)                     # a copy: the map closes with the reader
            self.kind[t.name] = kind
            if kind == "F32":
                self.ref[t.name] = data.astype(np.float64).reshape(-1)
                self.dev[t.name] = pyptx.to_device(data.reshape(-1).astype(np.float32))
            else:
                self.ref[t.name] = quant.dequantize(data, kind.lower()).astype(np.float64)
                self.dev[t.name] = pyptx.to_device(data.reshape(-1))
        self.embd_bytes = next(np.array(t.data) for t in reader.tensors
                               if t.name == "token_embd.weight")      # [vocab, row bytes]

    def embedding(self, token: int) -> np.ndarray:
        return quant.dequantize(self.embd_bytes[token:token + 1], "q4_k").astype(np.float32)


_MATMUL = {"Q4_K": sk.q4k_matmul, "Q6_K": sk.q6k_matmul, "Q8_0": sk.q8_0_matmul}


class Decoder:
    """Device state of one sequence: activations in, the paged KV cache, the step's inputs."""

    def __init__(self, model: Model, rng):
        self.m = model
        pool = (PAGES, N_KV, PAGE, HEAD_DIM)
        self.k_pages = [pyptx.to_device(np.zeros(pool, np.float32)) for _ in range(N_LAYERS)]
        self.v_pages = [pyptx.to_device(np.zeros(pool, np.float32)) for _ in range(N_LAYERS)]
        self.table = rng.permutation(PAGES).astype(np.int32)[None, :]   # pages in random order
        self.block_table = pyptx.to_device(self.table)
        self.x = pyptx.to_device(np.zeros((1, DIM), np.float32))
        self.pos = pyptx.to_device(np.zeros(1, np.int32))
        self.slot = pyptx.to_device(np.zeros(1, np.int32))
        self.seq_len = pyptx.to_device(np.zeros(1, np.int32))

    def set_inputs(self, token: int, t: int) -> None:
        self.x.copy_from_host(self.m.embedding(token))
        self.pos.copy_from_host(np.array([t], np.int32))
        self.slot.copy_from_host(np.array([self.table[0, t // PAGE] * PAGE + t % PAGE],
                                          np.int32))
        self.seq_len.copy_from_host(np.array([t + 1], np.int32))

    def _mm(self, x, name: str, n: int):
        return _MATMUL[self.m.kind[name]](x, self.m.dev[name], n)

    def step(self):
        """The launches of one token: returns the (logits, probabilities) DeviceArrays."""
        d, x = self.m.dev, self.x
        for layer in range(N_LAYERS):
            p = f"blk.{layer}."
            h = sk.rmsnorm(x, d[p + "attn_norm.weight"], EPS)
            q = self._mm(h, p + "attn_q.weight", DIM).reshape(1, N_HEADS, HEAD_DIM)
            k = self._mm(h, p + "attn_k.weight", N_KV * HEAD_DIM).reshape(1, N_KV, HEAD_DIM)
            v = self._mm(h, p + "attn_v.weight", N_KV * HEAD_DIM).reshape(1, N_KV, HEAD_DIM)
            q = sk.rope(q, self.pos, THETA, LAYOUT)
            k = sk.rope(k, self.pos, THETA, LAYOUT)
            sk.paged_kv_scatter(k, v, self.k_pages[layer], self.v_pages[layer], self.slot)
            a = sk.paged_attention(q, self.k_pages[layer], self.v_pages[layer], self.block_table,
                                   self.seq_len)
            x = sk.add(x, self._mm(a.reshape(1, DIM), p + "attn_output.weight", DIM))
            h = sk.rmsnorm(x, d[p + "ffn_norm.weight"], EPS)
            g = sk.q4k_gate_up_swiglu(h, d[p + "ffn_gate.weight"], d[p + "ffn_up.weight"], FFN)
            x = sk.add(x, self._mm(g, p + "ffn_down.weight", DIM))
        h = sk.rmsnorm(x, d["output_norm.weight"], EPS)
        logits = self._mm(h, "output.weight", VOCAB)
        return logits, sk.softmax(logits)


class Reference:
    """The same model in float64 numpy over the dequantised weights, with a plain KV cache."""

    def __init__(self, model: Model):
        self.w = model.ref
        self.m = model
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
        x = self.m.embedding(token).astype(np.float64).reshape(-1)
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
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tiny-llama.gguf")
        write_model(path, rng)
        reader = GGUFReader(path)
        model = Model(reader)
        del reader                                   # release the memory map
    dec, ref = Decoder(model, rng), Reference(model)
    steps = len(PROMPT) + args.tokens - 1
    if steps > PAGES * PAGE:
        raise SystemExit(f"at most {PAGES * PAGE - len(PROMPT) + 1} tokens fit the KV pool")
    token, out, worst, ok, graph = PROMPT[0], [], 0.0, True, None
    times = []
    for t in range(steps):
        dec.set_inputs(token, t)
        t0 = time.perf_counter()
        if graph is None:
            logits_d, probs_d = dec.step()           # step 0: launch by launch
            with pyptx.graph() as graph:             # the same launches, recorded once
                replay = dec.step()                  # (arrays the replays will fill)
        else:
            graph.launch()
        logits = logits_d.copy_to_host().reshape(-1)
        probs = probs_d.copy_to_host().reshape(-1)
        times.append(time.perf_counter() - t0)
        logits_d, probs_d = replay
        want = ref.step(token, t)
        err = np.abs(logits - want).max() / np.abs(want).max()
        worst = max(worst, err)
        nxt = int(np.argmax(logits))
        same = nxt == int(np.argmax(want)) and abs(probs.sum() - 1) < 1e-4
        ok &= err <= TOL and same
        token = PROMPT[t + 1] if t + 1 < len(PROMPT) else nxt
        if t + 1 >= len(PROMPT):
            out.append(nxt)
    ok &= len(out) == args.tokens and graph.launches > 0
    print(f"prompt {PROMPT} -> generated {out}")
    print(f"{graph.launches} launches per step in one graph; worst logit error "
          f"{worst:.2e} (max |err| / max |logit|, bound {TOL:g})")
    if pyptx.device() == "gpu" and len(times) > 1:
        _gpu_report(dec, times[1:])
    print(f"{'PASS' if ok else 'FAIL'} (on the {pyptx.device()})")
    return 0 if ok else 1


def _gpu_report(dec: Decoder, step_times) -> None:
    """Tokens/s of graph replays, and each kernel's share of the GPU time of a direct step."""
    print(f"{len(step_times) / sum(step_times):.1f} tokens/s (graph replay + logits copy)")
    if not hasattr(pyptx, "profile"):
        return
    with pyptx.profile() as prof:
        dec.step()
    share: dict = {}
    for rec in prof.launches:
        share[rec.kernel] = share.get(rec.kernel, 0.0) + (rec.gpu_ms or 0.0)
    total = sum(share.values()) or 1.0
    for name, ms in sorted(share.items(), key=lambda kv: -kv[1]):
        print(f"  {name:28s} {100 * ms / total:5.1f}%")


if __name__ == "__main__":
    sys.exit(main())

"""A tiny Llama-style transformer block in PyTorch whose norms, RoPE, attention and MLP are pyptx
kernels called as torch operators (`import pyptx.torch` registers `torch.ops.pyptx.*`), checked
against the same block in plain torch (float64).

    python examples/torch_block.py

    x → rmsnorm → q, k, v projections → rope → flash_attention (causal, GQA) → o proj → +x = h
    h → rmsnorm → q4k_gate_up_swiglu (Q4_K gate/up weights, fused) → down proj → +h = out

The projections are plain torch matmuls; the pyptx operators take and return torch tensors.
CPU tensors run on pyptx's CPU executor (a few seconds at these sizes); CUDA tensors (when torch
and pyptx both see a GPU) run on the GPU, on torch's current stream.
"""
import torch
import torch.nn.functional as F

import pyptx
import pyptx.torch  # noqa: F401  (registers torch.ops.pyptx)
from stdlib_kernels import quant

P = torch.ops.pyptx
SEQ, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN = 8, 256, 4, 2, 16, 64
EPS, THETA = 1e-5, 10000.0


def weights(g: torch.Generator, device) -> dict:
    def w(*shape, scale):
        return (torch.randn(*shape, generator=g) * scale).to(device)
    gate = quant.quantize_q4_k((torch.randn(FFN, HIDDEN, generator=g) * 0.06).numpy())
    up = quant.quantize_q4_k((torch.randn(FFN, HIDDEN, generator=g) * 0.06).numpy())
    return {
        "attn_norm": w(HIDDEN, scale=0.1) + 1, "mlp_norm": w(HIDDEN, scale=0.1) + 1,
        "wq": w(HEADS * HEAD_DIM, HIDDEN, scale=0.06),
        "wk": w(KV_HEADS * HEAD_DIM, HIDDEN, scale=0.06),
        "wv": w(KV_HEADS * HEAD_DIM, HIDDEN, scale=0.06),
        "wo": w(HIDDEN, HEADS * HEAD_DIM, scale=0.1),
        "gate_q4k": torch.from_numpy(gate).to(device), "up_q4k": torch.from_numpy(up).to(device),
        # what the Q4_K bytes decode to, for the torch reference
        "gate": torch.from_numpy(quant.dequantize_q4_k(gate)).to(device),
        "up": torch.from_numpy(quant.dequantize_q4_k(up)).to(device),
        "down": w(HIDDEN, FFN, scale=0.1),
    }


def block_pyptx(x, pos, W):
    """The block with pyptx operators for the norms, RoPE, attention and the gate/up MLP."""
    h = P.rmsnorm(x, W["attn_norm"], EPS)
    q = (h @ W["wq"].T).reshape(SEQ, HEADS, HEAD_DIM)
    k = (h @ W["wk"].T).reshape(SEQ, KV_HEADS, HEAD_DIM)
    v = (h @ W["wv"].T).reshape(SEQ, KV_HEADS, HEAD_DIM)
    q, k = P.rope(q, pos, THETA, "neox"), P.rope(k, pos, THETA, "neox")
    # flash_attention takes [heads, seq, head_dim]; KV_HEADS < HEADS is grouped-query attention
    a = P.flash_attention(q.transpose(0, 1).contiguous(), k.transpose(0, 1).contiguous(),
                          v.transpose(0, 1).contiguous(), True)
    x = x + a.transpose(0, 1).reshape(SEQ, HEADS * HEAD_DIM) @ W["wo"].T
    h = P.rmsnorm(x, W["mlp_norm"], EPS)
    return x + P.q4k_gate_up_swiglu(h, W["gate_q4k"], W["up_q4k"], FFN) @ W["down"].T


def rope_torch(x, pos):
    half = HEAD_DIM // 2
    i = torch.arange(half, dtype=torch.float64)
    ang = pos.double().cpu()[:, None] * THETA ** (-2.0 * i / HEAD_DIM)
    c, s = ang.cos()[:, None, :].to(x.device), ang.sin()[:, None, :].to(x.device)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * c - b * s, b * c + a * s], dim=-1)


def block_torch(x, pos, W):
    """The same block in plain torch, float64 (the Q4_K weights as their decoded values)."""
    W = {n: t.double() for n, t in W.items() if not n.endswith("_q4k")}
    x = x.double()
    h = F.rms_norm(x, (HIDDEN,), W["attn_norm"], EPS)
    q = rope_torch((h @ W["wq"].T).reshape(SEQ, HEADS, HEAD_DIM), pos).transpose(0, 1)
    k = rope_torch((h @ W["wk"].T).reshape(SEQ, KV_HEADS, HEAD_DIM), pos).transpose(0, 1)
    v = (h @ W["wv"].T).reshape(SEQ, KV_HEADS, HEAD_DIM).transpose(0, 1)
    rep = HEADS // KV_HEADS                     # query head h reads KV head h // rep
    k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + a.transpose(0, 1).reshape(SEQ, HEADS * HEAD_DIM) @ W["wo"].T
    h = F.rms_norm(x, (HIDDEN,), W["mlp_norm"], EPS)
    return x + (F.silu(h @ W["gate"].T) * (h @ W["up"].T)) @ W["down"].T


def main():
    gpu = pyptx.device() == "gpu" and torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    g = torch.Generator().manual_seed(0)
    W = weights(g, device)
    x = torch.randn(SEQ, HIDDEN, generator=g).to(device)
    pos = torch.arange(SEQ, dtype=torch.int32).to(device) + 5
    got = block_pyptx(x, pos, W)
    want = block_torch(x, pos, W)
    err = (got.double() - want).abs().max().item()
    # |out| ≲ 5; the float32 kernels and projections are good to ~1e-6 relative, and the Q4_K
    # gate/up product runs on the f32 GEMV path (no activation quantisation at 8 rows): measured
    # 2.5e-6, bound 3e-5
    where = "the GPU (CUDA tensors)" if gpu else "the CPU executor (torch CPU tensors)"
    print(f"transformer block ({SEQ} tokens, hidden {HIDDEN}, {HEADS} heads / {KV_HEADS} KV "
          f"heads) with torch.ops.pyptx on {where}: max |error| vs torch float64 = {err:.2e}")
    assert got.shape == x.shape and got.dtype == torch.float32
    assert err < 3e-5, err
    print("PASS")


if __name__ == "__main__":
    main()

"""GPU timing rows of the second tensor-core wave (the one-command GPU check's "timings" step):
the Hopper GEMM (`gemm(variant="wgmma")`, bf16 8192³) against torch's cuBLAS matmul, the Hopper
FlashAttention (`flash_attention(variant="wgmma")`, d = 128) against torch's
`scaled_dot_product_attention`, and quantised prefill on int8 tensor cores
(`q4k_matmul(path="mma")`) against the f16 dequantise + cuBLAS route.

Why a module of its own: gpu_timings.py times the kernels directly (their launch geometry is
part of what it measures); these rows go through the public stdlib functions, as a user calls
them (DeviceArrays in and `out=`, so no allocation or copy is timed), and they only make sense
on the GPU they were written for (the wgmma rows need sm_90: elsewhere they are skipped rows,
not failures).

The peer of the quantised prefill row is cuBLAS's f16 GEMM on weights dequantised once on the
host, so the dequantisation pass the real route also pays is not counted: the ratio is a lower
bound of pyptx's advantage (or an upper bound of its deficit).
"""
from __future__ import annotations

import numpy as np

from benchmarks.gpu_timings import (_absent, _peer_ms, attention_err, event_ms, make_row,
                                    random_q4k, rel_err, sdpa_peer, torch_events)


def _sm90() -> bool:
    from pyptx.runtime import profile
    return (profile.current_arch() or "").startswith("sm_90")


def _skipped(name: str, why: str) -> dict:
    return {"name": name, "ok": True, "error": None, "skipped": why, "unit": "", "ours": None,
            "ours_ms": None, "peer": "absent", "peer_value": None, "peer_ms": None,
            "speedup": None, "err": None, "tol": None, "note": f"skipped: {why}"}


def gemm_wgmma(m: int, n: int, k: int, repeat: int, peers: dict) -> dict:
    """bf16 [m, k] @ [k, n] -> f32 through gemm(variant='wgmma')."""
    name = f"gemm wgmma bf16 {m}x{k}x{n}"
    if not _sm90():
        return _skipped(name, "needs an sm_90 GPU (wgmma is sm_90a)")
    import ml_dtypes
    import pyptx
    from pyptx.runtime.device_array import device_empty
    from stdlib_kernels import gemm
    rng = np.random.default_rng(5)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    ad, bd = pyptx.to_device(a), pyptx.to_device(b)
    cd = device_empty((m, n), np.float32)
    ms = event_ms(lambda: gemm(ad, bd, variant="wgmma", out=cd), repeat)
    r = min(m, 16)
    err = rel_err(cd.copy_to_host()[:r], a[:r].astype(np.float64) @ b.astype(np.float64))
    peer, peer_ms = _absent(peers, "torch"), None
    if peers["torch"] is not None:
        torch = peers["torch"]
        ta = torch.from_numpy(a.astype(np.float32)).cuda().to(torch.bfloat16)
        tb = torch.from_numpy(b.astype(np.float32)).cuda().to(torch.bfloat16)
        peer, peer_ms = _peer_ms(f"torch {torch.__version__} matmul bf16 (cuBLAS)",
                                 lambda: torch.matmul(ta, tb), repeat, torch_events(torch))
    # f32 accumulation of k exact bf16 products: |err| <= k·2^-24·Σ|a||b| ~ 1e-4 relative for
    # k = 8192 with random signs; 1e-3 leaves a 10x margin
    return make_row(name, "TFLOP/s", 2.0 * m * n * k, ms, peer=peer, peer_ms=peer_ms, err=err,
                    tol=1e-3, note=f"target >= 0.7x cuBLAS; checked rows 0..{r - 1}")


def flash_attention_wgmma(heads: int, seq: int, d: int, causal: bool, repeat: int,
                          peers: dict) -> dict:
    name = f"flash_attention wgmma f16 {heads} heads x {seq} x {d}{' causal' if causal else ''}"
    if not _sm90():
        return _skipped(name, "needs an sm_90 GPU (wgmma is sm_90a)")
    import pyptx
    from pyptx.runtime.device_array import device_empty
    from stdlib_kernels import flash_attention
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((heads, seq, d)).astype(np.float16) for _ in range(3))
    qd, kd, vd = (pyptx.to_device(x) for x in (q, k, v))
    od = device_empty((heads, seq, d), np.float16)
    ms = event_ms(lambda: flash_attention(qd, kd, vd, causal, variant="wgmma", out=od), repeat)
    err = attention_err(od.copy_to_host(), q, k, v, causal)
    peer, peer_ms = sdpa_peer(peers, q, k, v, causal, repeat)
    flops = 4.0 * heads * seq * seq * d / (2 if causal else 1)
    # f16 output rounding (2^-11 relative) dominates; 1e-2 as the mma.sync row
    return make_row(name, "TFLOP/s", flops, ms, peer=peer, peer_ms=peer_ms, err=err, tol=1e-2,
                    note="target >= 0.7x torch SDPA; checked heads 0 and last")


def q4k_prefill_mma(m: int, n: int, k: int, repeat: int, peers: dict) -> dict:
    """x [m, k] f32 @ Q4_K [n, k]ᵀ on int8 tensor cores (q4k_matmul path='mma')."""
    import pyptx
    from pyptx.runtime.device_array import device_empty
    from stdlib_kernels import q4k_matmul
    from stdlib_kernels.quant import dequantize
    rng = np.random.default_rng(7)
    w = random_q4k(rng, n, k)
    x = rng.standard_normal((m, k)).astype(np.float32)
    wd, xd = pyptx.to_device(w), pyptx.to_device(x)
    od = device_empty((m, n), np.float32)
    ms = event_ms(lambda: q4k_matmul(xd, wd, n, path="mma", out=od), repeat)
    wf = dequantize(w, "q4_k").reshape(n, k)
    r = min(m, 8)
    ref = x[:r].astype(np.float64) @ wf.astype(np.float64).T
    err = rel_err(od.copy_to_host()[:r], ref)
    peer, peer_ms = _absent(peers, "torch"), None
    if peers["torch"] is not None:
        torch = peers["torch"]
        tx = torch.from_numpy(x.astype(np.float16)).cuda()
        tw = torch.from_numpy(wf.astype(np.float16)).cuda()
        peer, peer_ms = _peer_ms(f"torch {torch.__version__} f16 matmul on pre-dequantised "
                                 f"weights (cuBLAS; dequant not counted)",
                                 lambda: torch.matmul(tx, tw.T), repeat, torch_events(torch))
    # activations as hi + lo/254 int8 planes: ~1e-4 relative per dot product (docs/decisions.md);
    # 1e-2 as the dp4a GEMV row
    return make_row(f"q4k_matmul mma prefill {m}x{k} -> {n}", "TFLOP/s", 2.0 * m * n * k, ms,
                    peer=peer, peer_ms=peer_ms, err=err, tol=1e-2,
                    note=f"int8 IMMA, Q4_K weights; checked rows 0..{r - 1} against numpy")


def jobs(quick: bool, peers: dict, rep: int) -> list:
    """(name, thunk) rows of this module for gpu_timings.kernel_jobs."""
    if quick:
        return [
            ("gemm wgmma", lambda: gemm_wgmma(128, 128, 128, rep, peers)),
            ("flash_attention wgmma", lambda: flash_attention_wgmma(1, 128, 64, True, rep,
                                                                    peers)),
            ("q4k_matmul mma", lambda: q4k_prefill_mma(16, 64, 256, rep, peers)),
        ]
    return [
        ("gemm wgmma 8192", lambda: gemm_wgmma(8192, 8192, 8192, rep, peers)),
        ("flash_attention wgmma", lambda: flash_attention_wgmma(32, 4096, 128, False, rep,
                                                                peers)),
        ("flash_attention wgmma causal", lambda: flash_attention_wgmma(32, 4096, 128, True,
                                                                       rep, peers)),
        ("q4k_matmul mma 512", lambda: q4k_prefill_mma(512, 14336, 4096, rep, peers)),
    ]

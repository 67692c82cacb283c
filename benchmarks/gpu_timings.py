"""GPU timings of the stdlib against the best peer present, and the llama model's tokens/s.

    python -m benchmarks.gpu_timings kernels [--quick] [--json]
    python -m benchmarks.gpu_timings decode [--quick] [--json]

Used by `python -m benchmarks.gpu_check` (its `timings` and `decode` steps), runnable alone on
a machine with a GPU.  Every measurement is one row: pyptx's GPU time (CUDA events around
back-to-back launches of the kernel on device-resident inputs, no copies timed), the peer's time
measured the same way in the same process, and pyptx's result checked against numpy.  A peer
that is not installed is reported as absent; a pyptx error, or a result off by more than the
row's tolerance, makes the row (and the exit status) fail.

Rows (`kernels`): `gemm(variant="tensor_core")` f16 vs `torch.matmul` (cuBLAS) or
`cupy.matmul`; tensor-core `flash_attention` f16 vs `torch.nn.functional.scaled_dot_product_
attention`; softmax and rmsnorm (f32) vs torch; the Q4_K dp4a GEMV's weight bandwidth vs a
device-to-device copy (`cuMemcpyDtoDAsync`, bytes read + written); the launch overhead of a tiny
kernel with DeviceArrays vs CuPy's RawKernel (numba-cuda without CuPy; benchmarks/bench_launch.py).
Rows (`decode`): examples/llama_decode.py's tiny GGUF llama run by `stdlib_kernels.llama.Llama`,
greedy decoding with one `pyptx.graph()` replay per token (`m.step`: host writes the token's
inputs, one graph launch, logits copied back), launch by launch (`m.use_graph = False`), and the
GPU time of one replay.

The kernels are launched directly with the geometry their public function uses (the public
functions allocate their results per call, which would be timed too), as bench_stdlib.py does.
With `--json` each row is printed as one line `@@gpu_check {json}` as soon as it is measured.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import sys
import tempfile
import time
import traceback

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROW_PREFIX = "@@gpu_check "


# ---- peers and timers ----------------------------------------------------------------------------

def find_peers() -> dict:
    """{'torch': module or None, 'cupy': module or None, 'why': {name: why absent}}."""
    peers: dict = {"torch": None, "cupy": None, "why": {}}
    try:
        import torch
        if torch.cuda.is_available():
            peers["torch"] = torch
        else:
            peers["why"]["torch"] = "torch sees no CUDA device"
    except Exception as e:  # noqa: BLE001 - any import failure means "peer absent"
        peers["why"]["torch"] = _why_not("torch", e)
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
        peers["cupy"] = cupy
    except Exception as e:  # noqa: BLE001
        peers["why"]["cupy"] = _why_not("cupy", e)
    return peers


def _why_not(name: str, e: Exception) -> str:
    if isinstance(e, ModuleNotFoundError) and (e.name or "").split(".")[0] == name:
        return f"{name} not installed"
    return f"{name} not usable ({type(e).__name__}: {e})"


def pyptx_events():
    """(make an event, elapsed ms between two) with pyptx's own driver.Event."""
    from pyptx.runtime.driver import Event
    return Event, lambda s, e: e.elapsed_ms(s)


def torch_events(torch):
    def elapsed(s, e):
        e.synchronize()
        return s.elapsed_time(e)
    return (lambda: torch.cuda.Event(enable_timing=True)), elapsed


def cupy_events(cupy):
    def elapsed(s, e):
        e.synchronize()
        return cupy.cuda.get_elapsed_time(s, e)
    return cupy.cuda.Event, elapsed


def event_ms(fn, repeat: int, events=None, warmup: int = 2) -> float:
    """GPU milliseconds per call of `fn`: events recorded on the legacy default stream around
    `repeat` back-to-back calls (after `warmup` calls, which also compile)."""
    make, elapsed = events or pyptx_events()
    for _ in range(warmup):
        fn()
    start, end = make(), make()
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    return elapsed(start, end) / repeat


def rel_err(got, ref) -> float:
    """max |got - ref| / max |ref| (inf when got has a NaN)."""
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    if not np.isfinite(got).all():
        return math.inf
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


def make_row(name: str, unit: str, work: float, ours_ms: float, *, peer: str = "absent",
             peer_ms: float | None = None, err: float | None = None, tol: float | None = None,
             note: str = "") -> dict:
    """A result row: `work` units per call (FLOP for TFLOP/s, bytes for GB/s), times in ms.
    `speedup` is peer time / pyptx time (> 1: pyptx is faster)."""
    scale = {"TFLOP/s": 1e-12, "GB/s": 1e-9}[unit]
    row = {"name": name, "unit": unit, "ours": work / (ours_ms * 1e-3) * scale,
           "ours_ms": ours_ms, "peer": peer, "peer_value": None, "peer_ms": peer_ms,
           "speedup": None, "err": err, "tol": tol, "note": note, "error": None}
    if peer_ms:
        row["peer_value"] = work / (peer_ms * 1e-3) * scale
        row["speedup"] = peer_ms / ours_ms
    row["ok"] = err is None or (tol is not None and err <= tol)
    return row


def error_row(name: str, exc: BaseException) -> dict:
    missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    text = (f"missing module {missing!r}: carry its wheel (docs/benchmarks.md, 'Running the GPU "
            f"check on a machine without internet')" if missing
            else f"{type(exc).__name__}: {exc}")
    return {"name": name, "ok": False, "error": text,
            "traceback": traceback.format_exc(limit=8)[-3000:]}


def _peer_ms(name, fn, repeat, events):
    """(peer label, ms) or ('error: ...', None) when the peer itself fails (not a failure of
    pyptx)."""
    try:
        return name, event_ms(fn, repeat, events)
    except Exception as e:  # noqa: BLE001
        return f"{name}: error ({type(e).__name__}: {e})", None


def _absent(peers, *names) -> str:
    return "absent (" + "; ".join(peers["why"].get(n, f"{n} absent") for n in names) + ")"


# ---- the kernels ---------------------------------------------------------------------------------

def _mod(name):
    # the package re-binds some submodule names (gemm, softmax, ...) to the public functions
    return importlib.import_module(f"stdlib_kernels.{name}")


def gemm_tc(m: int, n: int, k: int, repeat: int, peers: dict) -> dict:
    import pyptx
    from pyptx.runtime.device_array import device_empty
    T, V = _mod("gemm_tc"), _mod("_validate")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    ad, bd = pyptx.to_device(a.view(np.uint16)), pyptx.to_device(b.view(np.uint16))
    cd = device_empty((m, n), np.float32)
    grid = (V.ceil_div(n, T.BN), V.ceil_div(m, T.BM))
    ms = event_ms(lambda: T.gemm_tc_kernel[grid, T.THREADS](cd, ad, bd, False, k % 8 == 0,
                                                           n % 8 == 0), repeat)
    r = min(m, 32)
    err = rel_err(cd.copy_to_host()[:r], a[:r].astype(np.float64) @ b.astype(np.float64))
    peer, peer_ms = _absent(peers, "torch", "cupy"), None
    if peers["torch"] is not None:
        torch = peers["torch"]
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        peer, peer_ms = _peer_ms(f"torch {torch.__version__} matmul f16 (cuBLAS)",
                                 lambda: torch.matmul(ta, tb), repeat, torch_events(torch))
    elif peers["cupy"] is not None:
        cp = peers["cupy"]
        ca, cb = cp.asarray(a), cp.asarray(b)
        peer, peer_ms = _peer_ms(f"cupy {cp.__version__} matmul f16 (cuBLAS)",
                                 lambda: cp.matmul(ca, cb), repeat, cupy_events(cp))
    return make_row(f"gemm tensor_core f16 {m}x{k}x{n}", "TFLOP/s", 2.0 * m * n * k, ms,
                    peer=peer, peer_ms=peer_ms, err=err, tol=2e-3,
                    note=f"f32 accumulate and result; checked rows 0..{r - 1} against numpy")


def _attention_ref(q, k, v, causal: bool) -> np.ndarray:
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ k.T / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape, bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def attention_err(out, q, k, v, causal: bool) -> float:
    """rel_err of the first and last heads of `out` against numpy."""
    return max(rel_err(out[h], _attention_ref(q[h], k[h], v[h], causal))
               for h in sorted({0, q.shape[0] - 1}))


def sdpa_peer(peers: dict, q, k, v, causal: bool, repeat: int):
    """(label, ms) of torch's scaled_dot_product_attention on the same [heads, seq, d] inputs."""
    if peers["torch"] is None:
        return _absent(peers, "torch"), None
    torch = peers["torch"]
    tq, tk, tv = (torch.from_numpy(x).cuda()[None] for x in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    return _peer_ms(f"torch {torch.__version__} scaled_dot_product_attention",
                    lambda: sdpa(tq, tk, tv, is_causal=causal), repeat, torch_events(torch))


def flash_attention(heads: int, seq: int, d: int, causal: bool, repeat: int,
                    peers: dict) -> dict:
    import pyptx
    from pyptx.runtime.device_array import device_empty
    F, V = _mod("flash_attention"), _mod("_validate")
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((heads, seq, d)).astype(np.float16) for _ in range(3))
    qd, kd, vd = (pyptx.to_device(x.view(np.uint16)) for x in (q, k, v))
    od = device_empty((heads, seq, d), np.uint16)
    scale_log2 = np.float32(F.LOG2E / math.sqrt(d))
    grid = (V.ceil_div(seq, F.BQ), heads)
    ms = event_ms(lambda: F.flash_attention_tc_kernel[grid, F.TC_THREADS](
        od, qd, kd, vd, 1, scale_log2, d, causal, False), repeat)
    err = attention_err(od.copy_to_host().view(np.float16), q, k, v, causal)
    peer, peer_ms = sdpa_peer(peers, q, k, v, causal, repeat)
    flops = 4.0 * heads * seq * seq * d / (2 if causal else 1)
    return make_row(f"flash_attention f16 {heads} heads x {seq} x {d}"
                    f"{' causal' if causal else ''}", "TFLOP/s", flops, ms, peer=peer,
                    peer_ms=peer_ms, err=err, tol=1e-2,
                    note="checked heads 0 and last against numpy")


def softmax(rows: int, cols: int, repeat: int, peers: dict) -> dict:
    import pyptx
    from pyptx.runtime.device_array import device_empty
    S = _mod("softmax")
    x = np.random.default_rng(2).standard_normal((rows, cols)).astype(np.float32)
    xd, od = pyptx.to_device(x), device_empty((rows, cols), np.float32)
    ms = event_ms(lambda: S._rows(od, xd), repeat)
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    err = rel_err(od.copy_to_host(), e / e.sum(-1, keepdims=True))
    peer, peer_ms = _absent(peers, "torch"), None
    if peers["torch"] is not None:
        torch = peers["torch"]
        tx = torch.from_numpy(x).cuda()
        peer, peer_ms = _peer_ms(f"torch {torch.__version__} softmax",
                                 lambda: torch.softmax(tx, -1), repeat, torch_events(torch))
    return make_row(f"softmax f32 {rows}x{cols}", "GB/s", 2.0 * x.nbytes, ms, peer=peer,
                    peer_ms=peer_ms, err=err, tol=1e-5, note="bytes read + written once")


def rmsnorm(rows: int, hidden: int, repeat: int, peers: dict) -> dict:
    import pyptx
    from pyptx.runtime.device_array import device_empty
    N, R = _mod("norms"), _mod("_rows")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((rows, hidden)).astype(np.float32)
    w = rng.standard_normal(hidden).astype(np.float32)
    xd, wd, od = pyptx.to_device(x), pyptx.to_device(w), device_empty((rows, hidden), np.float32)
    cfg = R.row_config(hidden)
    eps = 1e-6
    ms = event_ms(lambda: N.rmsnorm_kernel[rows, cfg.block](od, xd, wd, eps, *cfg), repeat)
    x64 = x.astype(np.float64)
    err = rel_err(od.copy_to_host(), x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + eps) * w)
    peer, peer_ms = _absent(peers, "torch"), None
    if peers["torch"] is not None:
        torch = peers["torch"]
        tx, tw = torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda()
        fused = getattr(torch.nn.functional, "rms_norm", None)
        if fused is not None:
            label, fn = "rms_norm", lambda: fused(tx, (hidden,), tw, eps)
        else:
            label, fn = "x * rsqrt(mean(x²) + eps) * w", \
                lambda: tx * torch.rsqrt(tx.pow(2).mean(-1, keepdim=True) + eps) * tw
        peer, peer_ms = _peer_ms(f"torch {torch.__version__} {label}", fn, repeat,
                                 torch_events(torch))
    return make_row(f"rmsnorm f32 {rows}x{hidden}", "GB/s", 2.0 * x.nbytes, ms, peer=peer,
                    peer_ms=peer_ms, err=err, tol=1e-4, note="bytes read + written once")


def random_q4k(rng, n: int, k: int) -> np.ndarray:
    """Random Q4_K bytes [n, k/256*144] with moderate fp16 scales (quantize() is slow)."""
    from stdlib_kernels.quant import SIZES
    per, nbytes = SIZES["q4_k"]
    raw = rng.integers(0, 256, (n * k // per, nbytes), dtype=np.uint8)
    for p in (0, 2):                                   # d and dmin
        d = (rng.uniform(0.5, 1.5, raw.shape[0]) * 0.01).astype(np.float16)
        raw[:, p:p + 2] = d.reshape(-1, 1).view(np.uint8)
    return raw.reshape(n, -1)


def device_copy_ms(nbytes: int, repeat: int) -> float:
    """GPU ms of one cuMemcpyDtoDAsync of `nbytes` between two fresh allocations."""
    from pyptx.runtime import driver
    from pyptx.runtime.device_array import device_empty
    src, dst = device_empty(nbytes, np.uint8), device_empty(nbytes, np.uint8)
    ctx = driver.context()
    return event_ms(lambda: ctx.call("cuMemcpyDtoDAsync", ctx.drv.cuMemcpyDtoDAsync,
                                     dst.device_pointer, src.device_pointer, nbytes, 0), repeat)


def q4k_gemv(n: int, k: int, repeat: int, copy_bytes: int) -> dict:
    """The decode GEMV (m = 1, dp4a path: act_q8 + q4k_dp4a, as q4k_matmul runs it)."""
    import pyptx
    from pyptx.runtime.device_array import device_empty
    G, QM, V, Q = _mod("qgemv"), _mod("qmatmul"), _mod("_validate"), _mod("quant")
    rng = np.random.default_rng(4)
    w = random_q4k(rng, n, k)
    x = rng.standard_normal((1, k)).astype(np.float32)
    wd, xd, od = pyptx.to_device(w.reshape(-1)), pyptx.to_device(x), device_empty(n, np.float32)
    xh, xl, xq, xs = QM.prepare_q8(xd)                 # scratch, allocated once
    flat = xd.reshape(-1)

    def launch():
        G.act_q8_kernel[V.ceil_div(xq.size, 128), 128](xh, xl, xq, xs, flat)
        G.q4k_dp4a_kernel[V.ceil_div(n, G.GEMV_WARPS), 32 * G.GEMV_WARPS](
            od, xh, xl, xq, xs, flat, wd, n, k, 1)
    ms = event_ms(launch, repeat)
    ref = Q.dequantize(w, "q4_k").astype(np.float64) @ x[0].astype(np.float64)
    got = od.copy_to_host().astype(np.float64)
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref)) if np.isfinite(got).all() \
        else math.inf
    try:
        cms = device_copy_ms(copy_bytes, repeat)
        peer = f"cuMemcpyDtoDAsync of {copy_bytes / 2**20:g} MiB (bytes read + written)"
        copy_rate = 2.0 * copy_bytes / (cms * 1e-3)
        # the time the weights' bytes would take at the copy's rate: the peer value is then
        # the copy's GB/s and the speed ratio the GEMV's fraction of it
        peer_ms = w.nbytes / copy_rate * 1e3
    except Exception as e:  # noqa: BLE001 - the copy is the yardstick, not the thing tested
        peer, peer_ms = f"device copy: error ({type(e).__name__}: {e})", None
    return make_row(f"q4k_matmul dp4a GEMV 1x{k} -> {n}", "GB/s", float(w.nbytes), ms,
                    peer=peer, peer_ms=peer_ms, err=err, tol=1e-2,
                    note=f"GB/s of Q4_K weight bytes ({w.nbytes / 1e6:.1f} MB read once); "
                         f"error = norm-relative vs numpy")


def launch_overhead(launches: int) -> dict:
    """µs per launch of bench_launch's 4-argument kernel with DeviceArrays vs its peer."""
    import pyptx
    from pyptx.runtime import driver
    from benchmarks.bench_launch import affine, peer, per_launch_us
    n_el = 1024
    x_host = np.random.default_rng(0).standard_normal(n_el).astype(np.float32)
    x, out = pyptx.to_device(x_host), pyptx.to_device(np.zeros_like(x_host))
    launch = affine[4, 256]
    ours = per_launch_us(lambda: launch(out, x, 2.0, n_el), driver.synchronize, launches)
    err = rel_err(out.copy_to_host(), 2.0 * x_host.astype(np.float64) + 1.0)
    try:
        peer_name, theirs = peer(x_host, n_el, launches)
    except ImportError as e:
        peer_name, theirs = f"absent (neither CuPy nor numba-cuda: {e})", None
    except Exception as e:  # noqa: BLE001
        peer_name, theirs = f"error ({type(e).__name__}: {e})", None
    return {"name": f"launch overhead, 4 arguments (2 DeviceArrays + 2 scalars), {launches} "
                    f"back-to-back launches", "unit": "µs/launch", "ours": ours,
            "ours_ms": ours * 1e-3, "peer": peer_name, "peer_value": theirs,
            "peer_ms": theirs * 1e-3 if theirs else None,
            "speedup": theirs / ours if theirs else None, "err": err, "tol": 1e-6,
            "note": "host wall clock (bench_launch.per_launch_us); target <= 6 µs",
            "error": None, "ok": err <= 1e-6}


def kernel_jobs(quick: bool, peers: dict) -> list:
    """(name, thunk) of every kernel row; `quick`: small shapes (tests, the fake driver)."""
    rep = 3 if quick else 20
    from benchmarks import gpu_timings_tc2      # its rows use this module's helpers
    if quick:
        return [
            ("gemm_tc", lambda: gemm_tc(64, 64, 64, rep, peers)),
            ("flash_attention", lambda: flash_attention(2, 64, 64, True, rep, peers)),
            ("softmax", lambda: softmax(4, 1024, rep, peers)),
            ("rmsnorm", lambda: rmsnorm(4, 1024, rep, peers)),
            ("q4k_matmul", lambda: q4k_gemv(64, 256, rep, 1 << 16)),
            ("launch", lambda: launch_overhead(200)),
        ] + gpu_timings_tc2.jobs(True, peers, rep)
    return [
        ("gemm_tc 4096", lambda: gemm_tc(4096, 4096, 4096, rep, peers)),
        ("gemm_tc 2048", lambda: gemm_tc(2048, 2048, 2048, rep, peers)),
        ("flash_attention", lambda: flash_attention(32, 2048, 128, False, rep, peers)),
        ("flash_attention causal", lambda: flash_attention(32, 2048, 128, True, rep, peers)),
        ("flash_attention d64", lambda: flash_attention(32, 4096, 64, True, rep, peers)),
        ("softmax", lambda: softmax(64, 32000, rep, peers)),
        ("rmsnorm", lambda: rmsnorm(1024, 4096, rep, peers)),
        ("q4k_matmul 14336", lambda: q4k_gemv(14336, 4096, rep, 256 << 20)),
        ("q4k_matmul 4096x14336", lambda: q4k_gemv(4096, 14336, rep, 256 << 20)),
        ("launch", lambda: launch_overhead(20000)),
    ] + gpu_timings_tc2.jobs(False, peers, rep)


# ---- the llama decode ----------------------------------------------------------------------------

def load_example(name: str):
    """examples/NAME.py as a module (its `main` is not run)."""
    path = os.path.join(ROOT, "examples", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_gpu_check_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def decoder_setup(kv_dtype: str = "f16"):
    """(the llama_decode example module, its model as a `stdlib_kernels.llama.Llama` and the
    example's float64 Reference) on the tiny GGUF the example writes."""
    from stdlib_kernels.llama import Llama
    ld = load_example("llama_decode")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tiny-llama.gguf")
        ld.write_model(path, np.random.default_rng(0))
        m = Llama.from_gguf(path, kv_dtype=kv_dtype, page_size=ld.PAGE)
        ref = ld.Reference(path)
    return ld, m, ref


def decode_rows(quick: bool) -> list:
    """Tokens/s of examples/llama_decode.py's model: graph replays, direct launches, GPU time."""
    ld, m, ref = decoder_setup()
    tol = ld.TOL[m.kv_dtype]
    positions = m.max_seq                              # the model's context
    # one verified pass, as the example: the prompt prefilled, then greedy graph steps; every
    # position's logits against the float64 reference
    verify = 6 if quick else 24
    prefill = m.forward(ld.PROMPT)
    worst, same = 0.0, True
    for t in range(verify):
        if t < len(ld.PROMPT):
            token, got = ld.PROMPT[t], prefill[t]
        else:
            token = int(np.argmax(got))                # greedy
            got = m.step(token)
        want = ref.step(token, t)
        worst = max(worst, rel_err(got, want))
        same &= int(np.argmax(got)) == int(np.argmax(want))
    rounds = 1 if quick else 3
    steps = 8 if quick else positions
    t0 = time.perf_counter()
    for _ in range(rounds):                            # m.step: inputs written, one replay,
        m.reset()                                      # logits copied back
        token = ld.PROMPT[0]
        for t in range(steps):
            token = int(np.argmax(m.step(token)))
    graph_tps = rounds * steps / (time.perf_counter() - t0)
    g = m.decode_graph
    direct = 4 if quick else 32
    m.use_graph = False                                # the same launches one by one
    m.reset()
    t0 = time.perf_counter()
    token = ld.PROMPT[0]
    for t in range(direct):
        token = int(np.argmax(m.step(token)))
    direct_tps = direct / (time.perf_counter() - t0)
    m.use_graph = True
    replay_ms = event_ms(g.launch, 5 if quick else 100)
    h = m.hparams
    model_desc = (f"{h.n_layers} layers, dim {h.dim}, vocab {h.vocab}, Q4_K/Q6_K/Q8_0 "
                  f"weights, {m.kv_dtype} KV cache, {g.launches} launches per step")
    ok = worst <= tol and same

    def row(name, tps, note, err=None):
        return {"name": name, "unit": "tokens/s", "ours": tps, "ours_ms": 1e3 / tps,
                "peer": "none (no llama.cpp here)", "peer_value": None, "peer_ms": None,
                "speedup": None, "err": err, "tol": tol if err is not None else None,
                "note": note, "error": None, "ok": ok if err is not None else True}
    return [
        row("llama decode: graph replay per token", graph_tps,
            f"{model_desc}; Llama.step: host writes the token's inputs, one graph launch, "
            f"logits copied back, argmax; {rounds} x {steps} tokens; first {verify} positions "
            f"(prompt prefilled, then steps) checked against the float64 reference (worst "
            f"logit error {worst:.2e}, same greedy tokens: {same})", err=worst),
        row("llama decode: launch by launch per token", direct_tps,
            f"Llama.step with use_graph = False ({g.launches} launches, results allocated per "
            f"step) + logits copy; {direct} tokens"),
        row("llama decode: GPU time of one graph replay", 1e3 / replay_ms,
            f"CUDA events around back-to-back launches of the decode graph: "
            f"{replay_ms * 1e3:.1f} µs per step (the GPU-bound ceiling of tokens/s)"),
    ]


# ---- running and printing ------------------------------------------------------------------------

def run_jobs(jobs, emit) -> bool:
    """Run each (name, thunk); emit every row (an exception becomes an error row).  True when
    every row is ok."""
    ok = True
    for name, job in jobs:
        try:
            rows = job()
        except Exception as e:  # noqa: BLE001 - a failing row is reported, the others run
            rows = error_row(name, e)
        for row in rows if isinstance(rows, list) else [rows]:
            ok &= bool(row.get("ok"))
            emit(row)
    return ok


def _fmt(v, unit=""):
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def format_rows(rows: list) -> str:
    """Markdown table of result rows (an error row shows its error)."""
    lines = ["| measurement | pyptx | peer | peer value | pyptx speed / peer | check | ok |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['name']} | **error**: {r['error'].replace('|', '/')} | | | | "
                         f"| **no** |")
            continue
        unit = r.get("unit", "")
        check = "—" if r.get("err") is None else (
            f"err {r['err']:.1e}" + (f" (tol {r['tol']:.0e})" if r.get("tol") else ""))
        speed = "—" if r.get("speedup") is None else f"{r['speedup']:.2f}×"
        peer_val = "—" if r.get("peer_value") is None else f"{_fmt(r['peer_value'])} {unit}"
        lines.append(f"| {r.get('name')} | {_fmt(r.get('ours'))} {unit} | "
                     f"{str(r.get('peer')).replace('|', '/')} | {peer_val} | {speed} | {check} | "
                     f"{'yes' if r.get('ok') else '**no**'} |")
    notes = [f"* {r['name']}: {r['note']}" for r in rows if r.get("note")]
    tracebacks = [f"{r['name']}:\n\n```text\n{r['traceback'].rstrip()}\n```" for r in rows
                  if r.get("traceback")]
    return "\n".join(lines + ([""] + notes if notes else [])
                     + ([""] + tracebacks if tracebacks else []))


def parse_rows(text: str) -> list:
    """The rows a `--json` run printed (lines starting with ROW_PREFIX); others are ignored."""
    rows = []
    for line in text.splitlines():
        if line.startswith(ROW_PREFIX):
            try:
                rows.append(json.loads(line[len(ROW_PREFIX):]))
            except ValueError:
                continue
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("kernels", "decode"))
    ap.add_argument("--quick", action="store_true", help="small shapes, few repeats")
    ap.add_argument("--json", action="store_true", help=f"one '{ROW_PREFIX.strip()} {{json}}' "
                                                        f"line per row, as it is measured")
    args = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    import pyptx
    try:
        dev = pyptx.device()
    except Exception as e:  # noqa: BLE001 - PYPTX_DEVICE=gpu without a GPU
        dev, why = "cpu", str(e)
    else:
        from pyptx.runtime.launch import device_reason
        why = device_reason()
    if dev != "gpu":
        print(f"no GPU ({why}): GPU timings are only measured on a GPU")
        return 2
    rows = []

    def emit(row):
        rows.append(row)
        if args.json:
            print(ROW_PREFIX + json.dumps(row), flush=True)
    if args.what == "kernels":
        ok = run_jobs(kernel_jobs(args.quick, find_peers()), emit)
    else:
        ok = run_jobs([("llama decode", lambda: decode_rows(args.quick))], emit)
    if not args.json:
        print(format_rows(rows))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

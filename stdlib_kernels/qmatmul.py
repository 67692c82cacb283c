"""Fused GGUF matmuls: `q4k_matmul`, `q6k_matmul`, `q8_0_matmul`, `q4k_gate_up_swiglu`.

`x @ dequant(w).T` with `w` the raw GGUF bytes of an `[n, k]` weight; the weights stay packed in
global memory and are decoded in registers (GEMV) or once per 64-row tile (tiled).  Paths:

* `"dp4a"` (`qgemv.*_dp4a_kernel`): activations quantised to int8 + an int8 residual per 32
  (`act_q8_kernel`), integer dot products with `dp4a`, the leanest GEMV.
* `"f32"` (`qgemv.*_gemv_kernel`): float dequantisation in registers, f32 products.
* `"tiled"` (`qtiled.qmatmul_tiled_kernel`): 64×64 output tiles, x and the dequantised weights
  staged in shared memory, each weight decoded once per 64 activation rows (SIMT f32).
* `"mma"` (`qmma.qmma_kernel`): llama.cpp's MMQ on int8 tensor cores (sm_80+): the dp4a path's
  int8 activations (hi + residual planes) times weights decoded to int8 once per 64×64 tile,
  `mma.sync` m16n8k32 with int32 sums, block scales applied in f32 per 32 k.
* `"auto"`: `"dp4a"` for m ≤ 8 (decode: memory-bound, every weight byte read once per launch;
  every supported arch, sm_75+, has dp4a), `"mma"` for m > 8 (prefill: compute-bound; `"tiled"`
  on sm_75, which has no int8 mma).  8 is llama.cpp's own switch from MMVQ to MMQ, and the
  SASS agrees (docs/decisions.md, "int8 tensor-core prefill").

The GEMV paths take any m: activation rows go 8 at a time (a launch per 8 rows, the weights
re-read from L2/DRAM each time).

Non-finite and huge activations follow the float product x @ dequant(w).T on every path: ±inf
where it is ±inf, NaN only where it has a NaN (inf·0, inf − inf, a NaN in x), finite results for
activations up to FLT_MAX as long as the product is finite.  The GEMV kernels recompute an output
whose fast sum is not finite in plain floats (`qgemv.write_rows`); see `qgemv`.
"""
from __future__ import annotations

import numpy as np

from . import _validate as V
from . import qgemv as G
from ._args import check_out, stdlib_function
from . import qmma as QM
from . import qtiled as QT
from .quant import SIZES

PATHS = ("auto", "f32", "dp4a", "tiled", "mma")
#: kernels by format: (f32 GEMV, dp4a GEMV, tiled FMT)
_KERNELS = {
    "q4_k": (G.q4k_gemv_kernel, G.q4k_dp4a_kernel, QT.Q4_K),
    "q6_k": (G.q6k_gemv_kernel, G.q6k_dp4a_kernel, QT.Q6_K),
    "q8_0": (G.q8_0_gemv_kernel, G.q8_0_dp4a_kernel, QT.Q8_0),
}
#: the MMQ kernel's FMT per format
_MMA_FMT = {"q4_k": QM.Q4_K, "q6_k": QM.Q6_K, "q8_0": QM.Q8_0
}
_I32_MAX = 2**31 - 1


def _alloc(shape, dtype=np.float32) -> np.ndarray:
    """Every result and scratch array of this module (one place, so tests can poison them)."""
    return np.empty(shape, dtype)


def _alloc_like(shape, dtype, like):
    """A result or scratch array where `like` lives: `_alloc` for numpy, else the device."""
    return V.empty(shape, dtype, like) if V.is_device(like) else _alloc(shape, dtype)


def check_weight(fn: str, name: str, w, n: int, k: int, fmt: str) -> np.ndarray:
    """`w` as flat C-contiguous uint8 bytes of an [n, k] `fmt` weight (numpy or DeviceArray)."""
    per, nbytes = SIZES[fmt]
    if V.is_device(w) and w.dtype == np.uint8:          # device-resident bytes: as numpy's
        row = k // per * nbytes
        if w.ndim == 2 and w.shape != (n, row) or w.ndim == 1 and w.size != n * row \
                or w.ndim not in (1, 2):
            raise ValueError(f"{fn}: {name} must be [{n}, {row}] or flat [{n * row}] bytes, "
                             f"got shape {w.shape}")
        return w.reshape(-1)
    if not isinstance(w, np.ndarray):
        raise TypeError(f"{fn}: {name} must be a uint8 array (raw GGUF {fmt.upper()} bytes; "
                        f"{V.ARRAY_KINDS}), got {type(w).__name__}")
    if w.dtype != np.uint8:
        raise TypeError(f"{fn}: {name} must be uint8 (raw GGUF {fmt.upper()} bytes), got "
                        f"{w.dtype}")
    row = k // per * nbytes
    if w.ndim == 2 and w.shape != (n, row) or w.ndim == 1 and w.size != n * row \
            or w.ndim not in (1, 2):
        raise ValueError(f"{fn}: {name} must be [{n}, {row}] or flat [{n * row}] bytes "
                         f"({n} rows of {k // per} {fmt.upper()} blocks of {nbytes} bytes), "
                         f"got shape {w.shape}")
    if w.size > _I32_MAX:
        raise ValueError(f"{fn}: {name} has more than 2**31-1 bytes; split the matrix by rows")
    return np.ascontiguousarray(w).reshape(-1)


def check_x(fn: str, x, fmt: str) -> tuple[np.ndarray, bool]:
    """`x` as C-contiguous float32 [m, k] (and whether it was 1-d); k a multiple of the block."""
    x_in = V.float32_array(fn, "x", x, (1, 2))
    x2 = x_in.reshape(1, -1) if x_in.ndim == 1 else x_in
    per = SIZES[fmt][0]
    if x2.shape[1] == 0 or x2.shape[1] % per:
        raise ValueError(f"{fn}: x's last dimension (k = {x2.shape[1]}) must be a positive "
                         f"multiple of {per} ({fmt.upper()} blocks)")
    if x2.size > _I32_MAX:
        raise ValueError(f"{fn}: x has more than 2**31-1 elements")
    return x2, x_in.ndim == 1


def check_n(fn: str, n, x2: np.ndarray) -> int:
    """The weight's row count; the [m, n] result must stay addressable with i32 indices."""
    n = V.int_scalar(fn, "n", n, 1, _I32_MAX)
    if x2.shape[0] * n > _I32_MAX:
        raise ValueError(f"{fn}: the result [{x2.shape[0]}, {n}] has more than 2**31-1 "
                         f"elements; split x by rows")
    return n


def prepare_sums(x2: np.ndarray) -> np.ndarray:
    """Σx per 16 activations (the f32 GEMV's offsets and Q4_K minimums)."""
    xs = _alloc_like(x2.size // 16, np.float32, x2)
    G.act_sums_kernel[V.ceil_div(xs.size, 256), 256](xs, x2.reshape(-1))
    return xs


def prepare_q8(x2: np.ndarray):
    """(hi int8, residual int8, scale xd per 32, Σ(hi + lo/254) per 16) of the activations for
    dp4a (x ≈ xd·(hi + lo/254); the sums in units of xd)."""
    flat = x2.reshape(-1)
    xh = _alloc_like(flat.size, np.int8, flat)
    xl = _alloc_like(flat.size, np.int8, flat)
    xd = _alloc_like(flat.size // 32, np.float32, flat)
    xs = _alloc_like(flat.size // 16, np.float32, flat)
    G.act_q8_kernel[V.ceil_div(xd.size, 128), 128](xh, xl, xd, xs, flat)
    return xh, xl, xd, xs


def _gemv_rows(m: int):
    """(first row, row count) chunks of at most GEMV_MAX_M activation rows."""
    return [(r, min(G.GEMV_MAX_M, m - r)) for r in range(0, m, G.GEMV_MAX_M)]


def result(fn: str, out, shape, like):
    """The float32 result of `shape`: `out` (checked as `_args.result` does) or `_alloc_like`."""
    if out is None:
        return _alloc_like(shape, np.float32, like)
    check_out(fn, out, tuple(shape), np.float32, like)
    return out


def int8_tensor_cores() -> bool:
    """Whether the arch kernels compile for (device 0's, or sm_80 on the CPU executor) has the
    int8 `mma.sync` of the "mma" path (sm_80+); on sm_75 "auto" prefill takes "tiled"."""
    from pyptx.target import default_arch
    return int(default_arch()[3:]) >= 80


def run(fmt: str, x2: np.ndarray, w: np.ndarray, n: int, path: str, out=None) -> np.ndarray:
    """out [m, n] = x2 @ dequant(w).T on the chosen path (arguments already checked; `out`, if
    given, a checked [m, n] float32 array, else a new one)."""
    m, k = x2.shape
    if out is None:
        out = _alloc_like((m, n), np.float32, x2)
    if m == 0:
        return out
    if path == "auto":
        path = "dp4a" if m <= G.GEMV_MAX_M else "mma" if int8_tensor_cores() else "tiled"
    f32_kernel, dp4a_kernel, tiled_fmt = _KERNELS[fmt]
    grid = V.ceil_div(n, G.GEMV_WARPS)
    block = 32 * G.GEMV_WARPS
    if path == "mma":
        xh, xl, xd, xs = prepare_q8(x2)
        QM.qmma_kernel[(V.ceil_div(n, QM.BN), V.ceil_div(m, QM.BM)), QM.THREADS](
            out.reshape(-1), xh, xl, xd, xs, x2.reshape(-1), w, m, n, k, _MMA_FMT[fmt])
    elif path == "tiled":
        QT.qmatmul_tiled_kernel[(V.ceil_div(n, QT.TILE), V.ceil_div(m, QT.TILE)), QT.THREADS](
            out, x2.reshape(-1), w, m, n, k, tiled_fmt)
    elif path == "f32":
        xs = prepare_sums(x2)
        for r, rows in _gemv_rows(m):
            f32_kernel[grid, block](out[r:r + rows].reshape(-1), x2[r:r + rows].reshape(-1),
                                    xs[r * k // 16:(r + rows) * k // 16], w, n, k, rows)
    else:
        xh, xl, xd, xs = prepare_q8(x2)
        for r, rows in _gemv_rows(m):
            a, b = r * k, (r + rows) * k
            xq = (xh[a:b], xl[a:b], xd[a // 32:b // 32])
            if fmt != "q8_0":
                xq += (xs[a // 16:b // 16],)
            dp4a_kernel[grid, block](out[r:r + rows].reshape(-1), *xq,
                                     x2[r:r + rows].reshape(-1), w, n, k, rows)
    return out


def _matmul(fn: str, fmt: str, x, w, n, path, out) -> np.ndarray:
    path = V.choice(fn, "path", path, PATHS)
    x2, was_1d = check_x(fn, x, fmt)
    n = check_n(fn, n, x2)
    w = check_weight(fn, "w", w, n, x2.shape[1], fmt)
    res = result(fn, out, (n,) if was_1d else (x2.shape[0], n), x2)
    run(fmt, x2, w, n, path, res.reshape(x2.shape[0], n))
    return res


@stdlib_function
def q4k_matmul(x, w, n: int, path: str = "auto", *, out=None):
    """out = x @ dequant_q4_k(w).T, dequantisation fused into the kernel.

    `x` float32 `[m, k]` or `[k]` (k a multiple of 256); `w` the raw GGUF Q4_K bytes of an `[n, k]`
    weight (uint8 `[n, k // 256 * 144]` or flat); returns float32 `[m, n]` (`[n]` for 1-d x),
    or fills `out`.  `path` is "auto", "f32", "dp4a" or "tiled" (module docstring).
    """
    return _matmul("q4k_matmul", "q4_k", x, w, n, path, out)


@stdlib_function
def q6k_matmul(x, w, n: int, path: str = "auto", *, out=None):
    """out = x @ dequant_q6_k(w).T; as q4k_matmul, w uint8 `[n, k // 256 * 210]` or flat."""
    return _matmul("q6k_matmul", "q6_k", x, w, n, path, out)


@stdlib_function
def q8_0_matmul(x, w, n: int, path: str = "auto", *, out=None):
    """out = x @ dequant_q8_0(w).T; as q4k_matmul, w uint8 `[n, k // 32 * 34]` or flat (k a
    multiple of 32)."""
    return _matmul("q8_0_matmul", "q8_0", x, w, n, path, out)


@stdlib_function
def q4k_gate_up_swiglu(x, w_gate, w_up, n: int, *, out=None):
    """out = swiglu(x @ dequant(w_gate).T, x @ dequant(w_up).T) with Q4_K weights, one pass.

    One warp per output column reads the gate and the up row together and shares every load of x
    between them (`qgemv.q4k_gate_up_kernel`, f32 path, up to 8 activation rows per launch).
    Shapes as q4k_matmul; returns `[m, n]` (`[n]` for 1-d x), or fills `out`.
    """
    fn = "q4k_gate_up_swiglu"
    x2, was_1d = check_x(fn, x, "q4_k")
    n = check_n(fn, n, x2)
    k = x2.shape[1]
    wg = check_weight(fn, "w_gate", w_gate, n, k, "q4_k")
    wu = check_weight(fn, "w_up", w_up, n, k, "q4_k")
    m = x2.shape[0]
    res = result(fn, out, (n,) if was_1d else (m, n), x2)
    out = res.reshape(m, n)
    if m:
        xs = prepare_sums(x2)
        for r, rows in _gemv_rows(m):
            G.q4k_gate_up_kernel[V.ceil_div(n, G.GEMV_WARPS), 32 * G.GEMV_WARPS](
                out[r:r + rows].reshape(-1), x2[r:r + rows].reshape(-1),
                xs[r * k // 16:(r + rows) * k // 16], wg, wu, n, k, rows)
    return res

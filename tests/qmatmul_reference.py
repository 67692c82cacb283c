"""Reference and error bounds for the fused GGUF matmuls (tests/test_stdlib_qmatmul*.py).

The reference is float64 on gguf-py's dequantised weights (`gguf.quants.dequantize`, independent
of `stdlib_kernels.quant`), summed term by term.  The bounds come from an error analysis of each
path, per output element, never a blanket tolerance; u = 2^-24 is the f32 unit roundoff and K
the inner dimension:

* plain f32 accumulation (`"tiled"`, and the float fallback of the GEMV kernels for non-finite
  sums): Σ_p x_p·w_p with FFMA.  Worst case γ_K·A ≈ K·u·A with A = Σ|w||x|; rounding errors of
  varying sign grow like √K (Higham & Mary, "A new approach to probabilistic rounding error
  analysis", 2019): bound `C_TILED·√K·u·A`.
* `"f32"` (the mantissa trick of `_qblock`): each group of 16/32 weights is
  2^B·a·Σ(1 + q/2^B)·x − (2^B·a + o)·Σx, two f32 sums of magnitude up to 2·(2^B·|a| + |o|)·Σ|x|
  whose difference cancels about B bits, so the rounding error scales with
  S = Σ_p s_p·|x_p|, s_p = 2^B·|a_p| + |o_p| (a = the weight's scale d·sc, o its offset dmin·m,
  B = 4 / 6 / 8 for Q4_K / Q6_K / Q8_0) rather than with A; the groups are then summed in f32:
  bound `C_F32·√K·u·S + C_TILED·√K·u·A`.
* `"dp4a"`: x is replaced by x̃ = xd·(hi + lo/254) per 32 activations (`act_q8_kernel`, xd =
  max|x_b|/127): hi and lo are rounded to nearest, so |x − x̃| ≤ xd/508 + 4u·|x| (the scaled value
  x·127/max carries ~3 roundings) + 2^-143 (xd rounded to a subnormal: 2^-150 times
  |hi + lo/254| ≤ 128, only for max|x_b| < ~1.5e-36).  Its effect on an output is at most
  Q = Σ_b (xd_b/508·Σ_{p∈b}|w_p|) + Σ_p (4u·|x_p| + 2^-143)·|w_p|.  The integer products are
  exact and the f32 combination rounds a few times per sub-block, scaling like the f32 path:
  bound `Q + C_DP4A·√K·u·S`.  Against x̃ itself (`x_tilde`, rebuilt from the kernel's own
  quantised activations) only the rounding part remains, `C_DP4A·√K·u·S̃`: as tight as the f32
  path, and it fails if a dp4a sum had to take the float fallback (which uses x, not x̃).
* `"mma"` (int8 tensor cores, `stdlib_kernels.qmma`): the same x̃ and the same exact integer
  sums (IMMA instead of dp4a), scaled in f32 once per 32 (Q6_K: per 16) k with a few roundings:
  254·Ih + Il converts to f32 exactly for Q4_K/Q6_K (< 2^24) and with one rounding for Q8_0,
  then (a/254)·I − o·xs and xd·(...) add to the accumulator, about the dp4a path's operations
  per sub-block, so the dp4a bound holds unchanged (both against x and against x̃).

The C constants are about 10× the worst error measured (see MEASURED); the dp4a quantisation
term Q is a strict bound, 7× the measured worst.  Rounding the Q4_K coefficients d·sc and dmin·m
through f16 (2^-12 relative per coefficient; tests/test_mutants.py) gives errors of 9-40× the
f32 bound, 1.2-6× the dp4a bound and 13-105× the tiled bound on test_paths_match_float64's data;
the blanket 2e-3 these bounds replace let it pass.
"""
from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants as gq

from stdlib_kernels import quant as Q

U = 2.0 ** -24
#: bits of the mantissa-trick field per format (the f32 path's cancellation)
B_BITS = {"q4_k": 4, "q6_k": 6, "q8_0": 8}
GGUF_TYPE = {"q4_k": T.Q4_K, "q6_k": T.Q6_K, "q8_0": T.Q8_0}
#: residual plane: x ≈ xd·(hi + lo/RES), |x − x̃| ≤ xd/(2·RES)
RES = 254.0
#: worst max|err| / (√K·u·A) (tiled), / (√K·u·S) (f32; dp4a against x̃) and / Q (dp4a against x)
#: measured on this revision's kernels (CPU executor, the GPU's arithmetic): quantiser and raw
#: random blocks, m ≤ 64 (GEMV m ≤ 17), k = 256..4096, three seeds each
MEASURED = {"tiled": 0.253, "f32": 0.038, "dp4a_rounding": 0.0073, "dp4a_quantisation": 0.145}
C_TILED = 2.5
C_F32 = 0.4
C_DP4A = 0.07
#: |x − x̃| beyond xd/508: relative (roundings of x·127/max) and absolute (subnormal xd)
X_REL = 4 * U
X_ABS = 2.0 ** -143


def dequant(w: np.ndarray, fmt: str) -> np.ndarray:
    """gguf-py's dequantisation of the raw bytes `w` ([n, row bytes]) as float64 [n, k]."""
    return gq.dequantize(np.asarray(w), GGUF_TYPE[fmt]).astype(np.float64)


def product(x: np.ndarray, wd: np.ndarray) -> np.ndarray:
    """x @ wd.T in float64 term by term (IEEE semantics for inf and NaN: inf·0 = NaN, +inf + −inf =
    NaN; a BLAS may skip zero products), then rounded to float32 as the kernels return it."""
    x = np.asarray(x, np.float64).reshape(-1, wd.shape[1])
    with np.errstate(all="ignore"):
        return (x[:, None, :] * wd[None, :, :]).sum(-1)


def _with_quants(w: np.ndarray, fmt: str, *fill) -> np.ndarray:
    """The blocks of `w` with bytes replaced: fill = (first byte, end byte, value) per run."""
    b = np.array(w, np.uint8).reshape(-1, Q.SIZES[fmt][1])
    for lo, hi, v in fill:
        b[:, lo:hi] = v
    return b.reshape(np.shape(w))


def scale_offset(w: np.ndarray, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """(a, o) per weight, weight = a·q − o (q the stored quant; Q6_K: q − 32), from gguf-py's
    dequantisation of the same blocks with every quant set to 0 and to 1."""
    if fmt == "q4_k":
        o = -dequant(_with_quants(w, fmt, (16, 144, 0x00)), fmt)
        a = dequant(_with_quants(w, fmt, (16, 144, 0x11)), fmt) + o
        return a, o
    if fmt == "q6_k":               # ql nibbles 1, qh fields 2: q = 33, weight = d·sc
        a = dequant(_with_quants(w, fmt, (0, 128, 0x11), (128, 192, 0xAA)), fmt)
        return a, np.zeros_like(a)
    a = dequant(_with_quants(w, fmt, (2, 34, 1)), fmt)
    return a, np.zeros_like(a)


class Bounds:
    """The error bound of each path for out = x @ dequant(w).T (see the module docstring)."""

    def __init__(self, x: np.ndarray, w: np.ndarray, fmt: str):
        self.x = np.asarray(x, np.float64).reshape(-1, np.shape(x)[-1])
        self.fmt = fmt
        self.wd = dequant(w, fmt)
        self.k = self.x.shape[1]
        a, o = scale_offset(w, fmt)
        s = 2.0 ** B_BITS[fmt] * np.abs(a) + np.abs(o)
        ax = np.abs(self.x)
        aw = np.abs(self.wd)
        with np.errstate(all="ignore"):
            self.ref = product(self.x, self.wd)
            self.A = ax @ aw.T
            self.S = ax @ s.T
            xd = ax.reshape(ax.shape[0], -1, 32).max(-1) / 127.0
            self.Q = (xd / (2 * RES)) @ aw.reshape(aw.shape[0], -1, 32).sum(-1).T \
                + (X_REL * ax + X_ABS) @ aw.T

    def bound(self, path: str) -> np.ndarray:
        r = np.sqrt(self.k) * U
        if path == "tiled":
            return C_TILED * r * self.A
        if path == "f32":
            return C_F32 * r * self.S + C_TILED * r * self.A
        if path in ("dp4a", "mma"):
            return self.Q + C_DP4A * r * self.S
        if path == "dp4a_rounding":
            return C_DP4A * r * self.S
        raise ValueError(path)

    def ratio(self, got: np.ndarray, path: str, where=None) -> float:
        """max |got − ref| / bound over the elements selected by `where` (≤ 1 passes)."""
        with np.errstate(invalid="ignore"):         # inf − inf where both are infinite
            err = np.abs(np.asarray(got, np.float64).reshape(self.ref.shape) - self.ref)
            r = err / self.bound(path)
        return float(r[where].max() if where is not None else r.max())


def x_tilde(xh: np.ndarray, xl: np.ndarray, xd: np.ndarray) -> np.ndarray:
    """The activations the dp4a kernels multiply: xd·(hi + lo/254) per 32, in float64."""
    q = xh.astype(np.float64) + xl.astype(np.float64) / RES
    return (q.reshape(-1, 32) * np.asarray(xd, np.float64).reshape(-1, 1)).reshape(-1)


def check_result(got, x, w, fmt: str, path: str, where=None) -> None:
    """got (the kernel's [m, n]) is within its path's bound of the float64 product; for dp4a
    also within the rounding bound of x̃ @ W (x̃ from `qmatmul.prepare_q8`, as the kernel
    computed it).  `where`: a boolean [m, n] mask of the elements to check (default all)."""
    from stdlib_kernels import qmatmul
    x2 = np.asarray(x, np.float32).reshape(-1, np.shape(x)[-1])
    b = Bounds(x2, w, fmt)
    got = np.asarray(got).reshape(b.ref.shape)
    sel = np.ones(got.shape, bool) if where is None else where
    assert np.isfinite(got[sel]).all(), f"{fmt} {path}: non-finite results where finite expected"
    r = b.ratio(got, path, sel)
    assert r <= 1.0, f"{fmt} {path}: error is {r:.3g}x its bound"
    if path in ("dp4a", "mma"):
        xh, xl, xd, _ = qmatmul.prepare_q8(x2)
        bt = Bounds(x_tilde(xh, xl, xd).reshape(x2.shape), w, fmt)
        r = bt.ratio(got, "dp4a_rounding", sel)
        assert r <= 1.0, f"{fmt} {path}: error against x~ is {r:.3g}x the rounding bound"


def swiglu_bound(x, wg, wu) -> tuple[np.ndarray, np.ndarray]:
    """(reference, bound) for q4k_gate_up_swiglu(x, wg, wu) = g·σ(g)·u, g and u from the f32 GEMV
    on Q4_K weights (bounds eg, eu).  swiglu's partial derivatives carry those:
    ∂/∂g = σ(g)·(1 + g·(1 − σ(g)))·u, ∂/∂u = g·σ(g).  The epilogue g/(1 + fast_exp(−g))·u rounds
    too: ex2.approx is within 2 ulp but its argument −g·log2(e) is rounded, a relative error of
    |g|·u in exp(−g), which moves the result by |g·u·σ·(1 − σ)|·(2 + |g|)·u; the add, divide and
    multiply add 3u·|result|."""
    bg, bu = Bounds(x, wg, "q4_k"), Bounds(x, wu, "q4_k")
    g, u = bg.ref, bu.ref
    sig = 1 / (1 + np.exp(-g))
    ref = g * sig * u
    bound = np.abs(sig * (1 + g * (1 - sig)) * u) * bg.bound("f32") \
        + np.abs(g * sig) * bu.bound("f32") \
        + np.abs(g * u * sig * (1 - sig)) * (2 + np.abs(g)) * U + 3 * U * np.abs(ref)
    return ref, bound

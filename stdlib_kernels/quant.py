"""GGUF block quantisation in numpy: Q4_K, Q6_K and Q8_0, byte-compatible with llama.cpp.

Layouts (little-endian, blocks back to back along a row; docs/stdlib.md has the byte diagrams):

* `block_q4_K`, 144 bytes per 256 weights: fp16 `d`, fp16 `dmin`, 12 bytes of eight packed 6-bit
  (scale, min) pairs, 128 bytes of nibbles.  Sub-block `j` (32 weights) is
  `w = d·sc_j·q − dmin·m_j`; the low nibble of `qs[32c + l]` is weight `64c + l`, the high nibble
  weight `64c + 32 + l`.
* `block_q6_K`, 210 bytes per 256 weights: `ql[128]` (low 4 bits), `qh[64]` (high 2 bits), 16 int8
  scales, fp16 `d` last; `w = d·scale_{i//16}·(q − 32)`.
* `block_q8_0`, 34 bytes per 32 weights: fp16 `d`, 32 int8; `w = d·q`.

Dequantisation computes in float32 in the same order as gguf-py (`(d·sc)·q − dmin·m`), so it is
bit-identical to `gguf.quants.dequantize`.  The quantisers follow ggml's reference algorithms
(`quantize_row_*_ref`): Q8_0 is round-half-away of `x·(127/amax)`; Q4_K searches each 32-weight
sub-block's scale and min by weighted least squares over 21 candidate grids
(`make_qkx2_quants`-style), then quantises the sub-block scales to 6 bits against the block's
fp16 `d`/`dmin`; Q6_K picks each 16-weight group's scale by a weighted (x²) least-squares search
over 19 grids (`make_qx_quants`-style), quantises the scales to int8 against fp16 `d`.  The
arithmetic is float32 with sequential sums, as the C reference does; llama.cpp's `nearest_int`
(add 1.5·2²³) is round-half-to-even, i.e. `np.rint` on float32.
"""
from __future__ import annotations

import numpy as np

QK_K = 256
QK8_0 = 32
#: bytes per block
Q4_K_BYTES, Q6_K_BYTES, Q8_0_BYTES = 144, 210, 34
#: (weights per block, bytes per block)
SIZES = {"q4_k": (QK_K, Q4_K_BYTES), "q6_k": (QK_K, Q6_K_BYTES), "q8_0": (QK8_0, Q8_0_BYTES)}

_F32 = np.float32
_GROUP_MAX_EPS = _F32(1e-15)


# ---------------------------------------------------------------------------------- argument forms
def _as_blocks(fn: str, data, fmt: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """Raw bytes → ([n_blocks, block_bytes] uint8, shape of the dequantised result)."""
    if not isinstance(data, np.ndarray):
        raise TypeError(f"{fn}: data must be a numpy uint8 array, got {type(data).__name__}")
    if data.dtype != np.uint8:
        raise TypeError(f"{fn}: data must be uint8 (raw GGUF bytes), got {data.dtype}")
    per, nbytes = SIZES[fmt]
    if data.ndim == 0 or data.shape[-1] % nbytes:
        raise ValueError(f"{fn}: data's last dimension must be a multiple of {nbytes} bytes "
                         f"(one {fmt.upper()} block), got shape {data.shape}")
    blocks = np.ascontiguousarray(data).reshape(-1, nbytes)
    return blocks, (*data.shape[:-1], data.shape[-1] // nbytes * per)


def _as_groups(fn: str, x, fmt: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """Float weights → ([n_blocks, block_weights] float32, shape of the packed result)."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{fn}: x must be a numpy float array, got {type(x).__name__}")
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"{fn}: x must be a float array, got {x.dtype}")
    per, nbytes = SIZES[fmt]
    if x.ndim == 0 or x.shape[-1] % per:
        raise ValueError(f"{fn}: x's last dimension must be a multiple of {per}, got shape "
                         f"{x.shape}")
    x = np.ascontiguousarray(x, dtype=_F32)
    if not np.isfinite(x).all():
        raise ValueError(f"{fn}: x must be finite (no NaN or inf)")
    return x.reshape(-1, per), (*x.shape[:-1], x.shape[-1] // per * nbytes)


def _fp16(b: np.ndarray) -> np.ndarray:
    """Two little-endian bytes per row → float32 column."""
    return np.ascontiguousarray(b).view(np.float16).astype(_F32)


def _fp16_bytes(v: np.ndarray) -> np.ndarray:
    """float32 column → its fp16 (round to nearest even) as two bytes per row."""
    return v.astype(np.float16).reshape(-1, 1).view(np.uint8)


def _seqsum(a: np.ndarray) -> np.ndarray:
    """Σ over the last axis, left to right in float32 (the C loops' rounding, not pairwise)."""
    s = np.zeros(a.shape[:-1], _F32)
    for i in range(a.shape[-1]):
        s = s + a[..., i]
    return s


def _nearest(v: np.ndarray) -> np.ndarray:
    """llama.cpp's nearest_int on float32 values: round half to even (as float32)."""
    return np.rint(v.astype(_F32))


# ---------------------------------------------------------------------------------------- Q8_0
def dequantize_q8_0(data: np.ndarray) -> np.ndarray:
    """GGUF Q8_0 bytes (last dim a multiple of 34) → float32 weights (last dim ×32/34)."""
    blocks, shape = _as_blocks("dequantize_q8_0", data, "q8_0")
    d = _fp16(blocks[:, :2])
    q = blocks[:, 2:].view(np.int8).astype(_F32)
    return (q * d).reshape(shape)


def quantize_q8_0(x: np.ndarray) -> np.ndarray:
    """float weights (last dim a multiple of 32) → GGUF Q8_0 bytes; ggml's reference rounding."""
    g, shape = _as_groups("quantize_q8_0", x, "q8_0")
    d = np.abs(g).max(axis=1) / _F32(127)
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, _F32(0), _F32(1) / d).astype(_F32)
    v = (g * inv[:, None]).astype(np.float64)           # product rounded to f32, then exact
    q = np.sign(v) * np.floor(np.abs(v) + 0.5)          # roundf: half away from zero
    out = np.concatenate([_fp16_bytes(d), q.astype(np.int8).view(np.uint8)], axis=1)
    return out.reshape(shape)


# ---------------------------------------------------------------------------------------- Q4_K
def unpack_scale_min_k4(sc12: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[n, 12] packed bytes → ([n, 8] 6-bit scales, [n, 8] 6-bit mins), as uint8.

    Bytes 0-3 hold scales 0-3 (low 6 bits) and the top 2 bits of scales 4-7; bytes 4-7 the mins
    0-3 and the top 2 bits of mins 4-7; bytes 8-11 the low nibbles of scale (low) / min (high) 4-7.
    """
    s = sc12.astype(np.uint8)
    a, b, c = s[:, 0:4], s[:, 4:8], s[:, 8:12]
    sc = np.concatenate([a & 63, (c & 15) | ((a >> 6) << 4)], axis=1)
    mn = np.concatenate([b & 63, (c >> 4) | ((b >> 6) << 4)], axis=1)
    return sc, mn


def _pack_scale_min_k4(ls: np.ndarray, lm: np.ndarray) -> np.ndarray:
    """Inverse of unpack_scale_min_k4 for 6-bit values."""
    ls = ls.astype(np.uint8)
    lm = lm.astype(np.uint8)
    a = (ls[:, :4] & 63) | ((ls[:, 4:] >> 4) << 6)
    b = (lm[:, :4] & 63) | ((lm[:, 4:] >> 4) << 6)
    c = (ls[:, 4:] & 15) | ((lm[:, 4:] & 15) << 4)
    return np.concatenate([a, b, c], axis=1)


def dequantize_q4_k(data: np.ndarray) -> np.ndarray:
    """GGUF Q4_K bytes (last dim a multiple of 144) → float32 weights (last dim ×256/144)."""
    blocks, shape = _as_blocks("dequantize_q4_k", data, "q4_k")
    n = blocks.shape[0]
    d = _fp16(blocks[:, 0:2])
    dmin = _fp16(blocks[:, 2:4])
    sc, mn = unpack_scale_min_k4(blocks[:, 4:16])
    qs = blocks[:, 16:].reshape(n, 4, 1, 32) >> np.array([0, 4], np.uint8).reshape(1, 1, 2, 1)
    q = (qs & 15).reshape(n, 8, 32).astype(_F32)
    scale = (d * sc.astype(_F32))[:, :, None]
    offset = (dmin * mn.astype(_F32))[:, :, None]
    return (scale * q - offset).reshape(shape)


def _qkx2(x: np.ndarray, w: np.ndarray, nmax: int = 15, rmin: float = -1.0,
          rdelta: float = 0.1, nstep: int = 20):
    """Best (scale, -min, levels) per row of `x` for x ≈ scale·L + min, L in 0..nmax, minimising
    the w-weighted squared error over nstep+1 candidate grids (least-squares refit on each)."""
    lo = np.minimum(x.min(axis=1), _F32(0))
    hi = x.max(axis=1)
    sum_w = _seqsum(w)
    sum_x = _seqsum(w * x)
    flat = hi == lo
    span = np.where(flat, _F32(1), hi - lo).astype(_F32)
    iscale = _F32(nmax) / span
    scale = _F32(1) / iscale
    levels = np.clip(_nearest(iscale[:, None] * (x - lo[:, None])), 0, nmax).astype(_F32)
    diff = scale[:, None] * levels + lo[:, None] - x
    best = _seqsum(w * (diff * diff))
    mn = lo.copy()
    for step in range(nstep + 1):
        # the C loop re-centres on the best min found so far (`min` is updated in place)
        span = np.where(flat, _F32(1), hi - mn).astype(_F32)
        iscale = (_F32(rmin) + _F32(rdelta) * _F32(step) + _F32(nmax)) / span
        aux = np.clip(_nearest(iscale[:, None] * (x - mn[:, None])), 0, nmax).astype(_F32)
        wl = w * aux
        sum_l = _seqsum(wl)
        sum_l2 = _seqsum(wl * aux)
        sum_xl = _seqsum(wl * x)
        det = sum_w * sum_l2 - sum_l * sum_l
        ok = det > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / det
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det
            pos = this_min > 0
            this_min = np.where(pos, _F32(0), this_min).astype(_F32)
            this_scale = np.where(pos, sum_xl / sum_l2, this_scale).astype(_F32)
            diff = this_scale[:, None] * aux + this_min[:, None] - x
            err = _seqsum(w * (diff * diff))
        better = ok & (err < best)
        levels[better] = aux[better]
        best = np.where(better, err, best)
        scale = np.where(better, this_scale, scale)
        mn = np.where(better, this_min, mn)
    levels[flat] = 0
    scale = np.where(flat, _F32(0), scale).astype(_F32)
    mn = np.where(flat, lo, mn).astype(_F32)
    return scale, -mn, levels


def quantize_q4_k(x: np.ndarray) -> np.ndarray:
    """float weights (last dim a multiple of 256) → GGUF Q4_K bytes (ggml's reference search)."""
    g, shape = _as_groups("quantize_q4_k", x, "q4_k")
    n = g.shape[0]
    sub = g.reshape(n * 8, 32)
    av = np.sqrt(_seqsum(sub * sub) / _F32(32))
    scales, mins, levels = _qkx2(sub, av[:, None] + np.abs(sub))
    scales, mins, levels = scales.reshape(n, 8), mins.reshape(n, 8), levels.reshape(n, 8, 32)
    max_scale = np.maximum(scales.max(axis=1), _F32(0))
    max_min = np.maximum(mins.max(axis=1), _F32(0))
    with np.errstate(divide="ignore"):
        inv_scale = np.where(max_scale > 0, _F32(63) / max_scale, _F32(0)).astype(_F32)
        inv_min = np.where(max_min > 0, _F32(63) / max_min, _F32(0)).astype(_F32)
    # C stores nearest_int into a uint8 (wrapping) before MIN(63, ·)
    ls = np.minimum(_nearest(inv_scale[:, None] * scales).astype(np.int64) & 255, 63)
    lm = np.minimum(_nearest(inv_min[:, None] * mins).astype(np.int64) & 255, 63)
    d16 = (max_scale / _F32(63)).astype(np.float16)
    dmin16 = (max_min / _F32(63)).astype(np.float16)
    d = d16.astype(_F32)[:, None] * ls.astype(_F32)
    dm = dmin16.astype(_F32)[:, None] * lm.astype(_F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        requant = np.clip(_nearest((g.reshape(n, 8, 32) + dm[:, :, None]) / d[:, :, None]), 0, 15)
    levels = np.where((d != 0)[:, :, None], requant, levels).astype(np.uint8)
    halves = levels.reshape(n, 4, 2, 32)
    qs = (halves[:, :, 0] | (halves[:, :, 1] << 4)).reshape(n, 128)
    out = np.concatenate([d16.reshape(-1, 1).view(np.uint8), dmin16.reshape(-1, 1).view(np.uint8),
                          _pack_scale_min_k4(ls, lm), qs], axis=1)
    return out.reshape(shape)


# ---------------------------------------------------------------------------------------- Q6_K
def dequantize_q6_k(data: np.ndarray) -> np.ndarray:
    """GGUF Q6_K bytes (last dim a multiple of 210) → float32 weights (last dim ×256/210)."""
    blocks, shape = _as_blocks("dequantize_q6_k", data, "q6_k")
    n = blocks.shape[0]
    ql = blocks[:, :128].reshape(n, 2, 1, 64) >> np.array([0, 4], np.uint8).reshape(1, 1, 2, 1)
    ql = (ql & 15).reshape(n, 2, 4, 32)
    shifts = np.array([0, 2, 4, 6], np.uint8).reshape(1, 1, 4, 1)
    qh = (blocks[:, 128:192].reshape(n, 2, 1, 32) >> shifts) & 3
    q = ((ql | (qh << 4)).astype(np.int8) - np.int8(32)).reshape(n, 16, 16).astype(_F32)
    scale = blocks[:, 192:208].view(np.int8).astype(_F32) * _fp16(blocks[:, 208:210])
    return (scale[:, :, None] * q).reshape(shape)


def _qx(x: np.ndarray, nmax: int = 32):
    """Best (scale, levels+nmax) per row for x ≈ scale·L, L in -nmax..nmax-1, weights x²; the
    grid through the largest-magnitude value and 18 neighbours refit by least squares."""
    ax = np.abs(x)
    idx = ax.argmax(axis=1)                              # first maximum, as the C loop's `>`
    rows = np.arange(x.shape[0])
    amax, big = ax[rows, idx], x[rows, idx]
    zero = amax < _GROUP_MAX_EPS
    big = np.where(zero, _F32(1), big).astype(_F32)
    w = x * x

    def grid(iscale):
        lv = np.clip(_nearest(iscale[:, None] * x), -nmax, nmax - 1).astype(_F32)
        return lv, _seqsum(w * x * lv), _seqsum(w * lv * lv)

    lv, sumlx, suml2 = grid(_F32(-nmax) / big)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(suml2 != 0, sumlx / suml2, _F32(0)).astype(_F32)
    best = scale * sumlx
    levels = lv
    for step in (*range(-9, 0), *range(1, 10)):
        lv, sumlx, suml2 = grid(-(_F32(nmax) + _F32(0.1) * _F32(step)) / big)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # huge weights (|x| ≳ 1e6) overflow sumlx² to inf in float32, as in the C
            better = (suml2 > 0) & (sumlx * sumlx > best * suml2)
            new_scale = (sumlx / suml2).astype(_F32)
        levels = np.where(better[:, None], lv, levels)
        scale = np.where(better, new_scale, scale).astype(_F32)
        best = np.where(better, scale * sumlx, best).astype(_F32)
    levels = np.where(zero[:, None], _F32(-nmax), levels)
    scale = np.where(zero, _F32(0), scale).astype(_F32)
    return scale, levels + nmax


def quantize_q6_k(x: np.ndarray) -> np.ndarray:
    """float weights (last dim a multiple of 256) → GGUF Q6_K bytes (ggml's reference search)."""
    g, shape = _as_groups("quantize_q6_k", x, "q6_k")
    n = g.shape[0]
    scales, levels = _qx(g.reshape(n * 16, 16))
    scales, levels = scales.reshape(n, 16), levels.reshape(n, 16, 16)
    idx = np.abs(scales).argmax(axis=1)
    max_scale = scales[np.arange(n), idx]
    zero = np.abs(max_scale) < _GROUP_MAX_EPS
    max_scale = np.where(zero, _F32(1), max_scale).astype(_F32)
    iscale = _F32(-128) / max_scale
    d16 = (_F32(1) / iscale).astype(np.float16)
    sc8 = np.minimum(_nearest(iscale[:, None] * scales), 127).astype(np.int8)
    d = d16.astype(_F32)[:, None] * sc8.astype(_F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        requant = np.clip(_nearest(g.reshape(n, 16, 16) / d[:, :, None]), -32, 31) + 32
    levels = np.where((d != 0)[:, :, None], requant, levels).astype(np.uint8).reshape(n, 2, 4, 32)
    lo = levels & 15
    ql = np.concatenate([lo[:, :, 0] | (lo[:, :, 2] << 4), lo[:, :, 1] | (lo[:, :, 3] << 4)],
                        axis=2).reshape(n, 128)
    hi = levels >> 4
    qh = (hi[:, :, 0] | (hi[:, :, 1] << 2) | (hi[:, :, 2] << 4) | (hi[:, :, 3] << 6)).reshape(n, 64)
    out = np.concatenate([ql, qh, sc8.view(np.uint8), d16.reshape(-1, 1).view(np.uint8)], axis=1)
    out[zero] = 0
    return out.reshape(shape)


def dequantize(data: np.ndarray, fmt: str) -> np.ndarray:
    """`fmt` in 'q4_k', 'q6_k', 'q8_0'."""
    return {"q4_k": dequantize_q4_k, "q6_k": dequantize_q6_k, "q8_0": dequantize_q8_0}[fmt](data)


def quantize(x: np.ndarray, fmt: str) -> np.ndarray:
    """`fmt` in 'q4_k', 'q6_k', 'q8_0'."""
    return {"q4_k": quantize_q4_k, "q6_k": quantize_q6_k, "q8_0": quantize_q8_0}[fmt](x)

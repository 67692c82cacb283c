"""Device helpers that read GGUF quant blocks in registers (inlined `@pyptx.func`s).

Words are little-endian u32 (or u16) views of the raw block bytes, so byte `b` of a word `v` is
`(v >> 8b) & 0xFF`.  Shared by the GEMV, dp4a and tiled kernels of `qmatmul`.

Integer → float without a conversion instruction: an unsigned field `q` of B bits placed at the
top of an f32 mantissa under exponent 0 (`0x3F800000 | q << (23 - B)`) is the float `1 + q/2^B`.
So Σ q·x = 2^B · (Σ (1 + q/2^B)·x − Σ x): one shift and one LOP3 per weight, then an FFMA, with
Σ x (precomputed per 16 activations) removing the offset.  The cancellation costs about B bits of
the f32 sum's relative precision (~1e-6 here), far below the quantisation error.
"""
from __future__ import annotations

import pyptx
from pyptx import f16, f32, i32, u16, u32

#: exponent bits of 1.0f: OR-ed onto a mantissa field to make 1 + field/2^23
ONE_BITS = 0x3F800000


@pyptx.func
def half_lo(v: u32):
    """The fp16 in the low half of `v`, as f32."""
    return f32(pyptx.bitcast(u16(v & 0xFFFF), f16))


@pyptx.func
def half_hi(v: u32):
    """The fp16 in the high half of `v`, as f32."""
    return f32(pyptx.bitcast(u16(v >> 16), f16))


@pyptx.func
def pair16(wh, i: i32):
    """u16 words i and i+1 as one u32 (little-endian): Q6_K/Q8_0 blocks are only 2-byte aligned."""
    return u32(wh[i]) | (u32(wh[i + 1]) << 16)


@pyptx.func
def q4k_scale_min_pair(s1: u32, s2: u32, s3: u32, c: i32):
    """6-bit (scale, min) of Q4_K sub-blocks 2c and 2c+1 (c in 0..3) from the 12 packed scale bytes
    (words s1, s2, s3 = block bytes 4..15): returns (sc_2c, sc_2c+1, m_2c, m_2c+1) as f32.

    Sub-blocks 0-3 keep their scale in the low 6 bits of bytes 0-3 and their min in bytes 4-7;
    4-7 have the low 4 bits in byte 8+j (scale low nibble, min high nibble) and the top 2 bits in
    the spare top bits of bytes j (scale) and 4+j (min).  Two bytes are unpacked at once."""
    sh = (c & 1) * 16
    a = s1 >> sh
    b = s2 >> sh
    sc = a & 0x3F3F
    mn = b & 0x3F3F
    if c >= 2:
        e = s3 >> sh
        sc = (e & 0x0F0F) | ((a >> 2) & 0x3030)
        mn = ((e >> 4) & 0x0F0F) | ((b >> 2) & 0x3030)
    return f32(sc & 0xFF), f32((sc >> 8) & 0xFF), f32(mn & 0xFF), f32((mn >> 8) & 0xFF)


@pyptx.func
def one_bits(n: i32):
    """ONE_BITS as a run-time value (`n` ≥ 0 contributes nothing): LOP3 takes one immediate, the
    field mask; a literal ONE_BITS would make ptxas re-materialise a register for every weight."""
    return u32(n >> 31) | ONE_BITS


@pyptx.func
def fields_dot4(q: u32, S, B, x0: f32, x1: f32, x2: f32, x3: f32, acc: f32, one: u32):
    """acc + Σ_b (1 + f_b/2^B)·x_b, f_b the B-bit field of q at bit S + 8b (S, B literals; `one`
    from one_bits).  The shift amounts are literals, one of each pair 0; written out without
    helper calls or `if`s, because every inlined call is a block for the SSA builder and these
    run 32 times per activation row in a loop body."""
    t = 23 - B
    m = ((1 << B) - 1) << t
    f0 = pyptx.bitcast((((q << max(t - S, 0)) >> max(S - t, 0)) & m) | one, f32)
    f1 = pyptx.bitcast((((q << max(t - S - 8, 0)) >> max(S + 8 - t, 0)) & m) | one, f32)
    f2 = pyptx.bitcast((((q << max(t - S - 16, 0)) >> max(S + 16 - t, 0)) & m) | one, f32)
    f3 = pyptx.bitcast((((q << max(t - S - 24, 0)) >> max(S + 24 - t, 0)) & m) | one, f32)
    return acc + f0 * x0 + f1 * x1 + f2 * x2 + f3 * x3

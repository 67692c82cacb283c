"""CPU executor: warp shuffles, votes, activemask, atomics under contention."""
from __future__ import annotations

import numpy as np
import pytest

from test_cpu_util import HEADER, inp, out, run

rng = np.random.default_rng(11)

SHFL = HEADER + r"""
.visible .entry shfl(.param .u64 o, .param .u64 op, .param .u64 x, .param .u32 b,
                     .param .u32 c, .param .u32 mask)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [x];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r2, [%rd3];
    ld.param.u32 %r3, [b];
    ld.param.u32 %r4, [c];
    ld.param.u32 %r5, [mask];
    and.b32 %r6, %r1, 31;
    shr.u32 %r7, %r5, %r6;
    and.b32 %r7, %r7, 1;
    setp.eq.u32 %p1, %r7, 0;
    @%p1 bra DONE;                  // lanes outside the member mask sit this out
    shfl.sync.MODE.b32 %r8|%p2, %r2, %r3, %r4, %r5;
    ld.param.u64 %rd4, [o];
    add.s64 %rd5, %rd4, %rd2;
    st.global.u32 [%rd5], %r8;
    selp.u32 %r9, 1, 0, %p2;
    ld.param.u64 %rd6, [op];
    add.s64 %rd7, %rd6, %rd2;
    st.global.u32 [%rd7], %r9;
DONE:
    ret;
}
"""


def shfl_ref(mode, x, b, c, mask, nthreads):
    res, pv = {}, {}
    for t in range(nthreads):
        lane = t % 32
        if not (mask >> lane) & 1:
            continue
        bval, cval, seg = b & 31, c & 31, (c >> 8) & 31
        max_lane = (lane & seg) | (cval & ~seg)
        min_lane = lane & seg
        if mode == "up":
            j, ok = lane - bval, lane - bval >= max_lane
        elif mode == "down":
            j, ok = lane + bval, lane + bval <= max_lane
        elif mode == "bfly":
            j, ok = lane ^ bval, (lane ^ bval) <= max_lane
        else:
            j = min_lane | (bval & ~seg)
            ok = j <= max_lane
        if not ok:
            j = lane
        src = t - lane + j
        pv[t] = int(ok)
        # reading an inactive lane or one past the end of the block is undefined: skip it
        if src < nthreads and (mask >> j) & 1:
            res[t] = int(x[src])
    return res, pv


@pytest.mark.parametrize("mode,b,c", [("bfly", 1, 31), ("bfly", 16, 31), ("bfly", 3, 0x181f),
                                      ("down", 1, 31), ("down", 5, 31), ("down", 2, 0x1807),
                                      ("up", 1, 0), ("up", 4, 0), ("up", 3, 0x1800),
                                      ("idx", 0, 31), ("idx", 7, 31), ("idx", 2, 0x1c1f),
                                      ("idx", 31, 0x0f)])
@pytest.mark.parametrize("mask", [0xFFFFFFFF, 0x0000FFFF, 0xF0F0F0F0])
def test_shfl_modes_clamps_and_masks(mode, b, c, mask):
    n = 48                                   # second warp is partial (16 lanes)
    x = rng.integers(0, 2 ** 32, n, dtype=np.uint32)
    o = np.zeros(n, np.uint32)
    op = np.full(n, 7, np.uint32)
    run(SHFL.replace("MODE", mode), "shfl", 1, n, [out(o), out(op), inp(x), b, c, mask])
    res, pv = shfl_ref(mode, x, b, c, mask, n)
    for t, p in pv.items():
        assert op[t] == p, (t, op[t], p)
    for t, v in res.items():
        assert o[t] == v, (t, o[t], v)


WARP_SUM = HEADER + r"""
.visible .entry wsum(.param .u64 o, .param .u64 x)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd4, [o];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.s32 %r4, %r1, %r2, %r3;
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.f32 %f1, [%rd3];
    mov.u32 %r5, 16;
LOOP:
    shfl.sync.bfly.b32 %f2, %f1, %r5, 31, -1;
    add.rn.f32 %f1, %f1, %f2;
    shr.u32 %r5, %r5, 1;
    setp.ne.u32 %p1, %r5, 0;
    @%p1 bra LOOP;
    add.s64 %rd5, %rd4, %rd2;
    st.global.f32 [%rd5], %f1;
    ret;
}
"""


def test_warp_shuffle_reduction():
    x = rng.standard_normal(4 * 128).astype(np.float32)
    o = np.zeros_like(x)
    run(WARP_SUM, "wsum", 4, 128, [out(o), inp(x)])
    v = x.reshape(-1, 32).copy()
    lanes = np.arange(32)
    for off in (16, 8, 4, 2, 1):
        v = v + v[:, lanes ^ off]
    assert np.array_equal(o, v.reshape(-1))


VOTE = HEADER + r"""
.visible .entry vote(.param .u64 o, .param .u64 x)
{
    .reg .pred %p<6>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [o];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.s32 %r2, [%rd4];
    setp.gt.s32 %p1, %r2, 0;
    mul.wide.u32 %rd5, %r1, 16;
    add.s64 %rd6, %rd2, %rd5;
    and.b32 %r3, %r1, 1;
    setp.eq.u32 %p2, %r3, 1;
    @%p2 bra ODD;
    vote.sync.ballot.b32 %r4, %p1, 0x55555555;
    vote.sync.any.pred %p3, %p1, 0x55555555;
    vote.sync.all.pred %p4, %p1, 0x55555555;
    activemask.b32 %r7;
    bra.uni JOIN;
ODD:
    vote.sync.ballot.b32 %r4, %p1, 0xAAAAAAAA;
    vote.sync.any.pred %p3, %p1, 0xAAAAAAAA;
    vote.sync.all.pred %p4, %p1, 0xAAAAAAAA;
    activemask.b32 %r7;
JOIN:
    selp.u32 %r5, 1, 0, %p3;
    selp.u32 %r6, 1, 0, %p4;
    st.global.v4.u32 [%rd6], {%r4, %r5, %r6, %r7};
    ret;
}
"""


def test_vote_ballot_under_divergence():
    n = 64
    x = rng.integers(-3, 10, n).astype(np.int32)
    x[32:64:2] = 5                          # warp 1: every even lane votes true
    o = np.zeros((n, 4), np.uint32)
    run(VOTE, "vote", 1, n, [out(o), inp(x)])
    for t in range(n):
        w, lane = t // 32, t % 32
        same = [w * 32 + l for l in range(32) if l % 2 == lane % 2]
        ballot = sum(1 << (s % 32) for s in same if x[s] > 0)
        members = sum(1 << (s % 32) for s in same)
        assert o[t, 0] == ballot
        assert o[t, 1] == int(ballot != 0)
        assert o[t, 2] == int(ballot == members)
        assert o[t, 3] == members
    assert o[32, 2] == 1


ATOM = HEADER + r"""
.visible .entry at(.param .u64 old, .param .u64 mem, .param .u64 idx, .param .u64 v,
                   .param .u64 w)
{
    .reg .b32 %r<10>;
    .reg .b64 %rd<16>;
    .reg .TREG %x<4>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd1, %r4, 4;
    mul.wide.u32 %rd11, %r4, SIZE;
    ld.param.u64 %rd2, [idx];
    add.s64 %rd3, %rd2, %rd1;
    ld.global.u32 %r5, [%rd3];
    mul.wide.u32 %rd4, %r5, SIZE;
    ld.param.u64 %rd5, [mem];
    add.s64 %rd6, %rd5, %rd4;
    ld.param.u64 %rd7, [v];
    add.s64 %rd8, %rd7, %rd11;
    ld.global.TYPE %x1, [%rd8];
    ld.param.u64 %rd7, [w];
    add.s64 %rd8, %rd7, %rd11;
    ld.global.TYPE %x2, [%rd8];
    INSTR
    ld.param.u64 %rd9, [old];
    add.s64 %rd10, %rd9, %rd11;
    st.global.TYPE [%rd10], %x3;
    ret;
}
"""

SERIAL = {
    "add": lambda o, v, w: o + v, "min": lambda o, v, w: min(o, v),
    "max": lambda o, v, w: max(o, v), "exch": lambda o, v, w: v,
    "and": lambda o, v, w: o & v, "or": lambda o, v, w: o | v, "xor": lambda o, v, w: o ^ v,
    "cas": lambda o, v, w: w if o == v else o,
    "inc": lambda o, v, w: 0 if o >= v else o + 1,
    "dec": lambda o, v, w: v if (o == 0 or o > v) else o - 1,
}


@pytest.mark.parametrize("op,t", [("add", "u32"), ("add", "s32"), ("add", "u64"), ("add", "f32"),
                                  ("add", "f64"), ("min", "s32"), ("max", "u32"),
                                  ("exch", "b32"), ("and", "b32"), ("or", "b64"), ("xor", "b32"),
                                  ("cas", "b32"), ("inc", "u32"), ("dec", "u32"),
                                  ("min", "s64"), ("max", "s64")])
def test_atomics_serialise_in_thread_order(op, t):
    dt = {"u32": np.uint32, "s32": np.int32, "u64": np.uint64, "f32": np.float32,
          "f64": np.float64, "b32": np.uint32, "b64": np.uint64, "s64": np.int64}[t]
    size = np.dtype(dt).itemsize
    n, slots = 512, 5
    idx = rng.integers(0, slots, n).astype(np.uint32)
    if dt in (np.float32, np.float64):
        v = rng.standard_normal(n).astype(dt)
        mem0 = rng.standard_normal(slots).astype(dt)
    else:
        hi = 12 if op in ("inc", "dec", "cas") else 1000
        v = rng.integers(0 if dt(0) - 1 > 0 else -hi, hi, n).astype(dt)
        mem0 = rng.integers(0, 8, slots).astype(dt)
    w = rng.integers(0, 12, n).astype(dt)
    mem = mem0.copy()
    old = np.zeros(n, dt)
    treg = {4: "b32", 8: "b64"}[size] if t[0] != "f" else t
    args = ("%x3, [%rd6], %x1, %x2;" if op == "cas" else "%x3, [%rd6], %x1;")
    ptx = (ATOM.replace("TREG", treg).replace("SIZE", str(size)).replace("TYPE", t)
           .replace("INSTR", f"atom.global.{op}.{t} {args}"))
    run(ptx, "at", 4, 128, [out(old), out(mem), inp(idx), inp(v), inp(w)])
    ref_mem = mem0.copy()
    ref_old = np.zeros(n, dt)
    with np.errstate(all="ignore"):
        for i in range(n):
            ref_old[i] = ref_mem[idx[i]]
            ref_mem[idx[i]] = dt(SERIAL[op](ref_mem[idx[i]], v[i], w[i]))
    assert np.array_equal(old, ref_old)
    assert np.array_equal(mem, ref_mem)


def test_atomic_add_counter_old_values_are_a_permutation():
    n = 4096
    idx = np.zeros(n, np.uint32)
    v = np.ones(n, np.uint32)
    mem = np.zeros(1, np.uint32)
    old = np.zeros(n, np.uint32)
    ptx = (ATOM.replace("TREG", "b32").replace("SIZE", "4").replace("TYPE", "u32")
           .replace("INSTR", "atom.global.add.u32 %x3, [%rd6], %x1;"))
    run(ptx, "at", 16, 256, [out(old), out(mem), inp(idx), inp(v), inp(v)])
    assert mem[0] == n
    assert np.array_equal(np.sort(old), np.arange(n))


def test_red_and_shared_atomics_histogram():
    ptx = HEADER + r"""
.visible .entry hist(.param .u64 h, .param .u64 x)
{
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b8 sh[64];
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 16;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, sh;
    add.s32 %r4, %r3, %r2;
    @%p1 st.shared.u32 [%r4], 0;
    bar.sync 0;
    mov.u32 %r5, %ctaid.x;
    mov.u32 %r6, %ntid.x;
    mad.lo.s32 %r7, %r5, %r6, %r1;
    ld.param.u64 %rd1, [x];
    mul.wide.u32 %rd2, %r7, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r8, [%rd3];
    shl.b32 %r9, %r8, 2;
    add.s32 %r10, %r3, %r9;
    atom.shared.add.u32 %r11, [%r10], 1;
    bar.sync 0;
    @!%p1 bra DONE;
    ld.shared.u32 %r11, [%r4];
    ld.param.u64 %rd4, [h];
    cvt.u64.u32 %rd5, %r2;
    add.s64 %rd6, %rd4, %rd5;
    red.global.add.u32 [%rd6], %r11;
DONE:
    ret;
}
"""
    x = rng.integers(0, 16, 8 * 256).astype(np.uint32)
    h = np.zeros(16, np.uint32)
    run(ptx, "hist", 8, 256, [out(h), inp(x)])
    assert np.array_equal(h, np.bincount(x, minlength=16))

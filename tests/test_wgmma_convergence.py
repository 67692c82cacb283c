"""Warpgroup convergence of the wgmma instructions on the CPU executor.

`wgmma.fence`, `wgmma.mma_async`, `wgmma.commit_group` and `wgmma.wait_group` are
`.sync.aligned` over a warpgroup: all 128 threads execute the same instruction, but (PTX ISA) they
may reach it at different times; the instruction waits for the warpgroup as bar.sync waits for
the block.  A warp-dependent branch just before any of them (`x if c else y` lowers to a branch
whose else block sits after the wgmma code, so its lanes arrive later) must therefore give the
same D as straight-line code.  What the ISA leaves undefined (a warpgroup whose warps reach
different warpgroup instructions, or one whose warp has exited) is a LaunchError naming the PTX
lines; nothing hangs.

The expected D is A @ B + C from numpy in float64, placed with the ISA's D fragment table
written out in tests/test_wgmma.py (`d_place`); A and B are staged from the canonical-layout
images that module builds from the ISA's pictures (`Layout`).  Every kernel is assembled by
ptxas for sm_90a.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import pyptx
from pyptx import f32, i32, thread_idx, u16
from pyptx.toolchain import assemble
from test_wgmma import Layout, _halves, d_place

FENCE, MMA, COMMIT, WAIT = 1, 2, 4, 8       # AT bits: a branch just before that instruction


@pyptx.kernel
def wg_branchy(out: f32[:, :], side: f32[:, :], imga: u16[:], imgb: u16[:], c: f32[:, :],
               late: i32[:, :], AT: pyptx.constexpr):
    """One m64n8k16 wgmma (A, B: 32B-swizzled K-major tiles) with C from `c`.  Before each
    instruction named in AT, every thread takes one side of `x if late[g, k] else y` (the
    else side is laid out after the wgmma code, so those lanes arrive later) and records
    which in `side`."""
    sa = pyptx.shared.array(64 * 16, u16)
    sb = pyptx.shared.array(8 * 16, u16)
    t = thread_idx.x
    g = pyptx.block_idx.x * pyptx.block_dim.x + t
    for i in range(t, 64 * 16, pyptx.block_dim.x):
        sa[i] = imga[i]
    for i in range(t, 8 * 16, pyptx.block_dim.x):
        sb[i] = imgb[i]
    pyptx.fence_proxy_async()
    pyptx.syncthreads()
    da = pyptx.wgmma_desc(sa, 0, swizzle=32)
    db = pyptx.wgmma_desc(sb, 0, swizzle=32)
    acc = (c[g, 0], c[g, 1], c[g, 2], c[g, 3])
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    if AT & 1:
        s0 = 0.0 if late[g, 0] == 0 else c[g, 0] * 0.0 + 1.0
    pyptx.wgmma_fence()
    if AT & 2:
        s1 = 0.0 if late[g, 1] == 0 else c[g, 1] * 0.0 + 1.0
    acc = pyptx.wgmma(da, db, acc, atype="f16")
    if AT & 4:
        s2 = 0.0 if late[g, 2] == 0 else c[g, 2] * 0.0 + 1.0
    pyptx.wgmma_commit()
    if AT & 8:
        s3 = 0.0 if late[g, 3] == 0 else c[g, 3] * 0.0 + 1.0
    pyptx.wgmma_wait(0)
    for j in pyptx.static_range(4):
        out[g, j] = acc[j]
    side[g, 0] = s0
    side[g, 1] = s1
    side[g, 2] = s2
    side[g, 3] = s3


def _run(late, at, block=128, grid=1):
    """Launch wg_branchy; check D against numpy per warpgroup and `side` against `late`."""
    n = block * grid
    Abits, Av = _halves("f16", (64, 16))
    Bbits, Bv = _halves("f16", (16, 8))
    la, lb = Layout(32, False, 64, 16), Layout(32, False, 8, 16)
    c = np.random.default_rng(7).standard_normal((n, 4)).astype(np.float32)
    out = np.full((n, 4), np.nan, np.float32)
    side = np.full((n, 4), np.nan, np.float32)
    late = np.ascontiguousarray(late, np.int32)
    wg_branchy[grid, block](out, side, la.image(Abits), lb.image(Bbits.T), c, late, at)
    want_side = np.zeros((n, 4), np.float32)
    for k, bit in enumerate((FENCE, MMA, COMMIT, WAIT)):
        if at & bit:
            want_side[:, k] = late[:, k] != 0
    np.testing.assert_array_equal(side, want_side)
    prod = Av @ Bv
    mag = np.abs(Av) @ np.abs(Bv)
    for w0 in range(0, n, 128):
        want = prod.copy()
        bound = mag.copy()
        got = np.full_like(want, np.nan)
        for th in range(128):
            for j in range(4):
                want[d_place(th, j)] += c[w0 + th, j]
                bound[d_place(th, j)] += abs(c[w0 + th, j])
                got[d_place(th, j)] = out[w0 + th, j]
        # 16 exact f16 products and C summed in float64 (relative error <= 17 * 2**-53 of the
        # sum of magnitudes), rounded once to f32 (2**-24 relative)
        assert (np.abs(got - want) <= (2.0 ** -24 + 17 * 2.0 ** -53) * bound).all(), w0


def _late(n, pattern):
    """(n, 4) i32: which threads take the late (else) side before each instruction."""
    tid = np.arange(n) % 128
    warp, lane = tid // 32, tid % 32
    m = {"warp0": warp == 0, "warp3": warp == 3, "warps12": (warp == 1) | (warp == 2),
         "one lane": (warp == 2) & (lane == 5), "all but one lane": (tid != 77),
         "odd lanes": lane % 2 == 1}[pattern]
    return np.repeat(m[:, None], 4, axis=1).astype(np.int32)


def test_the_branchy_kernel_branches_past_each_instruction():
    """The premise of these tests: before each wgmma instruction, the nearest conditional
    branch jumps to a label after it, so the lanes taking it reach the instruction later."""
    ck = pyptx.compile(wg_branchy, arch="sm_90a", constexprs={"AT": 15})
    assemble(ck.ptx, "sm_90a")
    lines = [l.strip() for l in ck.ptx.splitlines()]
    label = {l[:-1]: i for i, l in enumerate(lines) if l.endswith(":")}
    for name in ("wgmma.fence", "wgmma.mma_async", "wgmma.commit_group", "wgmma.wait_group"):
        at = next(i for i, l in enumerate(lines) if l.startswith(name))
        b = max(i for i in range(at) if lines[i].startswith("@") and " bra" in lines[i])
        assert label[lines[b].split()[-1].rstrip(";")] > at, (name, lines[b])


@pytest.mark.parametrize("at", [FENCE, MMA, COMMIT, WAIT, FENCE | MMA | COMMIT | WAIT])
@pytest.mark.parametrize("pattern", ["warp0", "warp3", "warps12", "one lane",
                                     "all but one lane", "odd lanes"])
def test_a_warp_dependent_branch_before_each_instruction(at, pattern):
    _run(_late(128, pattern), at)


def test_nobody_late_and_everybody_late():
    _run(np.zeros((128, 4)), 15)
    _run(np.ones((128, 4)), 15)


def test_two_warpgroups_and_two_blocks_arrive_in_different_orders():
    """Block of 256 (warpgroup 0: warp 0 late; warpgroup 1: warps 5 and 6 late, at other
    instructions), grid 2: each warpgroup is released on its own."""
    late = np.zeros((512, 4), np.int32)
    late[0:32, 0] = 1
    late[160:224, 1] = 1
    late[256 + 96:256 + 128, 2] = 1
    late[256 + 200, 3] = 1
    _run(late, 15, block=256, grid=2)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bits=st.lists(st.integers(0, 15), min_size=8, max_size=8),
       at=st.integers(1, 15))
def test_generated_arrival_orders(bits, at):
    """Per 16-thread slice (half a warp), which of the four branches it takes late."""
    late = np.array([[(b >> k) & 1 for k in range(4)] for b in bits for _ in range(16)])
    _run(late, at)


# ---- what a GPU leaves undefined ------------------------------------------------------------

@pyptx.kernel
def wg_bad_sync(out: f32[:], imga: u16[:], MODE: pyptx.constexpr):
    """MODE 0: warp 0 reaches wgmma.commit_group where the others reach wgmma.fence;
    MODE 1: warp 0 returns before the wgmma code; MODE 2: warp 0 skips it and exits at the end;
    MODE 3: warp 0 waits at bar.sync while the others wait at wgmma.fence."""
    s = pyptx.shared.array(64 * 16, u16)
    t = thread_idx.x
    for i in range(t, 64 * 16, 128):
        s[i] = imga[i]
    pyptx.fence_proxy_async()
    pyptx.syncthreads()
    d = pyptx.wgmma_desc(s, 0, swizzle=32)
    if MODE == 1:
        if t < 32:
            return
    if MODE == 3:
        if t < 32:
            pyptx.syncthreads()
    if MODE == 0 and t < 32:
        pyptx.wgmma_commit()
    elif MODE != 2 or t >= 32:
        pyptx.wgmma_fence()
        acc = pyptx.wgmma(d, d, (0.0,) * 4, atype="f16", scale_d=False)
        pyptx.wgmma_commit()
        pyptx.wgmma_wait(0)
        out[t] = acc[0]


def _bad(mode):
    ck = pyptx.compile(wg_bad_sync, arch="sm_90a", constexprs={"MODE": mode})
    assemble(ck.ptx, "sm_90a")
    lines = ck.ptx.splitlines()
    fence = 1 + next(i for i, l in enumerate(lines) if "wgmma.fence" in l)
    with pytest.raises(pyptx.LaunchError) as e:
        wg_bad_sync[1, 128](np.zeros(128, np.float32), np.zeros(64 * 16, np.uint16), mode)
    return str(e.value), lines, fence


def test_warps_at_different_warpgroup_instructions_are_a_launch_error():
    msg, lines, fence = _bad(0)
    commit = 1 + next(i for i, l in enumerate(lines) if "wgmma.commit_group" in l)
    assert "can never converge" in msg and "warpgroup of block (0, 0, 0) (warps 0-3)" in msg
    assert f"line {fence}" in msg and f"line {commit}" in msg, msg
    assert "32 lanes wait at 'wgmma.commit_group.sync.aligned'" in msg, msg


@pytest.mark.parametrize("mode", [1, 2])
def test_a_warp_that_exited_is_a_launch_error(mode):
    """MODE 1: the warp exits first (found when the others park); MODE 2: it exits after the
    others parked (found when nothing else can run)."""
    msg, _, fence = _bad(mode)
    assert "can never converge at 'wgmma.fence.sync.aligned'" in msg, msg
    assert f"PTX line {fence}" in msg and "warp 0: 32 lanes exited" in msg, msg
    assert "warp 1 waits there" in msg and "none may exit first" in msg, msg


def test_a_warp_at_bar_sync_while_the_others_wait_at_wgmma_is_reported_not_hung():
    msg, lines, fence = _bad(3)
    bar = [1 + i for i, l in enumerate(lines) if l.strip().startswith("bar.sync")][-1]
    assert f"PTX line {fence}" in msg and f"(PTX line {bar})" in msg, msg
    assert "warp 0: 32 lanes wait at 'bar.sync" in msg, msg


def test_a_warpgroup_that_exits_whole_leaves_the_others_running():
    """Block of 256: warpgroup 1 returns before any wgmma; warpgroup 0 computes its tile (all
    live warpgroups are complete: the instructions run inline, no LaunchError).  B is read
    through A's descriptor: its n8 x k16 operand is A's first 8 rows, so D = A @ A[:8].T."""
    Abits, Av = _halves("f16", (64, 16))
    out = np.full(256, np.nan, np.float32)
    wg_exit_half[1, 256](out, Layout(32, False, 64, 16).image(Abits))
    want = Av @ Av[:8].T
    # 16 exact products summed in float64, rounded once to f32
    bound = (2.0 ** -24 + 16 * 2.0 ** -53) * (np.abs(Av) @ np.abs(Av[:8]).T)
    for th in range(128):
        r, col = d_place(th, 0)
        assert abs(out[th] - want[r, col]) <= bound[r, col], th
    assert np.isnan(out[128:]).all()


@pyptx.kernel
def wg_exit_half(out: f32[:], imga: u16[:]):
    s = pyptx.shared.array(64 * 16, u16)
    t = thread_idx.x
    for i in range(t, 64 * 16, 256):
        s[i] = imga[i]
    pyptx.fence_proxy_async()
    pyptx.syncthreads()
    if t >= 128:
        return
    d = pyptx.wgmma_desc(s, 0, swizzle=32)
    pyptx.wgmma_fence()
    acc = pyptx.wgmma(d, d, (0.0,) * 4, atype="f16", scale_d=False)
    pyptx.wgmma_commit()
    pyptx.wgmma_wait(0)
    out[t] = acc[0]


def test_a_checked_launch_with_late_warps_is_clean_and_counts_each_wgmma_once():
    """Under the sanitizer and the profiler (which wrap the ops the scheduler releases) the
    parked-then-released instructions give the same D, no race, no uninitialised read, and
    the profiler counts each warpgroup instruction once per warp and the m64n8k16 wgmma as
    2*64*8*16 flops."""
    with pyptx.sanitize():
        _run(_late(128, "warp3"), FENCE | MMA | COMMIT | WAIT)
    with pyptx.profile() as prof:
        _run(np.zeros((128, 4)), FENCE | MMA | COMMIT | WAIT)
        _run(_late(128, "warp0"), FENCE | MMA | COMMIT | WAIT)
    even, late = prof.launches
    # 4 warpgroup instructions x 4 warps, whether the warps arrived together or one by one
    assert even.instructions["tensor"] == late.instructions["tensor"] == 16
    assert even.flops == 2 * 64 * 8 * 16
    # warp 0's late sides add one fma (2 flops) per lane per branch: 4 warp instructions
    assert late.instructions["fp32"] == 4 and late.flops == 2 * 64 * 8 * 16 + 4 * 32 * 2

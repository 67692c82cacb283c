"""`pyptx.elect_one` (PTX elect.sync), `pyptx.setmaxnreg` and `pyptx.launch_bounds`.

elect.sync: the PTX ISA promises one deterministic leader among the lanes of the member mask
that execute it; the hardware (and the CPU executor) elect the lowest such lane.  The reference
below is written from that statement alone: per warp, the lowest lane that reached the call.
setmaxnreg: the ISA's rules (a multiple of 8 in 24..256, .sync.aligned, the same instruction in
every warp of a warpgroup) are CompileErrors where the compiler can see them and LaunchErrors
of the CPU executor where only a run shows them; ptxas (sm_90a) must honour the hint, which it
does only when the kernel declares its register count at entry (launch_bounds).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyptx
from pyptx import i32, u32
from pyptx.errors import CompileError, LaunchError
from pyptx.runtime.cpu import ArrayArg, launch
from pyptx.toolchain import assemble


# ---- elect_one -------------------------------------------------------------------------------

@pyptx.kernel
def elect_divergent(out: i32[:], part: u32[:], EXPLICIT: pyptx.constexpr):
    """Lane l of warp w takes part when bit l of part[w] is set; those lanes elect a leader
    (with the active mask, or with the explicit mask part[w] itself)."""
    tid = pyptx.thread_idx.x
    lane = tid & 31
    mask = part[tid >> 5]
    out[tid] = -1
    if (mask >> u32(lane)) & 1:
        if EXPLICIT:
            e = pyptx.elect_one(mask)
        else:
            e = pyptx.elect_one(pyptx.activemask())
        if e:
            out[tid] = 1
        else:
            out[tid] = 0


@pyptx.kernel
def elect_converged(out: i32[:]):
    if pyptx.elect_one():
        out[pyptx.thread_idx.x] = 1


def _elect_reference(part: np.ndarray, threads: int) -> np.ndarray:
    """-1 for a lane that did not take part, 1 for the lowest lane that did, 0 for the others."""
    ref = np.full(threads, -1, np.int64)
    for w, m in enumerate(part.tolist()):
        lanes = [l for l in range(32) if (m >> l) & 1 and 32 * w + l < threads]
        for l in lanes:
            ref[32 * w + l] = 1 if l == min(lanes) else 0
    return ref


def _run_elect(part: np.ndarray, threads: int, explicit: bool) -> np.ndarray:
    ck = pyptx.compile(elect_divergent, arch="sm_90", constexprs={"EXPLICIT": explicit})
    out = np.zeros(threads, np.int32)
    launch(ck.ptx, ck.name, (1, 1, 1), (threads, 1, 1),
           [ArrayArg(out, True), out.size, ArrayArg(part, False), part.size])
    return out


@settings(max_examples=25, deadline=None)
@given(st.integers(33, 128), st.lists(st.integers(0, 2**32 - 1), min_size=4, max_size=4),
       st.booleans())
def test_elect_one_is_the_lowest_active_lane(threads, words, explicit):
    nwarps = (threads + 31) // 32
    part = np.array(words[:nwarps], np.uint32)
    if explicit:      # an explicit mask must hold every executing lane: only existing lanes
        last = threads - 32 * (nwarps - 1)
        part[-1] &= np.uint32((1 << last) - 1)
    got = _run_elect(part, threads, explicit)
    np.testing.assert_array_equal(got, _elect_reference(part, threads))


def test_elect_one_converged_warp_elects_lane_0_of_each_warp():
    ck = pyptx.compile(elect_converged, arch="sm_90")
    out = np.zeros(96, np.int32)
    launch(ck.ptx, ck.name, (1, 1, 1), (96, 1, 1), [ArrayArg(out, True), out.size])
    want = np.zeros(96, np.int32)
    want[[0, 32, 64]] = 1
    np.testing.assert_array_equal(out, want)


def test_elect_one_ptx_and_ptxas():
    ck = pyptx.compile(elect_divergent, arch="sm_90", constexprs={"EXPLICIT": False})
    assert "elect.sync" in ck.ptx
    assemble(ck.ptx, "sm_90")
    assemble(pyptx.compile(elect_divergent, arch="sm_90a",
                           constexprs={"EXPLICIT": True}).ptx, "sm_90a")


def test_elect_one_needs_sm_90():
    with pytest.raises(CompileError, match="elect.sync"):
        pyptx.compile(elect_converged, arch="sm_80")


def test_elect_one_mask_not_holding_the_lane_is_a_launch_error():
    @pyptx.kernel
    def bad(out: i32[:]):
        if pyptx.elect_one(u32(0b0110)):        # lanes 0..31 run it, lanes 1-2 in the mask
            out[pyptx.thread_idx.x] = 1
    ck = pyptx.compile(bad, arch="sm_90")
    out = np.zeros(32, np.int32)
    with pytest.raises(LaunchError, match="member mask"):
        launch(ck.ptx, ck.name, (1, 1, 1), (32, 1, 1), [ArrayArg(out, True), out.size])


def test_elect_one_bad_mask_is_a_compile_error():
    @pyptx.kernel
    def bad(out: i32[:]):
        if pyptx.elect_one(1.5):
            out[0] = 1
    with pytest.raises(CompileError, match="elect_one\\(\\)'s mask must be an integer"):
        pyptx.compile(bad, arch="sm_90")


# ---- setmaxnreg -------------------------------------------------------------------------------

@pyptx.kernel
def producer_consumers(out: i32[:], LO: pyptx.constexpr, HI: pyptx.constexpr):
    """Warpgroup 0 gives registers back, warpgroups 1 and 2 take them (the Hopper kernels'
    pattern, 384 threads); then every thread writes its index."""
    pyptx.launch_bounds(384, 1)
    tid = pyptx.thread_idx.x
    if tid < 128:
        pyptx.setmaxnreg(LO, inc=False)
    else:
        pyptx.setmaxnreg(HI, inc=True)
    out[tid] = tid


def test_setmaxnreg_ptxas_honours_it_for_sm_90a():
    ck = pyptx.compile(producer_consumers, arch="sm_90a", constexprs={"LO": 24, "HI": 240})
    assert "setmaxnreg.dec.sync.aligned.u32 24;" in ck.ptx
    assert "setmaxnreg.inc.sync.aligned.u32 240;" in ck.ptx
    assert ".maxntid 384, 1, 1" in ck.ptx and ".minnctapersm 1" in ck.ptx
    log = assemble(ck.ptx, "sm_90a", verbose=True)
    assert "C7508" not in log and "setmaxnreg' ignored" not in log, log
    # the count at entry: 65536 registers / 384 threads = 170, rounded down to a multiple of 8
    assert "Used 168 registers" in log, log


def test_setmaxnreg_runs_on_the_cpu_executor():
    ck = pyptx.compile(producer_consumers, arch="sm_90a", constexprs={"LO": 40, "HI": 232})
    out = np.zeros(384, np.int32)
    launch(ck.ptx, ck.name, (2, 1, 1), (384, 1, 1), [ArrayArg(out, True), out.size])
    np.testing.assert_array_equal(out, np.arange(384))


@pytest.mark.parametrize("n", [16, 20, 25, 264, 0, True, 32.0])
def test_setmaxnreg_bad_count_is_a_compile_error(n):
    with pytest.raises(CompileError, match="multiple of 8 from 24 to 256"):
        pyptx.compile(producer_consumers, arch="sm_90a", constexprs={"LO": n, "HI": 240})


def test_setmaxnreg_count_must_be_a_compile_time_int():
    @pyptx.kernel
    def bad(out: i32[:], n: i32):
        pyptx.launch_bounds(128)
        pyptx.setmaxnreg(n, inc=True)
    with pytest.raises(CompileError, match="compile-time int"):
        pyptx.compile(bad, arch="sm_90a")


def test_setmaxnreg_inc_must_be_a_literal_bool():
    @pyptx.kernel
    def bad(out: i32[:]):
        pyptx.launch_bounds(128)
        pyptx.setmaxnreg(32, inc=1)
    with pytest.raises(CompileError, match="inc must be the literal True"):
        pyptx.compile(bad, arch="sm_90a")


def test_setmaxnreg_without_launch_bounds_is_a_compile_error():
    @pyptx.kernel
    def bad(out: i32[:]):
        pyptx.setmaxnreg(32, inc=False)
    with pytest.raises(CompileError, match="launch_bounds"):
        pyptx.compile(bad, arch="sm_90a")


def test_setmaxnreg_is_sm_90a_only():
    with pytest.raises(CompileError, match="sm_90a"):
        pyptx.compile(producer_consumers, arch="sm_90", constexprs={"LO": 24, "HI": 240})


@pytest.mark.parametrize("args", [(0,), (1025,), (128, 0), (128, True), (1.5,)])
def test_launch_bounds_bad_values_are_compile_errors(args):
    @pyptx.kernel
    def bad(out: i32[:], A: pyptx.constexpr, B: pyptx.constexpr):
        pyptx.launch_bounds(A, B)
    a, b = (args + (1,))[:2]
    with pytest.raises(CompileError, match="launch_bounds\\(\\)'s"):
        pyptx.compile(bad, arch="sm_90a", constexprs={"A": a, "B": b})


@pyptx.kernel
def split_warpgroup(out: i32[:], SPLIT: pyptx.constexpr):
    """Warps 0-1 ask for 232 registers, warps 2-3 of the same warpgroup for SPLIT."""
    pyptx.launch_bounds(128)
    tid = pyptx.thread_idx.x
    if tid < 64:
        pyptx.setmaxnreg(232, inc=True)
    else:
        pyptx.setmaxnreg(SPLIT, inc=True)
    out[tid] = 1


def test_setmaxnreg_warpgroup_uniformity_is_checked():
    out = np.zeros(128, np.int32)
    ok = pyptx.compile(split_warpgroup, arch="sm_90a", constexprs={"SPLIT": 232})
    launch(ok.ptx, ok.name, (1, 1, 1), (128, 1, 1), [ArrayArg(out, True), out.size])
    assert (out == 1).all()
    bad = pyptx.compile(split_warpgroup, arch="sm_90a", constexprs={"SPLIT": 240})
    with pytest.raises(LaunchError, match="same setmaxnreg"):
        launch(bad.ptx, bad.name, (1, 1, 1), (128, 1, 1), [ArrayArg(out, True), out.size])


def test_setmaxnreg_in_a_diverged_warp_is_a_launch_error():
    @pyptx.kernel
    def bad(out: i32[:]):
        pyptx.launch_bounds(128)
        if pyptx.thread_idx.x & 1:
            pyptx.setmaxnreg(232, inc=True)
    ck = pyptx.compile(bad, arch="sm_90a")
    out = np.zeros(128, np.int32)
    with pytest.raises(LaunchError, match="converged"):
        launch(ck.ptx, ck.name, (1, 1, 1), (128, 1, 1), [ArrayArg(out, True), out.size])

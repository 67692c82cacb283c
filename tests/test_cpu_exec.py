"""CPU executor: control flow, barriers, shared memory, memcheck, printf, parser coverage."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
from pyptx.runtime.cpu import ArrayArg, launch
from test_cpu_util import HEADER, assert_ptxas_ok, inp, out, run

rng = np.random.default_rng(7)

SAXPY = HEADER + r"""
// saxpy: out[i] = a * x[i] + y[i]
.visible .entry saxpy(.param .u64 out, .param .u64 x, .param .u64 y, .param .f32 a,
                      .param .s32 n)
.maxntid 256, 1, 1
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<6>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [x];
    ld.param.u64 %rd3, [y];
    ld.param.f32 %f1, [a];
    ld.param.u32 %r1, [n];
    // line 12: i = block_idx.x * block_dim.x + thread_idx.x
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;   /* guard */
    @%p1 bra $L__BB0_2;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.s32 %rd5, %r5, 4;
    add.s64 %rd6, %rd4, %rd5;
    ld.global.f32 %f2, [%rd6];
    add.s64 %rd7, %rd3, %rd5;
    ld.global.f32 %f3, [%rd7];
    // line 14: out[i] = a * x[i] + y[i]
    mul.rn.f32 %f4, %f1, %f2;
    add.rn.f32 %f5, %f4, %f3;
    add.s64 %rd8, %rd1, %rd5;
    st.global.f32 [%rd8], %f5;
$L__BB0_2:
    ret;
}
"""


def test_saxpy_matches_numpy():
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    o = np.zeros(n, np.float32)
    run(SAXPY, "saxpy", (4, 1, 1), (256, 1, 1), [out(o), inp(x), inp(y), 2.5, n])
    assert np.array_equal(o, np.float32(2.5) * x + y)


def test_readonly_array_not_written_and_fault_leaves_outputs():
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    o = np.full(n, 7, np.float32)
    x0 = x.copy()
    # out aliases x but is read-only: nothing may change
    run(SAXPY, "saxpy", (4, 1, 1), (256, 1, 1), [inp(x), inp(x), inp(y), 2.5, n])
    assert np.array_equal(x, x0)
    with pytest.raises(pyptx.MemoryFault):
        run(SAXPY, "saxpy", (4, 1, 1), (256, 1, 1), [out(o), inp(x), inp(y[:900]), 2.5, n])
    assert np.all(o == 7)


def test_aliasing_arrays_share_memory():
    n = 256
    x = rng.standard_normal(n).astype(np.float32)
    ref = np.float32(2) * x + x
    run(SAXPY, "saxpy", (1, 1, 1), (256, 1, 1), [out(x), inp(x), inp(x), 2.0, n])
    assert np.array_equal(x, ref)


@pytest.mark.parametrize("kind", ["read", "write", "negative"])
def test_memory_fault_reports_where(kind):
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    o = np.zeros(n, np.float32)
    if kind == "read":
        args = [out(o), inp(x[:997]), inp(y), 1.0, n]
    elif kind == "write":
        args = [out(o[:990]), inp(x), inp(y), 1.0, n]
    else:
        args = [out(o), inp(x), inp(y), 1.0, n]
    ptx = SAXPY
    if kind == "negative":
        ptx = SAXPY.replace("add.s64 %rd6, %rd4, %rd5;", "sub.s64 %rd6, %rd4, %rd5;")
    with pytest.raises(pyptx.MemoryFault) as ei:
        run(ptx, "saxpy", (4, 1, 1), (256, 1, 1), args)
    e = ei.value
    assert e.kernel == "saxpy" and e.space == "global"
    if kind == "read":
        assert e.block == (3, 0, 0) and e.thread == (997 - 768, 0, 0)
        assert "0 bytes past the end of parameter 'x' (3988 bytes)" in str(e)
        assert e.source_line == 12 and e.ptx_line is not None
    elif kind == "write":
        assert e.thread == (990 - 768, 0, 0) and "parameter 'out'" in str(e)
        assert e.source_line == 14 and "Python line 14" in str(e)
        assert "st.global.f32" in str(e)
    else:
        assert e.thread == (1, 0, 0) and "before the start of parameter 'x'" in str(e)


SHARED_REDUCE = HEADER + r"""
.visible .entry block_sum(.param .u64 out, .param .u64 x)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b8 buf[1024];
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    shl.b32 %r5, %r1, 2;
    mov.u32 %r6, buf;
    add.s32 %r7, %r6, %r5;
    st.shared.f32 [%r7], %f1;
    bar.sync 0;
    shr.u32 %r8, %r3, 1;
LOOP:
    setp.eq.s32 %p1, %r8, 0;
    @%p1 bra DONE;
    setp.ge.u32 %p2, %r1, %r8;
    @%p2 bra SKIP;
    shl.b32 %r9, %r8, 2;
    add.s32 %r10, %r7, %r9;
    ld.shared.f32 %f2, [%r10];
    ld.shared.f32 %f3, [%r7];
    add.rn.f32 %f3, %f3, %f2;
    st.shared.f32 [%r7], %f3;
SKIP:
    bar.sync 0;
    shr.u32 %r8, %r8, 1;
    bra.uni LOOP;
DONE:
    setp.ne.s32 %p3, %r1, 0;
    @%p3 ret;
    ld.shared.f32 %f1, [buf];
    mul.wide.u32 %rd5, %r2, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.f32 [%rd6], %f1;
    ret;
}
"""


def _tree_sum(rows):
    v = rows.copy()
    w = v.shape[1]
    while w > 1:
        w //= 2
        v[:, :w] = v[:, :w] + v[:, w:2 * w]
    return v[:, 0]


def test_shared_reduction_with_barriers_in_loop():
    nb, bs = 37, 256
    x = rng.standard_normal(nb * bs).astype(np.float32)
    o = np.zeros(nb, np.float32)
    run(SHARED_REDUCE, "block_sum", (nb, 1, 1), (bs, 1, 1), [out(o), inp(x)])
    assert np.array_equal(o, _tree_sum(x.reshape(nb, bs)))


def test_shared_overflow_faults():
    x = rng.standard_normal(512).astype(np.float32)
    o = np.zeros(1, np.float32)
    with pytest.raises(pyptx.MemoryFault) as ei:   # 512 threads * 4 bytes > 1024 bytes
        run(SHARED_REDUCE, "block_sum", (1, 1, 1), (512, 1, 1), [out(o), inp(x)])
    assert ei.value.space == "shared" and ei.value.thread == (256, 0, 0)
    assert "shared memory is 1024 bytes" in str(ei.value)


DYN_SHARED = HEADER + r"""
.extern .shared .align 16 .b8 __dynamic_shared[];
.visible .entry rev(.param .u64 x)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    .reg .f32 %f<2>;
    ld.param.u64 %rd1, [x];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.f32 %f1, [%rd3];
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, __dynamic_shared;
    add.s32 %r4, %r3, %r2;
    st.shared.f32 [%r4], %f1;
    barrier.sync 0;
    mov.u32 %r5, %ntid.x;
    sub.s32 %r6, %r5, %r1;
    shl.b32 %r6, %r6, 2;
    add.s32 %r7, %r3, %r6;
    ld.shared.f32 %f1, [%r7+-4];
    st.global.f32 [%rd3], %f1;
    ret;
}
"""


def test_dynamic_shared_and_its_bound():
    x = rng.standard_normal(128).astype(np.float32)
    ref = x[::-1].copy()
    run(DYN_SHARED, "rev", 1, 128, [out(x)], shared_mem=512)
    assert np.array_equal(x, ref)
    with pytest.raises(pyptx.MemoryFault) as ei:
        run(DYN_SHARED, "rev", 1, 128, [out(x)], shared_mem=256)
    assert "dynamic shared memory" in str(ei.value)


DIVERGE = HEADER + r"""
.visible .entry diverge(.param .u64 out, .param .u64 cnt)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [cnt];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r5, [%rd4];          // trip count of this thread
    mov.u32 %r6, 0;
    mov.u32 %r7, 1;
    and.b32 %r8, %r1, 1;
    setp.eq.s32 %p1, %r8, 0;
    @%p1 bra EVEN;
    mov.u32 %r7, 3;                     // odd threads: step 3
    bra.uni LOOP;
EVEN:
    mov.u32 %r7, 5;                     // even threads: step 5
LOOP:
    setp.eq.u32 %p2, %r5, 0;
    @%p2 bra END;
    add.s32 %r6, %r6, %r7;
    mul.lo.s32 %r7, %r7, 7;
    sub.s32 %r5, %r5, 1;
    bra LOOP;
END:
    add.s64 %rd5, %rd1, %rd3;
    st.global.u32 [%rd5], %r6;
    ret;
}
"""


def test_divergent_if_else_and_loops():
    n = 300
    cnt = rng.integers(0, 20, n).astype(np.uint32)
    o = np.zeros(n, np.uint32)
    run(DIVERGE, "diverge", 3, 100, [out(o), inp(cnt)])
    ref = []
    for i in range(n):
        s, step = 0, 3 if (i % 100) % 2 else 5
        for _ in range(int(cnt[i])):
            s = (s + step) & 0xFFFFFFFF
            step = (step * 7) & 0xFFFFFFFF
        ref.append(s)
    assert o.tolist() == ref


PARTIAL_BAR = HEADER + r"""
.visible .entry pbar(.param .u64 x)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    mov.u32 %r1, %tid.x;
    setp.ge.u32 %p1, %r1, 40;
    @%p1 bra SKIP;
    bar.sync 0;
SKIP:
    ret;
}
"""

EXIT_BAR = HEADER + r"""
.visible .entry ebar(.param .u64 x)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    mov.u32 %r1, %tid.x;
    setp.ge.u32 %p1, %r1, 40;
    @%p1 ret;
    bar.sync 0;
    ret;
}
"""


@pytest.mark.parametrize("ptx,entry", [(PARTIAL_BAR, "pbar"), (EXIT_BAR, "ebar")])
def test_partial_barrier_is_launch_error(ptx, entry):
    x = np.zeros(4, np.float32)
    with pytest.raises(pyptx.LaunchError, match=r"bar.sync reached by only part of block \(1, 0, 0\)"):
        _partial_second_block(ptx, entry, x)


def _partial_second_block(ptx, entry, x):
    # block 0 is whole (40 >= its 32 threads); block 1 has 64 threads, only 40 reach the barrier
    p2 = ptx.replace("mov.u32 %r1, %tid.x;", "mov.u32 %r1, %tid.x;\n    mov.u32 %r2, %ctaid.x;\n"
                     "    mul.lo.s32 %r3, %r2, 64;\n    sub.s32 %r1, %r1, %r3;\n"
                     "    add.s32 %r1, %r1, 64;")
    run(p2, entry, (2, 1, 1), (64, 1, 1), [inp(x)])


def test_unknown_instruction_is_launch_error():
    ptx = SAXPY.replace("mul.rn.f32 %f4, %f1, %f2;", "mul.rn.f32 %f4, %f1, %f2;\n    prmt.b32 %r1, %r2, %r3, %r4;")
    assert_ptxas_ok(ptx)
    lines = ptx.splitlines()
    ln = next(i + 1 for i, l in enumerate(lines) if "prmt" in l)
    with pytest.raises(pyptx.LaunchError, match=rf"prmt.b32.*|PTX line {ln}") as ei:
        launch(ptx, "saxpy", 1, 32, [ArrayArg(np.zeros(32, np.float32), True),
                                     ArrayArg(np.zeros(32, np.float32)),
                                     ArrayArg(np.zeros(32, np.float32)), 1.0, 32])
    assert "prmt.b32" in str(ei.value) and f"line {ln}" in str(ei.value)


PRINTF = HEADER + r"""
.extern .func (.param .b32 func_retval0) vprintf (.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);
.global .align 1 .b8 $str0[22] = {116, 61, 37, 100, 32, 117, 61, 37, 117, 32, 102, 61, 37, 46, 51, 102, 32, 37, 108, 100, 10, 0};
.visible .entry pr(.param .f32 a)
{
    .local .align 8 .b8 __local_depot0[32];
    .reg .b32 %r<4>;
    .reg .b64 %rd<10>;
    .reg .f32 %f<2>;
    .reg .f64 %fd<2>;
    mov.u64 %rd1, __local_depot0;
    cvta.local.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    cvt.s64.s32 %rd3, %r1;
    st.local.u64 [%rd1], %rd3;
    sub.s32 %r2, 0, %r1;
    cvt.u64.u32 %rd4, %r2;
    st.local.u64 [%rd1+8], %rd4;
    ld.param.f32 %f1, [a];
    cvt.f64.f32 %fd1, %f1;
    st.local.f64 [%rd1+16], %fd1;
    mul.wide.s32 %rd5, %r1, -1000000000;
    st.local.u64 [%rd1+24], %rd5;
    mov.u64 %rd6, $str0;
    cvta.global.u64 %rd7, %rd6;
    {
    .reg .b32 temp_param_reg;
    .param .b64 param0;
    st.param.b64 [param0], %rd7;
    .param .b64 param1;
    st.param.b64 [param1], %rd2;
    .param .b32 retval0;
    call.uni (retval0), vprintf, (param0, param1);
    ld.param.b32 %r3, [retval0];
    }
    ret;
}
"""


def test_printf_thread_order(capsys):
    run(PRINTF, "pr", 2, 3, [1.25])
    lines = capsys.readouterr().out.splitlines()
    exp = [f"t={t} u={(-t) & 0xFFFFFFFF} f=1.250 {t * -1000000000}" for _ in range(2)
           for t in range(3)]
    assert lines == exp


def test_parser_accepts_vectors_guards_ranges_and_globals():
    ptx = HEADER + r"""
.global .align 4 .b32 table[4] = {10, 20, 30, 40};
.visible .entry vec(.param .u64 x)
.reqntid 64, 1, 1
{
    .pragma "nounroll";
    .reg .pred %p1, %p2;
    .reg .b32 %r<8>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [x];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 16;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd3];
    and.b32 %r2, %r1, 3;
    mul.wide.u32 %rd4, %r2, 4;
    mov.u64 %rd5, table;
    add.s64 %rd5, %rd5, %rd4;
    ld.global.u32 %r3, [%rd5];
    cvt.rn.f32.u32 %f5, %r3;
    setp.lt.u32 %p1, %r1, 32;
    not.pred %p2, %p1;
    @%p1 add.rn.f32 %f1, %f1, %f5;
    @!%p1 sub.rn.f32 %f2, %f2, %f5;
    mov.b32 %r4, %f3;
    xor.b32 %r4, %r4, -2147483648;
    mov.b32 %f3, %r4;
    mov.b64 %rd4, {%r1, %r2};
    st.global.v2.f32 [%rd3], {%f1, %f2};
    st.global.f32 [%rd3+8], %f3;
    ret;
}
"""
    x = rng.standard_normal((64, 4)).astype(np.float32)
    ref = x.copy()
    t = np.arange(64)
    add = np.array([10, 20, 30, 40], np.float32)[t % 4]
    ref[t < 32, 0] += add[t < 32]
    ref[t >= 32, 1] -= add[t >= 32]
    ref[:, 2] = -ref[:, 2]
    run(ptx, "vec", 1, 64, [out(x)])
    assert np.array_equal(x, ref)


def test_misaligned_vector_access_faults():
    x = np.zeros(64 * 4 + 1, np.float32)
    ptx = HEADER + r"""
.visible .entry mis(.param .u64 x)
{
    .reg .b64 %rd<3>;
    .reg .f32 %f<3>;
    ld.param.u64 %rd1, [x];
    ld.global.v2.f32 {%f1, %f2}, [%rd1+4];
    ret;
}
"""
    with pytest.raises(pyptx.MemoryFault, match="misaligned"):
        run(ptx, "mis", 1, 32, [inp(x)])


GENERIC = HEADER + r"""
.visible .entry gen(.param .u64 x, .param .u64 h)
{
    .local .align 4 .b8 loc[16];
    .shared .align 4 .b8 sh[256];
    .reg .pred %p<2>;
    .reg .b16 %rs<4>;
    .reg .b16 %h<4>;
    .reg .b32 %r<8>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [x];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.f32 %f1, [%rd3];
    // through a generic pointer into shared memory
    mov.u64 %rd4, sh;
    cvta.shared.u64 %rd5, %rd4;
    add.s64 %rd6, %rd5, %rd2;
    st.f32 [%rd6], %f1;
    bar.sync 0;
    xor.b32 %r2, %r1, 1;
    mul.wide.u32 %rd7, %r2, 4;
    add.s64 %rd8, %rd5, %rd7;
    ld.f32 %f2, [%rd8];
    // through a generic pointer into local memory
    mov.u64 %rd9, loc;
    cvta.local.u64 %rd10, %rd9;
    st.f32 [%rd10+8], %f2;
    ld.local.f32 %f3, [loc+8];
    st.global.f32 [%rd3], %f3;
    // f16 and 8-bit registers
    ld.param.u64 %rd11, [h];
    mul.wide.u32 %rd2, %r1, 2;
    add.s64 %rd11, %rd11, %rd2;
    ld.global.b16 %h1, [%rd11];
    mov.b16 %h2, 0x3C00;
    add.rn.f16 %h3, %h1, %h2;
    st.global.b16 [%rd11], %h3;
    ret;
}
"""


def test_generic_addressing_local_shared_and_f16():
    x = rng.standard_normal(64).astype(np.float32)
    h = rng.standard_normal(64).astype(np.float16)
    ref_x = x.reshape(-1, 2)[:, ::-1].reshape(-1).copy()
    ref_h = h + np.float16(1)
    run(GENERIC, "gen", 1, 64, [out(x), out(h)])
    assert np.array_equal(x, ref_x)
    assert np.array_equal(h, ref_h)


def test_lark_is_imported_lazily():
    import subprocess
    import sys
    code = ("import sys, pyptx.runtime.cpu as c; assert 'lark' not in sys.modules; "
            "print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**__import__("os").environ,
                            "PYTHONPATH": __import__("os").path.dirname(
                                __import__("os").path.dirname(__file__))})
    assert r.stdout.strip() == "ok", r.stderr


def test_parse_is_cached_by_text():
    from pyptx.runtime.cpu import program as prog
    x = np.zeros(4, np.float32)
    run(DYN_SHARED, "rev", 1, 4, [out(x)], shared_mem=16)
    p1 = prog.program(DYN_SHARED)
    run(DYN_SHARED, "rev", 1, 4, [out(x)], shared_mem=16)
    assert prog.program(DYN_SHARED) is p1

"""Control flow: block arguments as parallel copies, critical edges, loops, layout.

Each kernel is run by a tiny reference interpreter (test_ptx_support.run_scalar) and compared
with the same computation in Python, and assembled with ptxas."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, strategies as st
from ptx_ir_helpers import FnBuilder

from pyptx.ir.core import Const
from pyptx.ptx import emit
from pyptx.ptx.copies import sequentialize
from pyptx.types import bool_, i32

from test_ptx_support import assemble_ok, instructions, run_scalar


def c32(v):
    return Const(i32, v)


def fib_kernel():
    """(a, b) = (b, a + b) n times: the loop header's arguments are permuted on the back edge."""
    b = FnBuilder("fib")
    out = b.ptr("out", i32)
    n = b.param("n", i32)
    head = b.block("head", i32, i32, i32)
    body = b.block("body")
    exit_ = b.block("exit", i32)
    b.br(head, c32(0), c32(1), c32(0))
    b.at(head)
    a, bb, i = head.args
    b.cbr(b.op("cmp", [i, n], bool_, pred="lt"), body, [], exit_, [a])
    b.at(body)
    s = b.op("add", [a, bb], i32)
    b.br(head, bb, s, b.op("add", [i, c32(1)], i32))
    b.at(exit_)
    b.store(out, exit_.args[0])
    b.ret()
    return b.fn


def rotate_kernel(k: int):
    """k values rotated by one position per iteration; the back edge is a critical edge (cbr
    into the header, which has arguments) and the copies form one k-cycle."""
    b = FnBuilder(f"rot{k}")
    out = b.ptr("out", i32)
    n = b.param("n", i32)
    head = b.block("head", *[i32] * (k + 1))
    exit_ = b.block("exit", *[i32] * k)
    b.br(head, *[c32(10 + j) for j in range(k)], c32(0))
    b.at(head)
    *vals, i = head.args
    nxt = b.op("add", [i, c32(1)], i32)
    b.cbr(b.op("cmp", [nxt, n], bool_, pred="le"), head, vals[1:] + vals[:1] + [nxt],
          exit_, vals)
    b.at(exit_)
    for j, v in enumerate(exit_.args):
        b.store(b.gep(out, c32(j)), v)
    b.ret()
    return b.fn


def diamond_kernel(const_cond=None):
    """cbr whose two targets both take arguments, laid out away from the branch."""
    b = FnBuilder("diamond")
    out = b.ptr("out", i32)
    x = b.param("x", i32)
    y = b.param("y", i32)
    join = b.block("join", i32, i32)
    left = b.block("left", i32)
    right = b.block("right", i32)
    cond = Const(bool_, const_cond) if const_cond is not None else \
        b.op("cmp", [x, y], bool_, pred="gt")
    b.cbr(cond, right, [y], left, [x])
    b.at(left)
    b.br(join, left.args[0], b.op("mul", [left.args[0], c32(3)], i32))
    b.at(right)
    b.br(join, b.op("sub", [right.args[0], c32(7)], i32), right.args[0])
    b.at(join)
    b.store(out, b.op("add", [b.op("mul", [join.args[0], c32(100)], i32), join.args[1]], i32))
    b.ret()
    return b.fn


def _py_fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return (a + 2**31) % 2**32 - 2**31


@pytest.mark.parametrize("n", [0, 1, 2, 7, 30, 50])
def test_fib_loop_runs_right(n):
    text = emit(fib_kernel(), "sm_80").text
    assert run_scalar(text, {"n": n}) == {("out", 0): _py_fib(n)}


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_rotation_cycles(k):
    text = emit(rotate_kernel(k), "sm_80").text
    rng = random.Random(k)
    for n in [1, 2, 3] + [rng.randint(4, 40) for _ in range(3)]:
        vals = [10 + j for j in range(k)]
        for _ in range(n):
            vals = vals[1:] + vals[:1]
        got = run_scalar(text, {"n": n})
        assert [got[("out", 4 * j)] for j in range(k)] == vals, n


def test_diamond_both_edges_carry_arguments():
    text = emit(diamond_kernel(), "sm_80").text
    rng = random.Random(3)
    for _ in range(10):
        x, y = rng.randint(-1000, 1000), rng.randint(-1000, 1000)
        a, b2 = (y - 7, y) if x > y else (x, x * 3)
        assert run_scalar(text, {"x": x, "y": y}) == {("out", 0): a * 100 + b2}


@pytest.mark.parametrize("cond", [True, False])
def test_constant_condition_branch(cond):
    text = emit(diamond_kernel(cond), "sm_80").text
    assert not any(i.startswith("setp") for i in instructions(text))
    x, y = 5, 9
    a, b2 = (y - 7, y) if cond else (x, x * 3)
    assert run_scalar(text, {"x": x, "y": y}) == {("out", 0): a * 100 + b2}


def test_control_flow_kernels_assemble():
    fns = [fib_kernel(), rotate_kernel(3), diamond_kernel(), diamond_kernel(True)]
    assemble_ok([(emit(f, a).text, a) for f in fns for a in ("sm_80", "sm_90")])


def test_fallthrough_avoids_needless_branches():
    """No `bra` to the label right after it; the loop itself has one conditional exit and one
    back edge (the exit's copy lives in an edge block outside the loop)."""
    for fn in (fib_kernel(), rotate_kernel(2), diamond_kernel()):
        lines = [ln.strip() for ln in emit(fn, "sm_80").text.splitlines() if ln.strip()]
        for a, b2 in zip(lines, lines[1:]):
            if a.startswith(("bra ", "@")) and "bra" in a:
                assert b2 != a.split()[-1].rstrip(";") + ":", (a, b2)
    lines = [ln.strip() for ln in emit(fib_kernel(), "sm_80").text.splitlines()]
    loop = lines[lines.index("$L__BB1:"):lines.index("bra $L__BB1;") + 1]
    assert sum("bra" in ln for ln in loop) == 2


@given(st.permutations(list(range(6))), st.lists(st.integers(0, 5), min_size=0, max_size=3))
def test_sequentialize_is_a_parallel_copy(perm, consts):
    """dst_i <- src_i all at once, for permutations (cycles) plus some immediates."""
    regs = {f"%r{i}": 100 + i for i in range(6)}
    copies = [(f"%r{i}", f"%r{perm[i]}", "b32") for i in range(6)]
    for c in consts:                                    # overwrite some with immediates
        copies[c] = (f"%r{c}", str(7000 + c), "b32")
    want = dict(regs)
    for d, s, _ in copies:
        want[d] = regs[s] if s.startswith("%") else int(s)
    temps = iter(range(50, 80))
    state = dict(regs)
    for d, s, _ in sequentialize(copies, lambda d: f"%r{next(temps)}"):
        state[d] = state[s] if s.startswith("%") else int(s)
    assert {k: state[k] for k in want} == want

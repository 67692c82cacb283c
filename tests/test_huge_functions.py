"""Huge straight-line and branchy kernels: thousands of blocks must compile without recursion.

SSA construction reads a variable back through every block since its last definition, and an
elif chain is an `If` nested in the previous one's `orelse`; both used to recurse once per block
and hit Python's recursion limit (about 500 blocks).  Each kernel here is far past that, is run on
the CPU executor against numpy (random inputs, NaN-poisoned outputs), and its IR goes through the
printer, the parser, the verifier and the dominator tree, which must all stay iterative.
"""
import numpy as np
import pytest

import pyptx
from pyptx import f32
from pyptx.compiler import resolve_param_types
from pyptx.frontend import lower_kernel
from pyptx.ir import parse_function, print_function, verify
from pyptx.ir.analysis import DomTree
from pyptx.passes import run_pipeline

from kernel_factory import make_kernel

N_UNROLL = 3000
N_IFS = 1500
N_ELIFS = 1200          # CPython's own compiler overflows on elif chains near 3000

THREADS = 64


@pyptx.kernel
def unrolled_ifs(x: f32[:], out: f32[:]):
    # `i` is read only after the loop: its read walks back through all N_UNROLL joins
    i = pyptx.thread_idx.x
    v = x[i]
    acc = f32(0)
    for j in pyptx.static_range(N_UNROLL):
        if v > f32(j):
            acc += f32(j % 5)
    out[i] = acc


def _sequential_ifs_src(n: int) -> str:
    lines = ["import pyptx", "from pyptx import f32", "",
             "def seq_ifs(x: f32[:], out: f32[:]):",
             "    i = pyptx.thread_idx.x",
             "    v = x[i]",
             "    acc = f32(0)"]
    for j in range(n):
        lines += [f"    if v > f32({j}):", f"        acc += f32({j % 7})"]
    lines.append("    out[i] = acc")
    return "\n".join(lines) + "\n"


def _elif_chain_src(n: int) -> str:
    lines = ["import pyptx", "from pyptx import f32", "",
             "def elif_chain(x: f32[:], out: f32[:]):",
             "    i = pyptx.thread_idx.x",
             "    v = x[i]",
             "    acc = f32(-1)",
             "    if v < f32(0):",
             "        acc = f32(0)"]
    for j in range(1, n):
        lines += [f"    elif v < f32({j}):", f"        acc = f32({3 * j})"]
    lines += ["    else:", "        acc = f32(-2)", "    out[i] = acc"]
    return "\n".join(lines) + "\n"


def _expect_sum(x, n, mod):
    js = np.arange(n, dtype=np.float32)
    return np.array([(js[xv > js] % mod).sum() for xv in x], np.float32)


def _expect_elif(x, n):
    out = np.full(x.shape, -2.0, np.float32)
    for k, xv in enumerate(x):
        for j in range(n):
            if xv < j:
                out[k] = 3 * j
                break
    return out


CASES = {
    "unrolled": (lambda: unrolled_ifs, N_UNROLL, lambda x: _expect_sum(x, N_UNROLL, 5)),
    "sequential_ifs": (lambda: pyptx.kernel(make_kernel(_sequential_ifs_src(N_IFS))), N_IFS,
                       lambda x: _expect_sum(x, N_IFS, 7)),
    "elif_chain": (lambda: pyptx.kernel(make_kernel(_elif_chain_src(N_ELIFS))), N_ELIFS,
                   lambda x: _expect_elif(x, N_ELIFS)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_huge_kernel_runs(case, cpu_device):
    make, n, expect = CASES[case]
    kern = make()
    rng = np.random.default_rng(7)
    # a spread over the whole range, plus values outside it on both sides
    x = (rng.random(THREADS) * (n + 20) - 10).astype(np.float32)
    out = np.full(THREADS, np.nan, np.float32)
    kern[1, THREADS](x, out)
    np.testing.assert_allclose(out, expect(x), rtol=1e-6)


@pytest.mark.parametrize("opt_level", [0, 2])
@pytest.mark.parametrize("case", ["sequential_ifs", "elif_chain"])
def test_huge_kernel_ir_tools(case, opt_level):
    """Printer, parser, verifier, pass pipeline and dominator tree on thousands of blocks.

    (Frontend and passes only: ptxas needs minutes for the unoptimised PTX of these.)"""
    make, n, _ = CASES[case]
    py_func = make().py_func
    fn = run_pipeline(lower_kernel(py_func, resolve_param_types(py_func), {}),
                      opt_level=opt_level)
    text = print_function(fn)
    back = parse_function(text)
    verify(back)
    assert print_function(back) == text
    assert len(back.blocks) > n
    dom = DomTree(back)
    assert all(dom.reachable(b) for b in back.blocks)
    # the dominator tree is a chain at least as deep as the chain of ifs
    depth = {}
    for b in dom.rpo:                     # every idom comes before its children in rpo
        depth[b] = 0 if dom.idom[b] is b else depth[dom.idom[b]] + 1
    assert max(depth.values()) >= n - 1
    deepest = max(depth, key=depth.__getitem__)
    assert dom.dominates(back.blocks[0], deepest)

"""Fused gate/up SwiGLU and RoPE on rows that do not start 16-byte aligned (VEC = 1): the bulk is
read (and, for RoPE, written) in 128-bit chunks on the array's 16-byte grid with a partial first
and last chunk; the operand on another grid (x's row next to a weight row, a NeoX head's second
half) goes element by element.  Every residue of the row start mod 4 is hit; outputs are
NaN-poisoned; the CPU executor faults on a misaligned 16-byte access or an out-of-row one."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyptx
import stdlib_kernels as sk
from stdlib_kernels.rope import inv_frequencies, rope_vec
from test_stdlib_refs import poisoned, randn, rng, rope_ref, swiglu_ref


def gate_up_ref(x, wg, wu):
    x64 = x.astype(np.float64)
    return swiglu_ref(x64 @ wg.T.astype(np.float64), x64 @ wu.T.astype(np.float64))


@pytest.mark.parametrize("m,k,ff", [(5, 1, 6), (4, 2, 9), (5, 3, 7), (6, 5, 5), (4, 37, 11),
                                    (3, 130, 8), (2, 1001, 9)])
def test_gate_up_swiglu_misaligned_k(m, k, ff):
    r = rng(7 * k + ff)
    x, wg, wu = randn(r, m, k), randn(r, ff, k, scale=0.3), randn(r, ff, k, scale=0.3)
    out = poisoned((m, ff))
    sk.gate_up_swiglu_kernel[(ff, m), 32](out, x, wg, wu, 1)
    np.testing.assert_allclose(out, gate_up_ref(x, wg, wu), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(sk.gate_up_swiglu(x, wg, wu), gate_up_ref(x, wg, wu),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layout", ["neox", "gptj"])
@pytest.mark.parametrize("seq,n_heads,hd", [(5, 1, 2), (4, 3, 6), (3, 5, 10), (5, 2, 12),
                                            (3, 3, 66), (2, 5, 100), (2, 3, 130)])
def test_rope_misaligned_heads(layout, seq, n_heads, hd):
    neox = layout == "neox"
    r = rng(seq * 1000 + n_heads * 10 + hd)
    x = randn(r, seq, n_heads, hd, scale=2.0)
    pos = r.integers(0, 300, seq).astype(np.int32)
    want = rope_ref(x, pos, 10000.0, layout)
    out = poisoned(x.shape)
    sk.rope_kernel[seq, 128](out, x, pos, inv_frequencies(hd, 10000.0), neox, 1,
                             shared_mem=4 * hd)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)
    if rope_vec(hd, neox) == 1:
        np.testing.assert_allclose(sk.rope(x, pos, layout=layout), want, rtol=1e-5, atol=1e-4)


def test_rope_misaligned_few_threads_many_heads():
    """More chunks than threads (grid-stride loop over (head, chunk))."""
    r = rng(9)
    x = randn(r, 2, 7, 70)
    pos = np.array([3, 1000], np.int32)
    for neox in (True, False):
        out = poisoned(x.shape)
        sk.rope_kernel[2, 32](out, x, pos, inv_frequencies(70, 10000.0), neox, 1,
                              shared_mem=4 * 70)
        np.testing.assert_allclose(out, rope_ref(x, pos, 10000.0, "neox" if neox else "gptj"),
                                   rtol=1e-5, atol=2e-4)


@settings(max_examples=6, deadline=None)
@given(half=st.integers(1, 40), n_heads=st.integers(1, 4), seq=st.integers(1, 5),
       neox=st.booleans(), seed=st.integers(0, 2**16))
def test_rope_any_head_dim(half, n_heads, seq, neox, seed):
    hd = 2 * half
    r = rng(seed)
    x = randn(r, seq, n_heads, hd)
    pos = r.integers(0, 100, seq)
    layout = "neox" if neox else "gptj"
    np.testing.assert_allclose(sk.rope(x, pos, layout=layout), rope_ref(x, pos, 1e4, layout),
                               rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("kernel,cx", [
    (sk.gate_up_swiglu_kernel, {"VEC": 1}),
    (sk.rope_kernel, {"NEOX": True, "VEC": 1}),
    (sk.rope_kernel, {"NEOX": False, "VEC": 1}),
])
def test_misaligned_paths_use_128_bit_loads(kernel, cx):
    ptx = pyptx.compile(kernel, constexprs=cx).ptx
    lines = ptx.splitlines()
    assert any("ld.global" in ln and ".v4.f32" in ln for ln in lines)
    if kernel is sk.rope_kernel:
        assert any("st.global" in ln and ".v4.f32" in ln for ln in lines)

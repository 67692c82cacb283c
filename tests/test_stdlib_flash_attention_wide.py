"""flash_attention on tensor cores beyond head_dim 128 (`flash_attention_tc_wide_kernel`: 144..256)
and the softmax step both tensor-core kernels share: against a float64 reference within the error
bound of test_stdlib_flash_attention.error_bound; causal and not, GQA, seq_q != seq_k, odd lengths; scores whose
maximum keeps growing (the bias of P moves) or never grows after the first tile (O's rescale is
skipped); negative and zero scales."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
import stdlib_kernels as sk
from pyptx.bfloat16 import from_bf16, to_bf16
from stdlib_kernels.flash_attention import LOG2E, flash_attention_arrays
from stdlib_kernels.flash_attention_wide import (WIDE_THREADS, WQ, flash_attention_tc_wide_kernel,
                                                 passes)

from test_stdlib_flash_attention import assert_within_bound, reference

rng = np.random.default_rng(777)


def _qkv(qs, kvs, dtype=np.float16):
    return tuple(rng.standard_normal(s).astype(dtype) for s in (qs, kvs, kvs))


@pytest.mark.parametrize("qs, kvs, causal", [
    ((2, 20, 256), (2, 20, 256), False),
    ((4, 37, 256), (2, 45, 256), True),         # GQA, seq_q < seq_k, ragged tiles
    ((1, 70, 144), (1, 33, 144), True),         # seq_q > seq_k: rows that see no key
    ((2, 1, 9, 208), (2, 1, 9, 208), False),    # batch
])
def test_wide_head_dims_f16(qs, kvs, causal):
    q, k, v = _qkv(qs, kvs)
    out = sk.flash_attention(q, k, v, causal=causal)
    assert out.dtype == np.float16 and out.shape == q.shape
    assert_within_bound(out, q, k, v, causal)


@pytest.mark.parametrize("d, causal", [(256, True), (176, False)])
def test_wide_head_dims_bf16(d, causal):
    q, k, v = (to_bf16(x) for x in _qkv((2, 19, d), (1, 40, d), np.float32))
    out = flash_attention_arrays("bf16", q, k, v, 2, causal, 1 / np.sqrt(d))
    assert_within_bound(from_bf16(out), from_bf16(q), from_bf16(k), from_bf16(v), causal,
                        kind="bf16")


def test_wide_every_output_written_and_sanitizer_clean():
    """Direct launch into a NaN-poisoned output, under the race/uninitialised-read sanitizer
    (the zero-filled rows past the ends count as written)."""
    q, k, v = _qkv((2, 21, 256), (1, 23, 256))
    out = np.full(q.shape, 0x7E00, np.uint16)                    # f16 NaN
    with pyptx.sanitize(race=True, init=True):
        for c0, dv in passes(256):
            flash_attention_tc_wide_kernel[(-(-21 // WQ), 2), WIDE_THREADS](
                out, *(x.view(np.uint16) for x in (q, k, v)), 2, np.float32(LOG2E / 16), 256,
                c0, dv, True, False)
    assert_within_bound(out.view(np.float16), q, k, v, True)


@pytest.mark.parametrize("d", [64, 256])
@pytest.mark.parametrize("grow", [True, False])
def test_running_maximum_moves_or_not(d, grow):
    """Key norms growing along the sequence push each row's maximum up by far more than the
    slack tile after tile (the bias moves, O is rescaled); shrinking norms leave the first tile's
    maximum in place (every later rescale is skipped)."""
    q, k, v = _qkv((1, 40, d), (1, 150, d))
    ramp = np.linspace(0.2, 3.0, 150)[:, None]
    k = (k.astype(np.float32) * (ramp if grow else ramp[::-1])).astype(np.float16)
    out = sk.flash_attention(q, k, v, causal=False)
    assert_within_bound(out, q, k, v, False)


@pytest.mark.parametrize("d", [64, 256])
@pytest.mark.parametrize("scale", [-0.2, 0.0])
def test_negative_and_zero_scale(d, scale):
    q, k, v = _qkv((1, 18, d), (1, 35, d))
    out = sk.flash_attention(q, k, v, causal=True, scale=scale)
    assert_within_bound(out, q, k, v, True, scale)


def test_head_dim_limits():
    x = np.zeros((1, 4, 264), np.float16)
    with pytest.raises(ValueError, match="at most 256"):
        sk.flash_attention(x, x, x)
    x = np.zeros((1, 4, 200), np.float16)
    with pytest.raises(ValueError, match="multiple of 16"):
        sk.flash_attention(x, x, x)

"""stdlib kv_scatter and decode_attention (single pass, split-K, GQA) against float64 numpy."""
from __future__ import annotations

import numpy as np
import pytest

import stdlib_kernels as sk
from test_stdlib_refs import decode_ref, poisoned, randn, rng

RTOL, ATOL = 2e-5, 2e-6


def caches(r, n_kv, max_seq, hd):
    return randn(r, n_kv, max_seq, hd), randn(r, n_kv, max_seq, hd)


@pytest.mark.parametrize("n_heads,n_kv,hd,seq_len", [
    (1, 1, 32, 1), (2, 2, 7, 7), (4, 2, 64, 33), (6, 3, 33, 20), (8, 1, 128, 5)])
def test_decode_attention_single_pass(n_heads, n_kv, hd, seq_len):
    r = rng(n_heads * 1000 + hd + seq_len)
    kc, vc = caches(r, n_kv, 40, hd)
    q = randn(r, n_heads, hd, scale=2.0)
    out = sk.decode_attention(q, kc, vc, seq_len)
    np.testing.assert_allclose(out, decode_ref(q, kc, vc, seq_len), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("n_heads,n_kv,hd,seq_len", [
    (3, 1, 128, 45),      # 96 threads stage 3 rows a step: 32 rows leave a remainder step
    (1, 1, 96, 50),       # 24 vectors a row do not divide 32 threads: the flat staging loop
    (4, 2, 92, 40),       # head_dim past the last full 32-lane column group: clamped columns
    (2, 1, 90, 37)])      # head_dim % 4 != 0: scalar staging
def test_decode_attention_staging_paths(n_heads, n_kv, hd, seq_len):
    r = rng(n_heads * 100 + hd)
    kc, vc = caches(r, n_kv, 64, hd)
    q = randn(r, n_heads, hd, scale=2.0)
    for splits in (1, 2):
        out = sk.decode_attention(q, kc, vc, seq_len, num_splits=splits)
        np.testing.assert_allclose(out, decode_ref(q, kc, vc, seq_len), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("num_splits", [2, 3, 7])
@pytest.mark.parametrize("seq_len", [7, 33])
def test_decode_attention_split_k_matches(num_splits, seq_len):
    r = rng(num_splits * 100 + seq_len)
    kc, vc = caches(r, 2, 40, 64)
    q = randn(r, 4, 64, scale=2.0)
    out = sk.decode_attention(q, kc, vc, seq_len, num_splits=num_splits)
    np.testing.assert_allclose(out, decode_ref(q, kc, vc, seq_len), rtol=RTOL, atol=ATOL)


def test_decode_attention_kernels_write_every_element():
    r = rng(5)
    kc, vc = caches(r, 2, 16, 40)
    q = randn(r, 4, 40)
    ref = decode_ref(q, kc, vc, 13)
    scale = np.float32(1.4426950408889634 / np.sqrt(40))     # scale · log2(e)
    dummy_ml, dummy_acc = np.zeros((1, 1, 2), np.float32), np.zeros((1, 1, 1), np.float32)
    out = poisoned((4, 40))
    # grid (n_kv, splits), 32 threads per query head of a group; DPL, TILE, GROUP, VEC, SPLIT
    sk.decode_attention_kernel[(2, 1), 64](out, dummy_ml, dummy_acc, q, kc, vc, 13, 13, scale,
                                           2, 32, 2, True, False)
    np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL)
    part_ml, part_acc = poisoned((4, 3, 2)), poisoned((4, 3, 40))
    sk.decode_attention_kernel[(2, 3), 64](out, part_ml, part_acc, q, kc, vc, 13, 5, scale,
                                           2, 8, 2, False, True)
    assert not np.isnan(part_ml).any() and not np.isnan(part_acc).any()
    out = poisoned((4, 40))
    sk.decode_merge_kernel[2, 128](out, part_ml, part_acc)
    np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL)


def test_decode_attention_flat_q_and_empty_cache():
    r = rng(6)
    kc, vc = caches(r, 2, 8, 16)
    q = randn(r, 4 * 16)
    out = sk.decode_attention(q, kc, vc, 8)
    assert out.shape == (64,)
    np.testing.assert_allclose(out, decode_ref(q, kc, vc, 8), rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(sk.decode_attention(q, kc, vc, 0), np.zeros(64, np.float32))


@pytest.mark.parametrize("num_splits", [1, 3])
def test_decode_attention_peaked_scores_are_stable(num_splits):
    """Scores of ±hundreds: the online softmax and the split merge must rescale, not overflow."""
    r = rng(7)
    kc, vc = caches(r, 1, 12, 32)
    q = randn(r, 2, 32, scale=100.0)
    out = sk.decode_attention(q, kc, vc, 12, num_splits=num_splits)
    np.testing.assert_allclose(out, decode_ref(q, kc, vc, 12), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("hd", [1, 7, 33])
def test_kv_scatter_writes_one_position_in_place(hd):
    r = rng(hd)
    cache = randn(r, 3, 5, hd)
    before = cache.copy()
    src = randn(r, 3 * hd)
    out = sk.kv_scatter(src, cache, 2)
    assert out is cache
    expect = before.copy()
    expect[:, 2, :] = src.reshape(3, hd)
    np.testing.assert_array_equal(cache, expect)


def test_kv_scatter_then_decode():
    """Fill a cache token by token, then attend over it (an autoregressive decode step)."""
    r = rng(8)
    n_kv, hd, steps = 2, 16, 6
    kc, vc = np.zeros((n_kv, 8, hd), np.float32), np.zeros((n_kv, 8, hd), np.float32)
    ks, vs = randn(r, steps, n_kv * hd), randn(r, steps, n_kv * hd)
    for t in range(steps):
        sk.kv_scatter(ks[t], kc, t)
        sk.kv_scatter(vs[t].reshape(n_kv, hd), vc, t)
    np.testing.assert_array_equal(kc[:, :steps], ks.reshape(steps, n_kv, hd).transpose(1, 0, 2))
    q = randn(r, 4, hd)
    np.testing.assert_allclose(sk.decode_attention(q, kc, vc, steps),
                               decode_ref(q, kc, vc, steps), rtol=RTOL, atol=ATOL)


@pytest.mark.slow
def test_decode_attention_llama_preset():
    """Llama-3-8B-like: 32 query heads, 8 KV heads, head_dim 128, 600 cached tokens (split-K)."""
    r = rng(9)
    kc, vc = caches(r, 8, 640, 128)
    q = randn(r, 32, 128)
    out = sk.decode_attention(q, kc, vc, 600)
    np.testing.assert_allclose(out, decode_ref(q, kc, vc, 600), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("seq_len", [1, 257, 3000])
def test_flash_decoding_lengths_with_gqa(seq_len):
    r = rng(seq_len + 17)
    kc, vc = caches(r, 2, 3072, 64)
    q = randn(r, 8, 64, scale=2.0)
    out = sk.decode_attention(q, kc, vc, seq_len)
    np.testing.assert_allclose(out, decode_ref(q, kc, vc, seq_len), rtol=1e-4, atol=1e-5)


def test_flash_decoding_fills_the_gpu_and_uses_128_bit_loads():
    """32 heads x 4096 tokens: at least 2 x 132 blocks (MHA or GQA); K/V rows read as v4."""
    import pyptx
    from stdlib_kernels import attention as at
    for n_kv in (32, 8):
        tile = at._tile(4, 32 // n_kv)
        splits = at._auto_splits(4096, n_kv, tile)
        chunk = -(-(-(-4096 // splits)) // tile) * tile
        assert n_kv * -(-4096 // chunk) >= 2 * 132
    ptx = pyptx.compile(sk.decode_attention_kernel, constexprs=dict(
        DPL=4, TILE=32, GROUP=4, VEC=True, SPLIT=True)).ptx
    # the staging loop is unrolled: 32 rows x 32 vectors / 128 threads = 8 steps, a K and a V
    # 128-bit load each
    assert ptx.count("ld.global.v4.f32") + ptx.count("ld.global.nc.v4.f32") == 2 * 8

"""stdlib paged_kv_scatter / paged_attention against float64 numpy: random page tables, ragged
lengths (0 and 1 included), grouped-query heads, several page sizes, the split path."""
from __future__ import annotations

import numpy as np
import pytest

import pyptx
import stdlib_kernels as sk
from stdlib_kernels import paged
from test_stdlib_refs import poisoned, randn, rng, softmax_ref

RTOL, ATOL = 1e-4, 1e-5


def paged_ref(q, kp, vp, bt, sl, scale=None):
    """float64 attention of each sequence over its pages, gathered on the host."""
    batch, n_heads, hd = q.shape
    ps, n_kv = kp.shape[2], kp.shape[1]
    group = n_heads // n_kv
    scale = 1 / np.sqrt(hd) if scale is None else scale
    out = np.zeros((batch, n_heads, hd))
    for b in range(batch):
        t = np.arange(sl[b])
        pg, row = bt[b, t // ps], t % ps
        for h in range(n_heads):
            if t.size:
                k = kp[pg, h // group, row].astype(np.float64)
                v = vp[pg, h // group, row].astype(np.float64)
                out[b, h] = softmax_ref(k @ q[b, h].astype(np.float64) * scale) @ v
    return out


def make(r, batch, n_heads, n_kv, hd, ps, max_pages, lens, spare=3):
    """Pools with `spare` unused pages, each sequence's pages a random subset in random order."""
    num_pages = batch * max_pages + spare
    kp, vp = randn(r, num_pages, n_kv, ps, hd), randn(r, num_pages, n_kv, ps, hd)
    perm = r.permutation(num_pages).astype(np.int32)
    bt = perm[:batch * max_pages].reshape(batch, max_pages).copy()
    q = randn(r, batch, n_heads, hd, scale=2.0)
    return q, kp, vp, bt, np.asarray(lens, np.int32)


@pytest.mark.parametrize("ps", [8, 16, 32, 64])
@pytest.mark.parametrize("n_heads,n_kv,hd", [(4, 2, 64), (3, 1, 32), (2, 2, 36), (1, 1, 96)])
def test_paged_attention_ragged_gqa(ps, n_heads, n_kv, hd):
    r = rng(ps * 100 + n_heads * 10 + hd)
    max_pages = max(2, 96 // ps)
    cap = max_pages * ps
    lens = [0, 1, int(r.integers(2, cap)), cap]
    q, kp, vp, bt, sl = make(r, 4, n_heads, n_kv, hd, ps, max_pages, lens)
    out = sk.paged_attention(q, kp, vp, bt, sl)
    assert out.shape == q.shape and out.dtype == np.float32
    np.testing.assert_allclose(out, paged_ref(q, kp, vp, bt, sl), rtol=RTOL, atol=ATOL)
    assert not out[0].any()                                  # length 0 gives zeros


def test_paged_attention_split_path_and_scale():
    """A long capacity: the launch splits the pages over several blocks and merges them."""
    r = rng(1)
    q, kp, vp, bt, sl = make(r, 2, 4, 2, 64, 16, 40, [37, 611])
    splits, chunk = paged._split_plan(40 * 16, 2 * 2, 32)
    assert splits > 1 and chunk % 16 == 0
    out = sk.paged_attention(q, kp, vp, bt, sl, scale=0.05)
    np.testing.assert_allclose(out, paged_ref(q, kp, vp, bt, sl, 0.05), rtol=RTOL, atol=ATOL)


def test_paged_kernels_write_every_element():
    r = rng(2)
    q, kp, vp, bt, sl = make(r, 2, 4, 2, 40, 8, 6, [13, 48])
    want = paged_ref(q, kp, vp, bt, sl)
    scale = np.float32(paged.LOG2E / np.sqrt(40))
    dummy_ml, dummy_acc = np.zeros((1, 1, 2), np.float32), np.zeros((1, 1, 1), np.float32)
    out = poisoned(q.shape)
    kr, vr = paged._rows(kp), paged._rows(vp)           # [num_pages * n_kv, page_size, hd]
    # grid (n_kv, splits, batch); DPL, TILE, GROUP, VEC, SPLIT
    sk.paged_attention_kernel[(2, 1, 2), 64](out, dummy_ml, dummy_acc, q, kr, vr, bt, sl, 48, 3,
                                             scale, 2, 32, 2, True, False)
    np.testing.assert_allclose(out, want, rtol=RTOL, atol=ATOL)
    part_ml, part_acc = poisoned((8, 3, 2)), poisoned((8, 3, 40))
    sk.paged_attention_kernel[(2, 3, 2), 64](out, part_ml, part_acc, q, kr, vr, bt, sl, 16, 3,
                                             scale, 2, 8, 2, False, True)
    assert not np.isnan(part_ml).any() and not np.isnan(part_acc).any()
    out = poisoned(q.shape)
    sk.paged_merge_kernel[3, 128](out, part_ml, part_acc)
    np.testing.assert_allclose(out, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("hd", [64, 6])
def test_paged_kv_scatter_then_attend(hd):
    """A decode loop: each step scatters one token per sequence, then attends over the pages."""
    r = rng(hd)
    ps, n_kv, batch, max_pages = 8, 2, 2, 3
    kp, vp = poisoned((7, n_kv, ps, hd)), poisoned((7, n_kv, ps, hd))
    bt = r.permutation(7)[:batch * max_pages].astype(np.int32).reshape(batch, max_pages)
    keys, vals = randn(r, batch, 20, n_kv, hd), randn(r, batch, 20, n_kv, hd)
    q = randn(r, batch, 4, hd)
    for t in range(20):
        slots = (bt[:, t // ps] * ps + t % ps).astype(np.int32)
        sk.paged_kv_scatter(keys[:, t], vals[:, t], kp, vp, slots)
        sl = np.full(batch, t + 1, np.int32)
    got = sk.paged_attention(q, kp, vp, bt, sl)
    for b in range(batch):
        t = np.arange(20)
        np.testing.assert_array_equal(kp[bt[b, t // ps], :, t % ps], keys[b])
        np.testing.assert_array_equal(vp[bt[b, t // ps], :, t % ps], vals[b])
    np.testing.assert_allclose(got, paged_ref(q, kp, vp, bt, sl), rtol=RTOL, atol=ATOL)


def test_paged_kv_scatter_touches_only_its_slots():
    r = rng(3)
    kp, vp = randn(r, 5, 2, 16, 8), randn(r, 5, 2, 16, 8)
    k, v = randn(r, 3, 2, 8), randn(r, 3, 2, 8)
    slots = np.array([79, 0, 33], np.int64)
    want_k, want_v = kp.copy(), vp.copy()
    want_k[slots // 16, :, slots % 16] = k
    want_v[slots // 16, :, slots % 16] = v
    sk.paged_kv_scatter(k, v, kp, vp, slots)
    np.testing.assert_array_equal(kp, want_k)
    np.testing.assert_array_equal(vp, want_v)


def _valid(r):
    q, kp, vp, bt, sl = make(r, 2, 4, 2, 8, 8, 2, [3, 16])
    return dict(q=q, k_pages=kp, v_pages=vp, block_table=bt, seq_lens=sl)


@pytest.mark.parametrize("change,exc,word", [
    (dict(q=np.zeros((2, 4, 8))), TypeError, "q"),
    (dict(q=np.zeros((2, 4, 9), np.float32)), ValueError, "q"),
    (dict(q=np.zeros((2, 3, 8), np.float32)), ValueError, "q"),
    (dict(k_pages=np.zeros((7, 2, 6, 8), np.float32)), ValueError, "page size"),
    (dict(v_pages=np.zeros((7, 2, 8, 4), np.float32)), ValueError, "v_pages"),
    (dict(block_table=np.zeros((3, 2), np.int32)), ValueError, "block_table"),
    (dict(block_table=np.zeros((2, 2), np.float32)), TypeError, "block_table"),
    (dict(block_table=np.array([[0, 1], [2, 99]], np.int32)), ValueError, "block_table"),
    (dict(seq_lens=np.array([3, 17], np.int32)), ValueError, "seq_lens"),
    (dict(seq_lens=np.array([3], np.int32)), ValueError, "seq_lens"),
    (dict(scale=float("nan")), ValueError, "scale"),
])
def test_paged_attention_rejects_bad_arguments(change, exc, word):
    kw = _valid(rng(4))
    kw.update(change)
    with pytest.raises(exc, match=word):
        sk.paged_attention(**kw)


@pytest.mark.parametrize("slots,word", [([0, 112], "outside"), ([-1, 2], "outside"),
                                        ([4, 4], "distinct"), ([1], "slots")])
def test_paged_kv_scatter_rejects_bad_slots(slots, word):
    r = rng(5)
    kp, vp = randn(r, 7, 2, 16, 8), randn(r, 7, 2, 16, 8)
    before = kp.copy()
    with pytest.raises(ValueError, match=word):
        sk.paged_kv_scatter(randn(r, 2, 2, 8), randn(r, 2, 2, 8), kp, vp,
                            np.array(slots, np.int32))
    np.testing.assert_array_equal(kp, before)


def test_paged_kv_scatter_rejects_bad_shapes():
    r = rng(6)
    kp, vp = randn(r, 7, 2, 16, 8), randn(r, 7, 2, 16, 8)
    with pytest.raises(ValueError, match="k must be"):
        sk.paged_kv_scatter(randn(r, 2, 3, 8), randn(r, 2, 3, 8), kp, vp, np.arange(2))
    with pytest.raises(TypeError, match="v must be float32"):
        sk.paged_kv_scatter(randn(r, 2, 2, 8), np.zeros((2, 2, 8)), kp, vp, np.arange(2))
    with pytest.raises(ValueError, match="k_pages must be C-contiguous"):
        sk.paged_kv_scatter(randn(r, 2, 2, 8), randn(r, 2, 2, 8), kp[:, :, ::2], vp[:, :, ::2],
                            np.arange(2))


def test_paged_attention_uses_128_bit_loads():
    ptx = pyptx.compile(sk.paged_attention_kernel, constexprs=dict(
        DPL=4, TILE=32, GROUP=4, VEC=True, SPLIT=True)).ptx
    # 8 unrolled staging steps (32 rows x 32 vectors / 128 threads), a K and a V load each, in
    # two copies: one page id per tile (pages of >= 32 tokens) or one per row
    assert ptx.count("ld.global.v4.f32") + ptx.count("ld.global.nc.v4.f32") == 2 * 2 * 8


@pytest.mark.parametrize("n_kv,bad", [(2, -2**31), (4, 2**30), (4, -2**30), (2, 2**31 - 1),
                                      (1, -1), (4, 7)])
def test_a_bad_page_id_in_a_device_block_table_faults(cpu_device, n_kv, bad):
    """A device block table is not validated on the host (that would copy it back); a page id
    outside the pool must fault, never wrap to another page: id·n_kv_heads + head once wrapped
    in 32-bit arithmetic (2^30 with 4 KV heads read page 0, silently)."""
    r = rng(8)
    q, kp, vp, bt, sl = make(r, 1, 2 * n_kv, n_kv, 32, 16, 2, [20], spare=5)
    bt[0, 1] = bad                                        # tokens 16..19 live in a bad page
    with pytest.raises(pyptx.MemoryFault):
        sk.paged_attention(q, pyptx.to_device(kp), pyptx.to_device(vp), pyptx.to_device(bt),
                           pyptx.to_device(sl))


@pytest.mark.parametrize("n_kv,slot", [(64, 2**30), (2, -2**31), (2, 48)])
def test_a_bad_slot_in_a_device_slot_list_faults(cpu_device, n_kv, slot):
    """The scatter's page row (slot >> log2(page_size))·n_kv_heads + head must not wrap either
    (slot 2^30 is page 2^26; times 64 KV heads wrapped to page 0)."""
    r = rng(9)
    kp, vp = randn(r, 3, n_kv, 16, 8), randn(r, 3, n_kv, 16, 8)
    slots = np.array([3, slot], np.int32)
    with pytest.raises(pyptx.MemoryFault):
        sk.paged_kv_scatter(randn(r, 2, n_kv, 8), randn(r, 2, n_kv, 8), pyptx.to_device(kp),
                            pyptx.to_device(vp), pyptx.to_device(slots))

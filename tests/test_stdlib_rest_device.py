"""The array layer on attention, paged attention, rope, the activations, the GGUF matmuls and
`gguf.matmul`: numpy and DeviceArray arguments give the same bits, `out=` (numpy and device),
torch CPU tensors in → torch tensors out against torch's own ops (float64), the in-place
functions mutate and return the caller's own objects, and every function captured in a
`pyptx.graph()` on the fake GPU with DeviceArray arguments replays to its eager result.

Error bounds: u = 2^-24 (f32 unit roundoff); each bound's constant is about 10x the worst error
measured on these inputs (MEASURED, this revision's kernels on the CPU executor)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, GGUFWriter

import pyptx
import qmatmul_reference as R
import stdlib_kernels as sk
from stdlib_kernels import gguf as sg
from stdlib_kernels import quant as Q
from test_capture_rules import _host, fake  # noqa: F401  (fixtures)

U = 2.0 ** -24
F = torch.nn.functional
#: worst error / (the bound with its constant set to 1) measured on this file's data (CPU
#: executor); each C is about 10x that
MEASURED = {"attention": 0.175, "rope": 0.71, "swiglu": 0.50, "dot": 0.09}
C_ATTENTION = 1.75
C_ROPE = 7.0
C_SWIGLU = 5.0
#: plain f32 dot products (gate_up_swiglu's, the F32 GGUF weight's GEMM): C_DOT·√k·u·Σ|x||w|
C_DOT = 0.9


def f32(r, *shape):
    return r.standard_normal(shape).astype(np.float32)


@pytest.fixture(scope="module")
def tensors(tmp_path_factory):
    """A GGUF file's Q4_K and F32 weights ([24, 256]) as gguf.GGUFReader tensors."""
    r = np.random.default_rng(7)
    path = str(tmp_path_factory.mktemp("gguf") / "w.gguf")
    w = GGUFWriter(path, "llama")
    dense = f32(r, 24, 256)
    w.add_tensor("q4", Q.quantize(dense, "q4_k"), raw_dtype=T.Q4_K)
    w.add_tensor("f32", dense)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    reader = GGUFReader(path)
    yield {t.name: t for t in reader.tensors}
    sg._resident.clear()


# name -> (function, positional arguments (arrays as numpy), positions of the arrays updated in
# place or None); arrays small: the executor is slow
def _cases(tensors):
    r = np.random.default_rng(3)
    w4, w4b = (Q.quantize(f32(r, 16, 256), "q4_k") for _ in range(2))
    w6, w8 = Q.quantize(f32(r, 16, 256), "q6_k"), Q.quantize(f32(r, 16, 256), "q8_0")
    pages = f32(r, 4, 2, 4, 16)
    table = np.array([[1, 2, 0], [3, 0, 1]], np.int32)
    att = (f32(r, 4, 16), f32(r, 2, 40, 16), f32(r, 2, 40, 16))
    return {
        "kv_scatter": (sk.kv_scatter, (f32(r, 2 * 16), f32(r, 2, 8, 16), 3), (1,)),
        "decode_attention": (sk.decode_attention, att + (37,), None),       # 2 splits
        "decode_attention_one_split": (sk.decode_attention, att + (37, 1), None),
        "decode_attention_empty": (sk.decode_attention, att + (0,), None),
        "paged_attention": (sk.paged_attention, (f32(r, 2, 4, 16), pages, pages + 1, table,
                                                 np.array([9, 5], np.int32)), None),
        "paged_kv_scatter": (sk.paged_kv_scatter, (f32(r, 2, 2, 16), f32(r, 2, 2, 16),
                                                   pages.copy(), pages + 1,
                                                   np.array([5, 2], np.int32)), (2, 3)),
        "rope": (sk.rope, (f32(r, 3, 2, 16), np.array([0, 5, 1000], np.int32)), None),
        "rope_gptj_2d": (sk.rope, (f32(r, 3, 12), np.array([1, 7, 300], np.int32), 500.0,
                                   "gptj"), None),
        "swiglu": (sk.swiglu, (f32(r, 3, 37), f32(r, 3, 37)), None),
        "gate_up_swiglu": (sk.gate_up_swiglu, (f32(r, 2, 40), f32(r, 24, 40), f32(r, 24, 40)),
                           None),
        "gate_up_swiglu_1d": (sk.gate_up_swiglu, (f32(r, 40), f32(r, 24, 40), f32(r, 24, 40)),
                              None),
        "q4k_matmul": (sk.q4k_matmul, (f32(r, 2, 256), w4, 16), None),
        "q4k_matmul_tiled": (sk.q4k_matmul, (f32(r, 2, 256), w4, 16, "tiled"), None),
        "q6k_matmul_f32": (sk.q6k_matmul, (f32(r, 256), w6, 16, "f32"), None),
        "q8_0_matmul": (sk.q8_0_matmul, (f32(r, 3, 256), w8, 16), None),
        "q4k_gate_up_swiglu": (sk.q4k_gate_up_swiglu, (f32(r, 2, 256), w4, w4b, 16), None),
        "gguf_q4": (sg.matmul, (f32(r, 2, 256), tensors["q4"]), None),
        "gguf_f32": (sg.matmul, (f32(r, 256), tensors["f32"]), None),
    }


NAMES = ["decode_attention", "decode_attention_empty", "decode_attention_one_split",
         "gate_up_swiglu", "gate_up_swiglu_1d", "gguf_f32", "gguf_q4", "kv_scatter",
         "paged_attention", "paged_kv_scatter", "q4k_gate_up_swiglu", "q4k_matmul",
         "q4k_matmul_tiled", "q6k_matmul_f32", "q8_0_matmul", "rope", "rope_gptj_2d", "swiglu"]
IN_PLACE = ("kv_scatter", "paged_kv_scatter")


def _dev(args):
    return tuple(pyptx.to_device(a) if isinstance(a, np.ndarray) else a for a in args)


def _copies(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def _torch(args):
    return tuple(torch.from_numpy(a.copy()) if isinstance(a, np.ndarray) else a for a in args)


# ---- numpy and DeviceArray arguments: the same bits ---------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_numpy_and_device_arrays_give_identical_bits(cpu, tensors, name):
    fn, args, in_place = _cases(tensors)[name]
    host_args = _copies(args)
    want = fn(*host_args)
    dev_args = _dev(args)
    got = fn(*dev_args)
    if in_place:
        mutated = tuple(host_args[i] for i in in_place)
        want_n = mutated[0] if len(in_place) == 1 else mutated
        assert want is want_n if len(in_place) == 1 else all(
            a is b for a, b in zip(want, want_n))
        got_d = tuple(dev_args[i] for i in in_place)
        assert (got is got_d[0]) if len(in_place) == 1 else all(
            a is b for a, b in zip(got, got_d))
        for h, d in zip(mutated, got_d):
            np.testing.assert_array_equal(d.copy_to_host(), h)
        return
    assert isinstance(want, np.ndarray) and isinstance(got, pyptx.DeviceArray)
    assert got.shape == want.shape and got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got.copy_to_host(), want)


# ---- out= ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [n for n in NAMES if n not in IN_PLACE])
def test_out_numpy_and_device(cpu, tensors, name):
    fn, args, _ = _cases(tensors)[name]
    want = fn(*args)
    out = np.full(want.shape, np.nan, np.float32)           # poisoned: every element written
    assert fn(*args, out=out) is out
    np.testing.assert_array_equal(out, want)
    dargs = _dev(args)
    out_d = pyptx.to_device(np.full(want.shape, np.nan, np.float32))
    assert fn(*dargs, out=out_d) is out_d
    np.testing.assert_array_equal(out_d.copy_to_host(), want)
    with pytest.raises(ValueError, match="out must have shape"):
        fn(*args, out=np.empty(want.shape + (1,), np.float32))
    with pytest.raises(TypeError, match="out must have dtype float32"):
        fn(*args, out=np.empty(want.shape, np.float64))
    with pytest.raises(ValueError, match="out must have shape"):
        fn(*dargs, out=pyptx.to_device(np.empty(want.shape + (2,), np.float32)))
    with pytest.raises(ValueError, match="out is a host array"):
        fn(*dargs, out=np.empty(want.shape, np.float32))
    with pytest.raises(ValueError, match="out is a DeviceArray"):
        fn(*args, out=out_d)


@pytest.mark.parametrize("name", IN_PLACE)
def test_in_place_functions_have_no_out(cpu, tensors, name):
    """Their results are the caches themselves (documented: no `out=`)."""
    fn, args, _ = _cases(tensors)[name]
    with pytest.raises(TypeError, match="out"):
        fn(*args, out=np.empty(1, np.float32))


# ---- torch CPU tensors in, torch tensors out -----------------------------------------------------

RATIOS: dict = {}     # what -> the worst |got - want| / bound seen (for measuring MEASURED)


def _within(got, want, bound, what: str) -> None:
    """|got − want| ≤ bound elementwise (float64 tensors); the ratio names the margin."""
    ratio = float(((got - want).abs() / bound).max())
    RATIOS[what] = max(RATIOS.get(what, 0.0), ratio)
    assert ratio <= 1.0, f"{what}: error is {ratio:.3g}x its bound"


def _check_torch(got, want_shape):
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    assert got.device.type == "cpu" and tuple(got.shape) == tuple(want_shape)
    return got.double()


def _sdpa(q, k, v, lens):
    """torch's float64 attention per sequence: q [b, h, d], k/v [b, n_kv, t, d] (GQA by
    repeating KV heads), the first lens[b] tokens; and the bound's scale per output element:
    max_t |v| · (1 + √d · max_t scale·Σ|q||k|)."""
    out, mag = [], []
    b, h, d = q.shape
    for i in range(b):
        group = h // k.shape[1]
        kk = k[i, :, :lens[i]].repeat_interleave(group, 0)
        vv = v[i, :, :lens[i]].repeat_interleave(group, 0)
        out.append(F.scaled_dot_product_attention(q[i][:, None], kk, vv)[:, 0])
        s = (q[i].abs()[:, None, :] * kk.abs()).sum(-1).amax(-1) / d ** 0.5    # [h]
        mag.append(vv.abs().amax(1) * (1 + d ** 0.5 * s[:, None]))
    return torch.stack(out), torch.stack(mag)


def test_torch_decode_attention_matches_sdpa(cpu, tensors):
    """Error: the probabilities carry the scores' f32 rounding (≈ √d·u·scale·Σ|q||k| relative,
    the dot products' random-walk growth) plus ex2.approx's 2 ulp, and the outputs are convex
    combinations of V rows: bound C_ATTENTION·u·max|v|·(1 + √d·max scale·Σ|q||k|)."""
    for name in ("decode_attention", "decode_attention_one_split"):
        _, args, _ = _cases(tensors)[name]
        q, kc, vc = _torch(args[:3])
        got = _check_torch(sk.decode_attention(q, kc, vc, *args[3:]), q.shape)
        want, mag = _sdpa(q.double()[None], kc.double()[None], vc.double()[None], [37])
        _within(got, want[0], C_ATTENTION * U * mag[0], name)
    q, kc, vc = _torch(_cases(tensors)["decode_attention_empty"][1][:3])
    assert (_check_torch(sk.decode_attention(q, kc, vc, 0), q.shape) == 0).all()


def test_torch_paged_attention_matches_sdpa(cpu, tensors):
    """The same bound as decode attention's, the tokens gathered through the block table."""
    _, args, _ = _cases(tensors)["paged_attention"]
    q, kp, vp, table, lens = _torch(args)
    got = _check_torch(sk.paged_attention(q, kp, vp, table, lens), q.shape)
    ps = kp.shape[2]

    def seq(pool, b):                               # [n_kv, max_pages·page_size, d]
        return torch.cat([pool[int(p)] for p in table[b]], 1).double()

    k = torch.stack([seq(kp, b) for b in range(2)])
    v = torch.stack([seq(vp, b) for b in range(2)])
    assert k.shape[2] == table.shape[1] * ps
    want, mag = _sdpa(q.double(), k, v, [int(n) for n in lens])
    _within(got, want, C_ATTENTION * U * mag, "paged_attention")


def test_torch_rope_matches_the_rotation_formula(cpu, tensors):
    """HF's formula x·cos + rotate(x)·sin in float64, the frequencies rounded to float32 as
    documented.  Error: the kernel's angle p·f in f32 (|angle|·u/2 absolute), cos/sin within a
    few ulp, two products and a sum: bound C_ROPE·u·(1 + |angle|)·(|a| + |b|) per pair."""
    for name in ("rope", "rope_gptj_2d"):
        _, args, _ = _cases(tensors)[name]
        x, pos = _torch(args[:2])
        theta, layout = (args[2], args[3]) if len(args) > 2 else (10000.0, "neox")
        got = _check_torch(sk.rope(x, pos, theta, layout), x.shape)
        x3 = x.double().reshape(x.shape[0], -1, x.shape[-1])
        hd = x3.shape[-1]
        inv = (theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)).float().double()
        ang = (pos.double()[:, None] * inv)[:, None, :]                  # [seq, 1, hd/2]
        if layout == "neox":
            a, b = x3[..., :hd // 2], x3[..., hd // 2:]
        else:
            a, b = x3[..., 0::2], x3[..., 1::2]
        ra, rb = a * ang.cos() - b * ang.sin(), b * ang.cos() + a * ang.sin()
        bound = C_ROPE * U * (1 + ang.abs()) * (a.abs() + b.abs())
        want = torch.stack([ra, rb], -1)
        bound = torch.stack([bound, bound], -1)
        if layout == "neox":
            want, bound = (torch.cat([t[..., 0], t[..., 1]], -1) for t in (want, bound))
        want, bound = want.reshape(x.shape), bound.reshape(x.shape)
        _within(got, want, bound, name)


def _swiglu_epilogue_bound(g, up):
    """g/(1 + e^-g)·up in f32: e^-g's argument rounded (|g|·u relative in e^-g, moving the
    result by |g·up·σ(1−σ)|·|g|·u), ex2.approx's 2 ulp, the add, divide and multiply."""
    sig = torch.sigmoid(g)
    return (g * up * sig * (1 - sig)).abs() * (2 + g.abs()) * U + 3 * U * (g * sig * up).abs()


def test_torch_swiglu_matches_silu(cpu, tensors):
    """Against torch.nn.functional.silu(gate)·up in float64; bound C_SWIGLU·(the epilogue's
    rounding analysis)."""
    _, args, _ = _cases(tensors)["swiglu"]
    g, up = _torch(args)
    got = _check_torch(sk.swiglu(g, up), g.shape)
    want = F.silu(g.double()) * up.double()
    _within(got, want, C_SWIGLU * _swiglu_epilogue_bound(g.double(), up.double()), "swiglu")


def test_torch_gate_up_swiglu_matches_linear_and_silu(cpu, tensors):
    """silu(F.linear(x, w_gate))·F.linear(x, w_up) in float64.  g and u are f32 dot products
    (C_DOT·√k·u·Σ|x||w|: rounding errors of varying sign grow like √k, qmatmul_reference's
    analysis of plain f32 accumulation); swiglu's partial derivatives
    σ(g)(1 + g(1−σ(g)))·u and g·σ(g) carry them, plus the epilogue's rounding."""
    for name in ("gate_up_swiglu", "gate_up_swiglu_1d"):
        _, args, _ = _cases(tensors)[name]
        x, wg, wu = (t.double() for t in _torch(args))
        got = _check_torch(sk.gate_up_swiglu(*_torch(args)), (*x.shape[:-1], wg.shape[0]))
        g, up = F.linear(x, wg), F.linear(x, wu)
        r = C_DOT * x.shape[-1] ** 0.5 * U
        eg, eu = r * F.linear(x.abs(), wg.abs()), r * F.linear(x.abs(), wu.abs())
        sig = torch.sigmoid(g)
        bound = (sig * (1 + g * (1 - sig)) * up).abs() * eg + (g * sig).abs() * eu \
            + _swiglu_epilogue_bound(g, up)
        _within(got, F.silu(g) * up, bound, name)


_FMT = {"q4k_matmul": "q4_k", "q4k_matmul_tiled": "q4_k", "q6k_matmul_f32": "q6_k",
        "q8_0_matmul": "q8_0"}


@pytest.mark.parametrize("name", sorted(_FMT))
def test_torch_quant_matmuls_match_the_dequantised_product(cpu, tensors, name):
    """x @ dequantize(w).T in float64 (stdlib_kernels.quant's numpy dequantiser); bound: the
    path's error analysis in tests/qmatmul_reference.py (`Bounds.bound`; m ≤ 8 "auto" is dp4a)."""
    fn, args, _ = _cases(tensors)[name]
    fmt = _FMT[name]
    path = args[3] if len(args) > 3 else "dp4a"
    x, w = _torch(args[:2])
    got = _check_torch(fn(x, w, *args[2:]), (*x.shape[:-1], 16))
    want = x.double() @ torch.from_numpy(Q.dequantize(args[1], fmt)).double().T
    bound = torch.from_numpy(R.Bounds(args[0], args[1], fmt).bound(path)).reshape(want.shape)
    _within(got, want, bound, name)


def test_torch_q4k_gate_up_swiglu_matches_silu_of_the_products(cpu, tensors):
    """silu(x @ dq(w_gate).T)·(x @ dq(w_up).T) in float64; bound R.swiglu_bound (the f32 GEMV
    bounds carried through swiglu's derivatives, and the epilogue)."""
    _, args, _ = _cases(tensors)["q4k_gate_up_swiglu"]
    x, wg, wu = _torch(args[:3])
    got = _check_torch(sk.q4k_gate_up_swiglu(x, wg, wu, 16), (2, 16))
    xd = x.double()
    g = xd @ torch.from_numpy(Q.dequantize(args[1], "q4_k")).double().T
    up = xd @ torch.from_numpy(Q.dequantize(args[2], "q4_k")).double().T
    _, bound = R.swiglu_bound(args[0], args[1], args[2])
    _within(got, F.silu(g) * up, torch.from_numpy(bound), "q4k_gate_up_swiglu")


def test_torch_gguf_matmul(cpu, tensors):
    """x @ W.T for the Q4_K (dp4a: R.Bounds) and F32 (tiled GEMM: C_DOT·√k·u·Σ|x||w|)
    tensors; W from the file."""
    r = np.random.default_rng(5)
    x = f32(r, 2, 256)
    for name, fmt, path in (("q4", "q4_k", "dp4a"), ("f32", None, "tiled")):
        t = tensors[name]
        got = _check_torch(sg.matmul(torch.from_numpy(x), t), (2, 24))
        dense = Q.dequantize(np.asarray(t.data), fmt) if fmt else np.array(t.data)
        want = torch.from_numpy(x).double() @ torch.from_numpy(dense).double().T
        if fmt:
            bound = R.Bounds(x, np.asarray(t.data), fmt).bound(path)
        else:
            bound = C_DOT * 16 * U * (np.abs(x).astype(np.float64) @ np.abs(dense).T)   # √256
        _within(got, want, torch.from_numpy(bound), "gguf_" + name)


def test_torch_in_place_functions_mutate_and_return_the_callers_tensors(cpu, tensors):
    _, (src, cache, pos), _ = _cases(tensors)["kv_scatter"]
    c = torch.from_numpy(cache.copy())
    want = c.clone()
    want[:, pos] = torch.from_numpy(src).reshape(2, 16)
    assert sk.kv_scatter(torch.from_numpy(src), c, pos) is c
    assert torch.equal(c, want)
    _, (k, v, kp, vp, slots), _ = _cases(tensors)["paged_kv_scatter"]
    kt, vt = torch.from_numpy(kp.copy()), torch.from_numpy(vp.copy())
    wk, wv = kt.clone(), vt.clone()
    for t, s in enumerate(slots):
        wk[s // 4, :, s % 4] = torch.from_numpy(k[t])
        wv[s // 4, :, s % 4] = torch.from_numpy(v[t])
    res = sk.paged_kv_scatter(torch.from_numpy(k), torch.from_numpy(v), kt, vt,
                              torch.from_numpy(slots))
    assert isinstance(res, tuple) and res[0] is kt and res[1] is vt
    assert torch.equal(kt, wk) and torch.equal(vt, wv)


# ---- inside a graph on the fake GPU --------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_inside_a_graph_on_the_fake_gpu_equals_eager(fake, tensors, name):
    """DeviceArray arguments, captured then replayed: the eager result (and in-place state),
    no capture rule broken; with `out=` (allocated before the capture) too."""
    fn, args, in_place = _cases(tensors)[name]
    eager_in = _dev(args)
    want = _host(fn(*eager_in))
    want_state = [a.copy_to_host() for a in eager_in if isinstance(a, pyptx.DeviceArray)]
    cap_in = _dev(args)
    with pyptx.graph() as g:
        res = fn(*cap_in)
    g.launch()
    got = _host(res)
    assert fake.violations == []
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    for a, s in zip([a for a in cap_in if isinstance(a, pyptx.DeviceArray)], want_state):
        np.testing.assert_array_equal(a.copy_to_host(), s)
    if in_place:
        return
    out_d = pyptx.to_device(np.full(want.shape, np.nan, np.float32))
    with pyptx.graph() as g:
        assert fn(*cap_in, out=out_d) is out_d
    g.launch()
    assert fake.violations == []
    np.testing.assert_array_equal(out_d.copy_to_host(), want)


# ---- gguf.matmul keeps a device x's weight resident ----------------------------------------------

def test_gguf_weight_first_used_inside_a_graph_uploads_outside_the_recording(fake, tensors):
    """The first device call may come inside a capture: the weight's upload runs as setup work
    (no rule broken), and later calls upload nothing."""
    sg._resident.clear()
    r = np.random.default_rng(9)
    x = f32(r, 1, 256)
    for name in ("q4", "f32"):
        x_d = pyptx.to_device(x)
        with pyptx.graph() as g:
            res = sg.matmul(x_d, tensors[name])
        g.launch()
        assert fake.violations == []
        np.testing.assert_array_equal(res.copy_to_host(), sg.matmul(x, tensors[name]))
        mark = len(fake.calls)
        again = sg.matmul(x_d, tensors[name])
        assert not [c for c, _ in fake.calls[mark:] if c.startswith("cuMemcpyHtoD")]
        np.testing.assert_array_equal(again.copy_to_host(), res.copy_to_host())


def test_gguf_device_weight_goes_with_its_tensor_data(cpu):
    """The resident copy is keyed by the tensor.data object and dropped when it is collected."""
    import gc
    from types import SimpleNamespace
    r = np.random.default_rng(10)
    dense = f32(r, 8, 32)
    t = SimpleNamespace(name="w", tensor_type=T.F32, shape=np.array([32, 8]), data=dense)
    key = id(dense)
    x = f32(r, 2, 32)
    got = sg.matmul(pyptx.to_device(x), t)
    np.testing.assert_array_equal(got.copy_to_host(), sg.matmul(x, t))
    assert key in sg._resident
    del t, dense
    gc.collect()
    assert key not in sg._resident

"""`stdlib_kernels` as a user sees it: exact signatures and defaults, results against
float64 numpy references, shapes (1-d, 2-d, 3-d, flat), argument errors, the DSL kernels as
module attributes that `pyptx.compile` accepts, and the not-yet-available parts failing clearly."""
from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import pyptx
import stdlib_kernels as sk

F = np.float32


@pytest.fixture(autouse=True)
def _cpu(cpu_device):
    yield


def rng(seed=0):
    return np.random.default_rng(seed)


def close(got, want, rtol=2e-5, atol=2e-6):
    assert got.dtype == np.float32 and got.shape == np.shape(want)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)


# ---- float64 references -----------------------------------------------------------------------

def softmax_ref(x, axis=-1):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def rms_ref(x, w, eps=1e-6):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def ln_ref(x, g=None, b=None, eps=1e-5):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    return y * (1.0 if g is None else g) + (0.0 if b is None else b)


def decode_ref(q, kc, vc, seq_len):
    n_kv, _, hd = kc.shape
    q2 = q.reshape(-1, hd).astype(np.float64)
    out = np.zeros_like(q2)
    group = q2.shape[0] // n_kv
    for h in range(q2.shape[0]):
        k = kc[h // group, :seq_len].astype(np.float64)
        v = vc[h // group, :seq_len].astype(np.float64)
        if seq_len:
            out[h] = softmax_ref(k @ q2[h] / math.sqrt(hd)) @ v
    return out.reshape(q.shape)


def rope_ref(x, pos, theta=10000.0, layout="neox"):
    x3 = x.reshape(x.shape[0], -1, x.shape[-1]).astype(np.float64)
    hd = x.shape[-1]
    half = hd // 2
    ang = pos.astype(np.float64)[:, None, None] * theta ** (-2.0 * np.arange(half) / hd)
    c, s = np.cos(ang), np.sin(ang)
    out = np.empty_like(x3)
    if layout == "neox":
        a, b = x3[..., :half], x3[..., half:]
        out[..., :half], out[..., half:] = a * c - b * s, b * c + a * s
    else:
        a, b = x3[..., 0::2], x3[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * c - b * s, b * c + a * s
    return out.reshape(x.shape)


# ---- signatures ---------------------------------------------------------------------------------

SIGNATURES = {
    "softmax": [("x", inspect.Parameter.empty), ("axis", -1)],
    "rmsnorm": [("x", inspect.Parameter.empty), ("weight", inspect.Parameter.empty),
                ("eps", 1e-6)],
    "layernorm": [("x", inspect.Parameter.empty), ("gamma", None), ("beta", None), ("eps", 1e-5)],
    "gemm": [("a", inspect.Parameter.empty), ("b", inspect.Parameter.empty),
             ("variant", "tiled")],
    "decode_attention": [("q", inspect.Parameter.empty), ("k_cache", inspect.Parameter.empty),
                         ("v_cache", inspect.Parameter.empty),
                         ("seq_len", inspect.Parameter.empty)],
    "kv_scatter": [("src", inspect.Parameter.empty), ("cache", inspect.Parameter.empty),
                   ("pos", inspect.Parameter.empty)],
    "rope": [("x", inspect.Parameter.empty), ("positions", inspect.Parameter.empty),
             ("theta", 10000.0), ("layout", "neox")],
    "swiglu": [("gate", inspect.Parameter.empty), ("up", inspect.Parameter.empty)],
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signature_and_defaults(name):
    params = list(inspect.signature(getattr(sk, name)).parameters.values())
    want = SIGNATURES[name]
    got = [(p.name, p.default) for p in params[:len(want)]]
    assert got == want
    for p in params:                              # out= (SPEC 8.2) is keyword-only
        assert p.kind is (inspect.Parameter.KEYWORD_ONLY if p.name == "out"
                          else inspect.Parameter.POSITIONAL_OR_KEYWORD)
    for p in params[len(want):]:                  # extensions must be optional
        assert p.default is not inspect.Parameter.empty
    if name not in ("kv_scatter", "paged_kv_scatter"):      # in place: nothing to put in out
        assert params[-1].name == "out" and params[-1].default is None


def test_kernels_are_module_attributes_and_compile():
    from stdlib_kernels.catalog import ARCH_SPECIFIC, SPECIALISATIONS
    names = [n for n in sk.__all__ if n.endswith("_kernel")]
    assert len(names) >= 10
    for n in names:
        assert isinstance(getattr(sk, n), pyptx.Kernel)
    seen = set()
    for spec in SPECIALISATIONS + ARCH_SPECIFIC:      # a pinned kernel compiles for its arch
        if spec.kernel.name in seen:
            continue
        seen.add(spec.kernel.name)
        ck = pyptx.compile(spec.kernel, constexprs=spec.constexprs or None)
        assert f".visible .entry {spec.kernel.name}(" in ck.ptx
    assert seen >= {getattr(sk, n).name for n in names}


# ---- results ------------------------------------------------------------------------------------

def test_softmax_axes_and_ranks():
    x1 = rng(1).standard_normal(37).astype(F)
    close(sk.softmax(x1), softmax_ref(x1))
    x2 = (rng(2).standard_normal((5, 40)) * 4).astype(F)
    close(sk.softmax(x2, axis=0), softmax_ref(x2, 0))
    close(sk.softmax(x2, 1), softmax_ref(x2, 1))
    x3 = rng(3).standard_normal((3, 4, 33)).astype(F)
    for ax in (0, 1, 2, -1, -2, -3):
        got = sk.softmax(x3, axis=ax)
        close(got, softmax_ref(x3, ax))
        assert got.flags.c_contiguous
    big = rng(4).standard_normal((2, 1500)).astype(F) * 30
    close(sk.softmax(big), softmax_ref(big))
    for bad in (3, -4, 1.0):
        with pytest.raises((ValueError, TypeError), match="axis"):
            sk.softmax(x3, axis=bad)


def test_rmsnorm_and_layernorm():
    x = rng(5).standard_normal((6, 300)).astype(F)
    w = rng(6).standard_normal(300).astype(F)
    close(sk.rmsnorm(x, w), rms_ref(x, w), rtol=1e-5, atol=1e-5)
    close(sk.rmsnorm(x, w, eps=0.5), rms_ref(x, w, 0.5), rtol=1e-5, atol=1e-5)
    close(sk.rmsnorm(x[0], w), rms_ref(x[0], w), rtol=1e-5, atol=1e-5)          # 1-d x
    x3 = x.reshape(2, 3, 300)
    close(sk.rmsnorm(x3, w), rms_ref(x3, w), rtol=1e-5, atol=1e-5)
    g = rng(7).standard_normal(300).astype(F)
    b = rng(8).standard_normal(300).astype(F)
    close(sk.layernorm(x), ln_ref(x), rtol=1e-5, atol=1e-5)
    close(sk.layernorm(x, g), ln_ref(x, g), rtol=1e-5, atol=1e-5)
    close(sk.layernorm(x, beta=b), ln_ref(x, None, b), rtol=1e-5, atol=1e-5)
    close(sk.layernorm(x, None, None), ln_ref(x), rtol=1e-5, atol=1e-5)
    close(sk.layernorm(x, g, b, eps=1e-2), ln_ref(x, g, b, 1e-2), rtol=1e-5, atol=1e-5)
    close(sk.layernorm(x[1], g, b), ln_ref(x[1], g, b), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="weight"):
        sk.rmsnorm(x, w[:-1])
    with pytest.raises(TypeError, match="x"):
        sk.layernorm(x.astype(np.float64))


@pytest.mark.parametrize("variant", ["naive", "tiled"])
def test_gemm_variants(variant):
    a = rng(9).standard_normal((70, 45)).astype(F)
    b = rng(10).standard_normal((45, 33)).astype(F)
    close(sk.gemm(a, b, variant), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    close(sk.gemm(a, b, variant=variant), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_gemm_default_variant_and_tensor_core():
    a = rng(11).standard_normal((8, 16)).astype(F)
    b = rng(12).standard_normal((16, 8)).astype(F)
    close(sk.gemm(a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    a16, b16 = a.astype(np.float16), b.astype(np.float16)
    from test_stdlib_gemm_tc import assert_gemm_close
    assert_gemm_close(sk.gemm(a16, b16, variant="tensor_core"), a16, b16)   # its error bound
    with pytest.raises(ValueError, match="variant"):
        sk.gemm(a, b, variant="fast")


@pytest.mark.parametrize("n_heads,n_kv,hd,seq_len", [(4, 4, 64, 9), (8, 2, 32, 17), (6, 1, 40, 3),
                                                      (2, 2, 16, 24)])
def test_decode_attention(n_heads, n_kv, hd, seq_len):
    r = rng(n_heads * 100 + hd)
    kc = r.standard_normal((n_kv, 24, hd)).astype(F)
    vc = r.standard_normal((n_kv, 24, hd)).astype(F)
    q = r.standard_normal((n_heads, hd)).astype(F)
    close(sk.decode_attention(q, kc, vc, seq_len), decode_ref(q, kc, vc, seq_len),
          rtol=1e-4, atol=1e-5)
    flat = q.reshape(-1)
    got = sk.decode_attention(flat, kc, vc, seq_len)
    assert got.shape == flat.shape
    close(got, decode_ref(flat, kc, vc, seq_len), rtol=1e-4, atol=1e-5)
    zero = sk.decode_attention(flat, kc, vc, 0)
    assert zero.shape == flat.shape and zero.dtype == F and not zero.any()
    assert not sk.decode_attention(q, kc, vc, 0).any()


def test_decode_attention_errors():
    kc = np.zeros((2, 8, 16), F)
    q = np.zeros((4, 16), F)
    with pytest.raises(ValueError, match="seq_len"):
        sk.decode_attention(q, kc, kc, 9)
    with pytest.raises(ValueError, match="seq_len"):
        sk.decode_attention(q, kc, kc, -1)
    with pytest.raises(TypeError, match="seq_len"):
        sk.decode_attention(q, kc, kc, 2.0)
    with pytest.raises(ValueError):
        sk.decode_attention(np.zeros((3, 16), F), kc, kc, 2)     # 3 heads over 2 KV heads
    with pytest.raises(TypeError, match="k_cache"):
        sk.decode_attention(q, kc.astype(np.float16), kc, 2)
    with pytest.raises(ValueError, match="k_cache"):
        sk.decode_attention(q, kc[0], kc, 2)


def test_kv_scatter_in_place():
    cache = rng(13).standard_normal((3, 5, 8)).astype(F)
    before = cache.copy()
    src = rng(14).standard_normal(24).astype(F)
    ret = sk.kv_scatter(src, cache, 4)
    want = before.copy()
    want[:, 4, :] = src.reshape(3, 8)
    np.testing.assert_array_equal(cache, want)          # the caller's array, in place
    assert ret is None or ret is cache
    sk.kv_scatter(src[::-1].copy(), cache, np.int64(0))
    want[:, 0, :] = src[::-1].reshape(3, 8)
    np.testing.assert_array_equal(cache, want)
    for pos in (5, 6, -1):
        with pytest.raises(ValueError, match="pos"):
            sk.kv_scatter(src, cache, pos)
    np.testing.assert_array_equal(cache, want)
    with pytest.raises(ValueError, match="src"):
        sk.kv_scatter(src[:-1], cache, 0)
    sk.kv_scatter(src.reshape(3, 8), cache, 2)          # [n_kv_heads, head_dim] src too
    np.testing.assert_array_equal(cache[:, 2], src.reshape(3, 8))
    cache.flags.writeable = False
    with pytest.raises(ValueError, match="cache"):
        sk.kv_scatter(src, cache, 1)


@pytest.mark.parametrize("layout", ["neox", "gptj"])
@pytest.mark.parametrize("shape", [(5, 3, 16), (7, 32), (1, 2, 2)])
def test_rope(layout, shape):
    x = rng(15).standard_normal(shape).astype(F)
    pos = rng(16).integers(0, 200, shape[0])
    got = sk.rope(x, pos, layout=layout)
    assert got.shape == x.shape
    close(got, rope_ref(x, pos, layout=layout), rtol=1e-4, atol=2e-5)
    close(sk.rope(x, pos.astype(np.int32), 500.0, layout), rope_ref(x, pos, 500.0, layout),
          rtol=1e-4, atol=2e-5)
    np.testing.assert_array_equal(sk.rope(x, np.zeros(shape[0], np.int64), layout=layout), x)


def test_rope_default_layout_is_neox():
    x = rng(17).standard_normal((4, 8)).astype(F)
    pos = np.arange(4)
    np.testing.assert_array_equal(sk.rope(x, pos), sk.rope(x, pos, layout="neox"))
    assert not np.array_equal(sk.rope(x, pos), sk.rope(x, pos, layout="gptj"))


def test_swiglu():
    for shape in [(), (1,), (1000,), (3, 65), (2, 3, 5)]:
        g = np.asarray(rng(18).standard_normal(shape) * 5, F)
        u = np.asarray(rng(19).standard_normal(shape), F)
        g64 = g.astype(np.float64)
        got = sk.swiglu(g, u)
        assert got.shape == shape
        close(got, g64 / (1 + np.exp(-g64)) * u, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="up"):
        sk.swiglu(np.ones(3, F), np.ones(4, F))
    with pytest.raises(TypeError, match="up"):
        sk.swiglu(np.ones(3, F), [1.0, 2.0, 3.0])


def test_inputs_are_never_modified():
    x = rng(20).standard_normal((4, 64)).astype(F)
    keep = x.copy()
    x.flags.writeable = False
    sk.softmax(x)
    sk.rmsnorm(x, np.ones(64, F))
    sk.layernorm(x)
    sk.swiglu(x, x)
    sk.gemm(x, x.T.copy())
    sk.rope(x, np.arange(4))
    np.testing.assert_array_equal(x, keep)


def test_non_contiguous_inputs_are_accepted():
    x = rng(21).standard_normal((64, 8)).astype(F)
    xt = x.T                                      # a view: not C-contiguous
    close(sk.softmax(xt), softmax_ref(xt))
    close(sk.rmsnorm(xt, np.ones(64, F)), rms_ref(xt, 1.0), rtol=1e-5, atol=1e-5)
    close(sk.gemm(xt, x), xt.astype(np.float64) @ x, rtol=1e-4, atol=1e-4)

"""Complex64 scalars (frontend/complex64.py) and c64 arrays, checked against numpy complex64
on the CPU executor."""
import numpy as np
import pytest

import pyptx
from pyptx import c64, f32, i32

RNG = np.random.default_rng(11)
OFFSET = 0.5 - 0.25j


def _cplx(n):
    return (RNG.standard_normal(n) + 1j * RNG.standard_normal(n)).astype(np.complex64)


@pyptx.kernel
def _ops(out: c64[:, :], re: f32[:, :], a: c64[:], b: c64[:]):
    i = pyptx.grid(1)
    if i < a.size:
        x = a[i]
        y = b[i]
        out[i, 0] = x + y * 2
        out[i, 1] = x * y - 1j
        out[i, 2] = x / y
        out[i, 3] = -x.conjugate() + OFFSET
        out[i, 4] = 3.0 / x
        out[i, 5] = x ** 3
        z = pyptx.c64(x.imag, x.real)
        z -= y
        out[i, 6] = z
        re[i, 0] = abs(x)
        re[i, 1] = x.real * y.imag
        re[i, 2] = f32(x == y) + f32(x != x)


def test_complex_arithmetic_matches_numpy():
    n = 70
    a, b = _cplx(n), _cplx(n)
    b[5] = a[5]
    out = np.full((n, 7), np.nan, np.complex64)
    re = np.full((n, 3), np.nan, np.float32)
    _ops[2, 64](out, re, a, b)
    exp = np.stack([a + b * 2, a * b - 1j, a / b, -a.conj() + np.complex64(OFFSET), 3 / a,
                    a ** 3, (a.imag + 1j * a.real).astype(np.complex64) - b], 1)
    np.testing.assert_allclose(out, exp.astype(np.complex64), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(re[:, 0], np.abs(a), rtol=2e-7)
    np.testing.assert_array_equal(re[:, 1], a.real * b.imag)
    np.testing.assert_array_equal(re[:, 2], (a == b).astype(np.float32))


def test_division_and_abs_do_not_overflow_in_the_intermediates():
    a = np.array([1e30 + 3e30j, 3e-30 - 1e-30j, 2e38 + 0j], np.complex64)
    b = np.array([2e25 - 1e25j, 1e-25 + 4e-25j, 1e38 + 1e38j], np.complex64)
    out = np.full((3, 7), np.nan, np.complex64)
    re = np.full((3, 3), np.nan, np.float32)
    with np.errstate(all="ignore"):
        _ops[1, 32](out, re, a, b)
        exp = (a.astype(np.complex128) / b).astype(np.complex64)
    np.testing.assert_allclose(out[:, 2], exp, rtol=1e-6)
    np.testing.assert_allclose(re[:, 0], np.abs(a.astype(np.complex128)), rtol=1e-6)
    assert np.isfinite(re[:, 0]).all()


def test_mandelbrot_escape_counts():
    @pyptx.kernel
    def mandel(out: i32[:, :], x0: f32, y0: f32, step: f32, maxit: i32):
        i, j = pyptx.grid(2)
        if i < out.shape[1] and j < out.shape[0]:
            c = complex(x0 + i * step, y0 + j * step)
            z = 0j
            n = 0
            while n < maxit and abs(z) <= 2.0:
                z = z * z + c
                n += 1
            out[j, i] = n
    h, w, it = 24, 40, 60
    out = np.full((h, w), -1, np.int32)
    x0, y0, step = np.float32(-2.1), np.float32(-1.2), np.float32(0.075)
    mandel[(3, 3), (16, 8)](out, x0, y0, step, it)
    exp = np.zeros((h, w), np.int32)
    for j in range(h):
        for i in range(w):
            c = np.complex64(complex(np.float32(x0 + np.float32(i) * step),
                                     np.float32(y0 + np.float32(j) * step)))
            z, n = np.complex64(0), 0
            while n < it and np.abs(z) <= 2.0:
                z = np.complex64(z * z + c)
                n += 1
            exp[j, i] = n
    assert (out == exp).mean() > 0.99          # fma contraction may move a boundary point
    assert (out >= 0).all()


def test_shared_c64_array_and_unannotated_launch():
    @pyptx.kernel
    def rev(out, a):
        t = pyptx.shared.array(32, c64)
        i = pyptx.thread_idx.x
        t[i] = a[i]
        pyptx.syncthreads()
        out[i] = t[31 - i] * 1j
    a = _cplx(32)
    out = np.full(32, np.nan, np.complex64)
    rev[1, 32](out, a)
    np.testing.assert_array_equal(out, a[::-1] * np.complex64(1j))


@pytest.mark.parametrize("body,phrase", [
    ("z = a[0]\n    out[0] = f32(z < z)", "not ordered"),
    ("z = a[0]\n    out[0] = z.angle", ".real"),
    ("z = a[0]\n    out[0] = z // z", "not defined for complex"),
])
def test_complex_errors(body, phrase):
    src = f"def k(out: f32[:], a: c64[:]):\n    {body}\n"
    ns = {"pyptx": pyptx, "f32": f32, "c64": c64}
    import linecache, types
    fname = f"<complex-test-{abs(hash(body))}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    exec(compile(src, fname, "exec"), ns)
    with pytest.raises(pyptx.CompileError, match=phrase):
        pyptx.compile(pyptx.kernel(ns["k"]))


@pytest.mark.parametrize("body,col,phrase", [
    ("out[0] = a[0] * 2", 5, "cannot store a complex value into an f32 array"),
    ("z = a[0]\n    out[0] = z", 5, "cannot store a complex value into an f32 array"),
    ("out[0] = 1j", 5, "cannot store a complex value into an f32 array"),
    ("out[0] = f32(a[0])", 14, "got a complex value"),
])
def test_a_complex_value_where_a_number_belongs_is_named_complex(body, col, phrase):
    """It used to say "got a tuple" (a Complex is a pair of f32 inside the frontend)."""
    src = f"def k(out: f32[:], a: c64[:]):\n    {body}\n"
    ns = {"pyptx": pyptx, "f32": f32, "c64": c64}
    import linecache
    fname = f"<complex-store-{abs(hash(body))}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    exec(compile(src, fname, "exec"), ns)
    with pytest.raises(pyptx.CompileError) as ei:
        pyptx.compile(pyptx.kernel(ns["k"]))
    e = ei.value
    assert phrase in e.msg and "tuple" not in e.msg, e.msg
    assert (e.filename, e.lineno, e.offset) == (fname, len(src.splitlines()), col), str(e)
    if "store" in phrase:
        assert ".real" in e.msg and ".imag" in e.msg and "c64" in e.msg


def test_complex_scalar_parameter_is_a_compile_error():
    @pyptx.kernel
    def k(out: f32[:], z: c64):
        out[0] = 1.0
    with pytest.raises(pyptx.CompileError, match="two f32"):
        pyptx.compile(k)


def test_division_by_zero_gives_numpy_inf_nan():
    @pyptx.kernel
    def k(out: c64[:], a: c64[:], b: c64[:]):
        i = pyptx.grid(1)
        out[i] = a[i] / b[i]
    a = np.array([1 + 2j, -3 + 0j, 0j, 2 - 1j], np.complex64)
    b = np.array([0j, 0j, 0j, 1 + 1j], np.complex64)
    out = np.full(4, 7 + 7j, np.complex64)
    k[1, 4](out, a, b)
    with np.errstate(all="ignore"):
        exp = a / b
    np.testing.assert_array_equal(out, exp)


@pyptx.func
def _cmul_add(z, w, s: f32):
    return z * w + s


@pyptx.func
def _polar(r: f32, t: f32):
    return complex(r * pyptx.math.cos(t), r * pyptx.math.sin(t))


def test_device_functions_take_and_return_complex():
    @pyptx.kernel
    def k(out: c64[:], a: c64[:], r: f32[:]):
        i = pyptx.grid(1)
        z = _polar(r[i], 0.5)
        out[i] = _cmul_add(a[i], z, 1.0) + _polar(1.0, r[i]).conjugate()
    a = _cplx(32)
    r = RNG.random(32).astype(np.float32)
    out = np.full(32, np.nan, np.complex64)
    k[1, 32](out, a, r)
    z = r * np.exp(0.5j)
    np.testing.assert_allclose(out, a * z + 1 + np.exp(-1j * r.astype(np.float64)), rtol=1e-5,
                               atol=1e-6)

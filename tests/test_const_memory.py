"""Constant memory (frontend/constmem.py): `pyptx.const_array(TABLE)` / `cuda.const.array_like`
compiles a module-level numpy array into a `.const` array; checked against numpy on the CPU
executor, plus its freezing, disk-cache key, limits and read-only errors."""
import numpy as np
import pytest

import pyptx
from pyptx import cachekey, cuda, f32, i32

RNG = np.random.default_rng(1414)
TAPS = (RNG.random(7) - 0.5).astype(np.float32)
GRID = RNG.integers(-1000, 1000, (3, 4, 5)).astype(np.int32)
FLAGS = RNG.random(9) < 0.5


@pyptx.func
def _fir(t, x, i):
    s = f32(0)
    for j in range(t.shape[0]):
        s += t[j] * x[i + j]
    return s


@pyptx.kernel
def _filter(out: f32[:], x: f32[:], g: i32[:], n: i32):
    i = pyptx.grid(1)
    t = pyptx.const_array(TAPS)
    c = pyptx.const_array(GRID)
    if i < n - 6:
        out[i] = _fir(t, x, i)                       # passed to a device function
        g[i] = c[i % 3, i % 4, i % 5] + c[1][2][::2][i % 3] + i32(pyptx.const_array(FLAGS)[i % 9])


def test_const_tables_match_numpy():
    n = 100
    x = RNG.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    g = np.full(n, -7, np.int32)
    _filter[2, 64](out, x, g, n)
    m = n - 6
    want = np.array([np.dot(TAPS.astype(np.float64), x[i:i + 7]) for i in range(m)])
    np.testing.assert_allclose(out[:m], want, rtol=1e-5, atol=1e-6)
    assert np.isnan(out[m:]).all()
    i = np.arange(m)
    np.testing.assert_array_equal(g[:m], GRID[i % 3, i % 4, i % 5] + GRID[1, 2, ::2][i % 3]
                                  + FLAGS[i % 9])
    assert (g[m:] == -7).all()


def test_ptx_has_one_const_array_per_table_and_reads_ld_const():
    @pyptx.kernel
    def k(out: f32[:]):
        i = pyptx.grid(1)
        a = pyptx.const_array(TAPS)
        b = cuda.const.array_like(TAPS)              # the same data: the same .const array
        out[i] = a[i % 7] + b[(i + 1) % 7]
    c = pyptx.compile(k)
    assert c.ptx.count(".const .align") == 1 and "ld.const.f32" in c.ptx
    assert c.ir.count("const @") == 1
    out = np.full(64, np.nan, np.float32)
    k[1, 64](out)
    i = np.arange(64)
    np.testing.assert_array_equal(out, TAPS[i % 7] + TAPS[(i + 1) % 7])


def test_reading_past_a_const_table_faults(cpu_device):
    @pyptx.kernel
    def k(out: f32[:], j: i32):
        out[0] = pyptx.const_array(TAPS)[j]
    out = np.full(1, np.nan, np.float32)
    k[1, 1](out, 6)
    assert out[0] == TAPS[6]
    with pytest.raises(pyptx.MemoryFault):
        k[1, 1](out, 7)


def test_table_is_frozen_at_compile_and_keyed_by_its_bytes():
    table = np.arange(4, dtype=np.float32) + 0.5

    def body(out: f32[:]):
        out[pyptx.thread_idx.x] = pyptx.const_array(table)[pyptx.thread_idx.x]
    k = pyptx.kernel(body)
    out = np.full(4, np.nan, np.float32)
    k[1, 4](out)
    np.testing.assert_array_equal(out, [0.5, 1.5, 2.5, 3.5])
    key = cachekey.dependencies(body)
    table[2] = -9.0                                   # a compiled kernel keeps what it read
    k[1, 4](out)
    np.testing.assert_array_equal(out, [0.5, 1.5, 2.5, 3.5])
    assert cachekey.dependencies(body) != key         # ... but the disk key sees the change
    pyptx.kernel(body)[1, 4](out)                     # and a new Kernel compiles the new data
    np.testing.assert_array_equal(out, [0.5, 1.5, -9.0, 3.5])


def test_disk_cache_does_not_answer_for_changed_data(tmp_path, monkeypatch):
    monkeypatch.setenv("PYPTX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PYPTX_NO_CACHE", raising=False)
    table = np.full(3, 2.0, np.float32)

    def body(out: f32[:]):
        out[pyptx.thread_idx.x] = pyptx.const_array(table)[pyptx.thread_idx.x]
    out = np.full(3, np.nan, np.float32)
    pyptx.kernel(body)[1, 3](out)
    table[:] = (-1.0, 4.0, 8.0)
    pyptx.kernel(body)[1, 3](out)
    np.testing.assert_array_equal(out, table)


BIG = np.zeros(16 * 1024 + 1, np.float32)
SCALAR = 3.0


@pytest.mark.parametrize("body,phrase", [
    ("t = pyptx.const_array(TAPS)\nt[0] = 1.0", "read-only"),
    ("t = pyptx.const_array(TAPS)\npyptx.atomic_add(t, 0, 1.0)", "read-only"),
    ("t = pyptx.const_array(BIG)", "64 KiB"),
    ("t = pyptx.const_array(SCALAR)", "numpy array"),
    ("t = pyptx.const_array(out)", "numpy array"),
    ("y = CPLX[0]", "convert it"),          # a module array is const memory: of a pyptx dtype
])
def test_const_array_errors(body, phrase):
    import linecache
    src = "def k(out: f32[:]):\n" + "".join(f"    {ln}\n" for ln in body.splitlines())
    fname = f"<const-{abs(hash(body))}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    ns = {"f32": f32, "pyptx": pyptx, "TAPS": TAPS, "BIG": BIG, "SCALAR": SCALAR,
          "CPLX": np.zeros(3, np.complex128)}
    exec(compile(src, fname, "exec"), ns)
    with pytest.raises(pyptx.CompileError, match=phrase) as ei:
        pyptx.compile(pyptx.kernel(ns["k"]))
    assert ei.value.lineno >= 2

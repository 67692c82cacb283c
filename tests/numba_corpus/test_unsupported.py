"""What a Numba kernel may use but pyptx cannot honour is an error at the user's line that
says what to write instead (never an internal exception)."""
import linecache
import textwrap

import numpy as np
import pytest

import pyptx
from pyptx import cuda

TABLE = np.arange(8, dtype=np.float32)


def _kernel(body: str, params="x, out"):
    src = textwrap.dedent(f"""\
        import math
        import numpy as np
        from pyptx import cuda

        @cuda.jit
        def k({params}):
            i = cuda.grid(1)
        """) + textwrap.indent(textwrap.dedent(body), "    ")
    fname = f"<numba-unsupported-{abs(hash(src))}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    ns = {"TABLE": TABLE}
    exec(compile(src, fname, "exec"), ns)
    return ns["k"]


@pytest.mark.parametrize("body,phrase", [
    ("t = cuda.const.array_like(TABLE)\nt[i] = x[i, 0]\n", "read-only"),
    ("out[i] = math.gamma(x[i])\n", "not available in kernels"),
    ("out[i] = np.sum(x)\n", "numpy"),
    ("n = x.shape[0]\nbuf = cuda.local.array(n, dtype=np.float32)\nout[i] = buf[0]\n",
     "compile-time"),
    ("out[i] = x[i] < 1j\n", "not ordered"),
])
def test_unsupported_construct_is_located_compile_error(body, phrase):
    k = _kernel(body)
    x = np.ones((4, 4), np.float32)
    with pytest.raises(pyptx.CompileError, match=phrase) as ei:
        k[1, 4](x, np.zeros(4, np.float32))
    assert ei.value.lineno >= 8                     # the body's line, not the decorator's


@pytest.mark.parametrize("opts,phrase", [({"forceobj": True}, "forceobj"),
                                         ({"link": ["ext.cu"]}, "link")])
def test_unsupported_jit_options_are_type_errors(opts, phrase):
    with pytest.raises(TypeError, match=phrase):
        cuda.jit(**opts)(lambda x: None)


def test_bad_numba_signature_is_a_value_error():
    with pytest.raises(ValueError, match="float32"):
        cuda.jit("void(float33[:])")(lambda x: None)


def test_launch_forms():
    @cuda.jit
    def fill(out, v):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = v
    out = np.full(40, np.nan, np.float32)
    fill[2, 32, 0](out, np.float32(2.5))
    assert (out == 2.5).all()
    d = cuda.device_array_like(out)
    fill[2, 32, None, 0](d, np.float32(-1.0))
    assert (d.copy_to_host() == -1.0).all()
    with pytest.raises(pyptx.LaunchError):
        fill[2](out, np.float32(1.0))


def test_numba_type_objects_as_signature_and_dtype():
    """`from numba import float32` (when Numba is installed) keeps working after the import
    of `cuda` is changed: Numba's type objects read as pyptx types."""
    numba = pytest.importorskip("numba")
    f4, i4 = numba.float32, numba.int32

    @cuda.jit(numba.void(f4[:], i4))
    def double_via_shared(x, n):
        s = cuda.shared.array(32, dtype=f4)
        i = cuda.grid(1)
        s[cuda.threadIdx.x] = x[i] * 2
        cuda.syncthreads()
        if i < n:
            x[i] = s[cuda.threadIdx.x]
    x = np.random.default_rng(1).random(64).astype(np.float32)
    exp = x * 2
    double_via_shared[2, 32](x, 64)
    np.testing.assert_array_equal(x, exp)

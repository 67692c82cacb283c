"""`cp_async(..., src_bytes=)`, the zero-fill form of cp.async, on the CPU executor: bytes past
src_bytes are zeros, never read (no MemoryFault for them), and initialised for the sanitizer."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyptx
from pyptx import i32, thread_idx, u8, u16

from kernel_factory import make_kernel

rng = np.random.default_rng(20261124)
POISON = 0xA5                   # shared memory starts as this, so zeros are really written


@pyptx.kernel
def zfill_bytes(out: u8[:], x: u8[:], sb: i32[:], nbytes: pyptx.constexpr):
    """Thread t copies bytes [t*nbytes, (t+1)*nbytes) of x, reading sb[t] of them."""
    s = pyptx.shared.array(64 * 16, u8)
    t = thread_idx.x
    for j in range(nbytes):
        s[t * nbytes + j] = POISON
    pyptx.syncthreads()
    pyptx.cp_async(s, t * nbytes, x, t * nbytes, nbytes, sb[t])
    pyptx.cp_async_wait(0)
    pyptx.syncthreads()
    for j in range(nbytes):
        out[t * nbytes + j] = s[t * nbytes + j]


def _expected(x, sb, nbytes):
    want = x.reshape(-1, nbytes).copy()
    want[np.arange(nbytes)[None, :] >= sb[:, None]] = 0
    return want.reshape(-1)


@pytest.mark.parametrize("nbytes", [4, 8, 16])
@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_zero_fill_per_lane(nbytes, seed):
    r = np.random.default_rng(seed)
    threads = 64
    x = r.integers(1, 256, threads * nbytes, dtype=np.uint8)       # no zero bytes
    sb = r.integers(0, nbytes + 1, threads).astype(np.int32)
    sb[:3] = (0, nbytes, nbytes // 2)                                 # both ends always
    out = np.full(x.shape, 0x5A, np.uint8)
    zfill_bytes[1, threads](out, x, sb, nbytes)
    np.testing.assert_array_equal(out, _expected(x, sb, nbytes))


@pytest.mark.parametrize("nbytes", [4, 8, 16])
def test_unread_bytes_past_the_end_do_not_fault(nbytes):
    """x ends inside thread 30's chunk; threads 31.. point past the end and read nothing."""
    threads = 40
    n = 30 * nbytes + nbytes // 2
    x = rng.integers(1, 256, n, dtype=np.uint8)
    sb = np.clip(n - np.arange(threads) * nbytes, 0, nbytes).astype(np.int32)
    out = np.full(threads * nbytes, 0x5A, np.uint8)
    zfill_bytes[1, threads](out, x, sb, nbytes)
    padded = np.concatenate([x, np.zeros(threads * nbytes - n, np.uint8)])
    np.testing.assert_array_equal(out, _expected(padded, sb, nbytes))


@pytest.mark.parametrize("nbytes", [4, 8, 16])
def test_one_byte_past_the_end_faults_on_the_executor(nbytes, cpu_device):
    threads = 40
    n = 30 * nbytes + nbytes // 2
    x = rng.integers(1, 256, n, dtype=np.uint8)
    sb = np.clip(n - np.arange(threads) * nbytes, 0, nbytes).astype(np.int32)
    out = np.full(threads * nbytes, 0x5A, np.uint8)
    sb[30] += 1                                          # one byte past the end is read
    with pytest.raises(pyptx.MemoryFault, match="past the end of parameter 'x'"):
        zfill_bytes[1, threads](out, x, sb, nbytes)


def test_src_bytes_larger_than_nbytes_is_a_launch_error(cpu_device):
    x = rng.integers(1, 256, 64 * 8, dtype=np.uint8)
    sb = np.full(64, 8, np.int32)
    sb[5] = 9
    with pytest.raises(pyptx.LaunchError, match="src-size 9 is larger than cp-size 8"):
        zfill_bytes[1, 64](np.zeros_like(x), x, sb, 8)


@pyptx.kernel
def zfill_tile(out: u16[:, :], x: u16[:, :], rows: i32, width: i32):
    """A 16 x 32 tile of halves, 16 bytes a copy: rows >= rows and columns >= width (< x's
    own width, so the source is always inside x) come out as zeros."""
    s = pyptx.shared.array((16, 32), u16)
    t = thread_idx.x                     # 64 threads: 16 rows x 4 chunks of 8 halves
    r = t >> 2
    c = (t & 3) * 8
    nb = min(max((width - c) * 2, 0), 16) if r < rows else 0
    pyptx.cp_async(s, (r, c), x, (min(r, x.shape[0] - 1), c), 16, nb)
    pyptx.cp_async_wait(0)
    pyptx.syncthreads()
    for j in range(8):
        out[r, c + j] = s[r, c + j]


@pytest.mark.parametrize("rows, width", [(16, 32), (16, 27), (5, 32), (9, 3), (0, 32), (7, 0)])
def test_partial_rows(rows, width):
    x = rng.integers(1, 2**16, (16, 32), dtype=np.uint16)
    out = np.full((16, 32), 0xFFFF, np.uint16)
    zfill_tile[1, 64](out, x, rows, width)
    want = np.zeros_like(x)
    want[:rows, :width] = x[:rows, :width]
    np.testing.assert_array_equal(out, want)


def test_sanitizer_sees_zero_filled_bytes_as_written():
    x = rng.integers(1, 2**16, (16, 32), dtype=np.uint16)
    out = np.full((16, 32), 0xFFFF, np.uint16)
    with pyptx.sanitize(race=True, init=True):
        zfill_tile[1, 64](out, x, 9, 13)
    want = np.zeros_like(x)
    want[:9, :13] = x[:9, :13]
    np.testing.assert_array_equal(out, want)


def test_ptx_carries_src_size_only_when_needed():
    ptx = pyptx.compile(zfill_tile, arch="sm_80").ptx
    assert re.search(r"cp\.async\.cg\.shared\.global \[%rd\d+\], \[%rd\d+\], 16, %r\d+;", ptx)
    src = ("import pyptx\nfrom pyptx import u8\n@pyptx.kernel\ndef k(x: u8[:]):\n"
           "    s = pyptx.shared.array(64, u8)\n"
           "    pyptx.cp_async(s, 0, x, 0, 8, 8)\n    pyptx.cp_async(s, 8, x, 8, 4, 0)\n"
           "    pyptx.cp_async_wait(0)\n")
    ptx = pyptx.compile(make_kernel(src, "k"), arch="sm_80").ptx
    assert re.search(r"cp\.async\.ca\.shared\.global \[%rd\d+\], \[%rd\d+\], 8;", ptx)
    # the constant element offsets (8) are the addresses' immediates (address folding)
    assert re.search(r"cp\.async\.ca\.shared\.global \[%rd\d+\+8\], \[%rd\d+\+8\], 4, 0;", ptx)


@pytest.mark.parametrize("arg, msg", [
    ("17", "between 0 and nbytes"),
    ("-1", "between 0 and nbytes"),
    ("1.5", "integer byte count"),
    ("o[0] > 0", "integer byte count"),
])
def test_bad_src_bytes_is_a_compile_error(arg, msg):
    src = ("import pyptx\nfrom pyptx import u8\n@pyptx.kernel\ndef k(o: u8[:], x: u8[:]):\n"
           "    s = pyptx.shared.array(64, u8)\n"
           f"    pyptx.cp_async(s, 0, x, 0, 16, {arg})\n    pyptx.cp_async_wait(0)\n")
    with pytest.raises(pyptx.CompileError, match=msg):
        pyptx.compile(make_kernel(src, "k"), arch="sm_80")

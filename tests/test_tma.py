"""TMA (`pyptx.TensorMap` + `pyptx.tma_load`) on the CPU executor, against the PTX ISA: the box
at the given coordinates (numpy order here, innermost first in PTX) lands in shared memory
densely in row-major order, each byte at its address swizzled by the map's mode; elements
outside the tensor read as zeros; the bytes count as transactions on the mbarrier; the tile is
not there before the wait.  The expected layouts are written out here from the ISA's
definition of the swizzle modes (not from the executor's swizzle.py).

Every kernel here is assembled by ptxas for sm_90 (conftest) and, in
test_ptxas_accepts_sm_90a, for sm_90a."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyptx
from pyptx import f32, i32, u8, u64, thread_idx
from pyptx.bfloat16 import BFLOAT16
from pyptx.errors import CompileError, SanitizerError

rng = np.random.default_rng(20261127)


# ---- the ISA's layout, written out independently ---------------------------------------------

def swizzled(L: np.ndarray, mode: int) -> np.ndarray:
    """Where byte L of a dense box lands (relative to a tile base aligned to the pattern's
    repeat).  PTX ISA, tensor swizzling modes: shared memory is seen as rows of 128 bytes made
    of eight 16-byte chunks; with an N-byte swizzle the chunk index of a byte is XORed with
    its row index modulo N/16 (so 32B swaps chunk pairs on odd rows, 128B permutes all eight
    chunks over a period of eight rows)."""
    if mode == 0:
        return L
    chunk = (L >> 4) & 7
    row = L >> 7
    return (L & ~0x70) | ((chunk ^ (row % (mode // 16))) << 4)


def expected_box(a: np.ndarray, coords, box) -> np.ndarray:
    """The box of `a` at `coords` (numpy order), elements outside `a` zero."""
    out = np.zeros(box, a.dtype)
    for idx in np.ndindex(*box):
        g = tuple(c + i for c, i in zip(coords, idx))
        if all(0 <= x < n for x, n in zip(g, a.shape)):
            out[idx] = a[g]
    return out


def expected_shared(a, coords, box, mode) -> np.ndarray:
    raw = np.frombuffer(expected_box(a, coords, box).tobytes(), np.uint8)
    out = np.zeros(raw.size, np.uint8)
    out[swizzled(np.arange(raw.size), mode)] = raw
    return out


# ---- kernels: load one box, copy the tile's raw shared bytes out -------------------------------

@pyptx.kernel
def load2d(out: u8[:], tm: pyptx.tensormap, c0: i32, c1: i32, NB: pyptx.constexpr):
    tile = pyptx.shared.array(NB, u8)
    bars = pyptx.shared.array(1, u64)
    tid = thread_idx.x
    if tid == 0:
        pyptx.mbarrier_init(bars, 0, 1)
        pyptx.fence_mbarrier_init()
    pyptx.syncthreads()
    if tid == 0:
        pyptx.mbarrier_arrive_expect_tx(bars, 0, NB)
        pyptx.tma_load(tile, 0, tm, (c0, c1), bars, 0)
    pyptx.mbarrier_wait(bars, 0, 0)
    for i in range(tid, NB, 64):
        out[i] = tile[i]


@pyptx.kernel
def load3d(out: u8[:], tm: pyptx.tensormap, c0: i32, c1: i32, c2: i32, NB: pyptx.constexpr):
    tile = pyptx.shared.array(NB, u8)
    bars = pyptx.shared.array(1, u64)
    tid = thread_idx.x
    if tid == 0:
        pyptx.mbarrier_init(bars, 0, 1)
        pyptx.fence_mbarrier_init()
    pyptx.syncthreads()
    if tid == 0:
        pyptx.mbarrier_arrive_expect_tx(bars, 0, NB)
        pyptx.tma_load(tile, 0, tm, (c0, c1, c2), bars, 0)
    pyptx.mbarrier_wait(bars, 0, 0)
    for i in range(tid, NB, 64):
        out[i] = tile[i]


def _array(dtype, shape):
    if dtype == "bf16":
        return (rng.integers(-500, 500, size=shape) / 8).astype(np.float32).astype(BFLOAT16)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dt)


def _run2d(a, box, coords, swizzle):
    tm = pyptx.TensorMap(a, box, swizzle=swizzle)
    nb = tm.box_bytes
    out = np.full(nb, 0xAB, np.uint8)
    load2d[1, 64](out, tm, coords[0], coords[1], nb)
    return out


DTYPES = ["float32", "float16", "bf16", "uint8", "int8"]
ESIZE = {"float32": 4, "float16": 2, "bf16": 2, "uint8": 1, "int8": 1}


@pytest.mark.parametrize("swizzle", [0, 32, 64, 128])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("where", ["inside", "top-left", "bottom-right", "outside"])
def test_load_2d_box_every_dtype_and_swizzle(cpu_device, dtype, swizzle, where):
    es = ESIZE[dtype]
    inner = (swizzle or 32) // es                     # the box's inner bytes = the swizzle span
    box = (12, inner)
    a = _array(dtype, (29, 3 * inner + 16 // es))     # row pitch a multiple of 16 bytes
    coords = {"inside": (5, inner + 16 // es), "top-left": (-5, -(16 // es)),
              "bottom-right": (24, a.shape[1] - inner // 2), "outside": (29, 0)}[where]
    out = _run2d(a, box, coords, swizzle)
    np.testing.assert_array_equal(out, expected_shared(a, coords, box, swizzle))


@settings(max_examples=25)
@given(r=st.integers(-20, 40), c=st.integers(-70, 90), swizzle=st.sampled_from([0, 64, 128]))
def test_load_2d_any_coordinates(cpu_device, r, c, swizzle):
    a = _array("float16", (33, 56))
    box = (16, 64 // 2 if swizzle != 128 else 64)
    out = _run2d(a, box, (r, c), swizzle)
    np.testing.assert_array_equal(out, expected_shared(a, (r, c), box, swizzle))


@pytest.mark.parametrize("swizzle,coords", [(0, (1, 2, 4)), (64, (2, -1, 8)), (128, (-1, 7, -8)),
                                            (32, (0, 0, 0))])
def test_load_3d_box(cpu_device, swizzle, coords):
    es = 2
    inner = (swizzle or 32) // es
    a = _array("float16", (3, 10, 40))
    box = (2, 4, inner)
    tm = pyptx.TensorMap(a, box, swizzle=swizzle)
    out = np.full(tm.box_bytes, 0xAB, np.uint8)
    load3d[1, 64](out, tm, *coords, tm.box_bytes)
    np.testing.assert_array_equal(out, expected_shared(a, coords, box, swizzle))


def test_strided_rows(cpu_device):
    """A view whose rows are further apart than their length: the map's byte strides."""
    base = _array("float32", (20, 24))
    a = base[2:18:2, 4:]                     # row stride 192 bytes, inner contiguous
    out = _run2d(a, (4, 8), (3, 12), 0)
    np.testing.assert_array_equal(out, expected_shared(a, (3, 12), (4, 8), 0))


# ---- a multi-stage TMA pipeline ------------------------------------------------------------------

@pyptx.kernel
def pipeline(out: f32[:], tm: pyptx.tensormap, K: pyptx.constexpr, S: pyptx.constexpr,
             SW: pyptx.constexpr):
    """Thread 0 streams K boxes of 8 x 32 f32 through an S-stage ring (full[s]: the box's
    bytes landed; empty[s]: warp 1's 32 threads read it); warp 1 lane c folds column c of each
    box, reading element (r, c) at its swizzled place.  Block b streams rows from 8 * K * b."""
    tiles = pyptx.shared.array((S, 256), f32)
    full = pyptx.shared.array(S, u64)
    empty = pyptx.shared.array(S, u64)
    tid = thread_idx.x
    if tid == 0:
        for s in range(S):
            pyptx.mbarrier_init(full, s, 1)
            pyptx.mbarrier_init(empty, s, 32)
        pyptx.fence_mbarrier_init()
    pyptx.syncthreads()
    if tid == 0:
        for k in range(K):
            s = k % S
            pyptx.mbarrier_wait(empty, s, ((k // S) & 1) ^ 1)
            pyptx.mbarrier_arrive_expect_tx(full, s, 8 * 32 * 4)
            pyptx.tma_load(tiles, (s, 0), tm, (8 * (k + K * pyptx.block_idx.x), 0), full, s)
    elif tid >= 32:
        c = tid - 32
        acc = f32(0.0)
        for k in range(K):
            s = k % S
            pyptx.mbarrier_wait(full, s, (k // S) & 1)
            col = f32(0.0)
            for r in range(8):
                byte = r * 128 + c * 4
                if SW:
                    byte = byte ^ (((byte >> 7) & (SW // 16 - 1)) << 4)
                col += tiles[s, byte // 4]
            acc = acc * f32(0.5) + col
            pyptx.mbarrier_arrive(empty, s)
        out[32 * pyptx.block_idx.x + c] = acc


@pytest.mark.parametrize("K,S,SW", [(7, 3, 128), (5, 2, 0), (4, 1, 128)])
def test_pipeline_uses_every_stage_and_parity(cpu_device, K, S, SW):
    """K > S: each stage is refilled (both parities of full[s] and empty[s] waited on when
    K > 2S); the last box hangs over the end of the array (its missing rows read as zeros).
    Values are small integers, so every f32 sum is exact and equality is the check."""
    blocks = 3                 # each block has its own barriers and tiles
    rows = 8 * K * blocks - 3
    a = rng.integers(-4, 5, size=(rows, 32)).astype(np.float32)
    tm = pyptx.TensorMap(a, (8, 32), swizzle=SW)
    out = np.zeros(32 * blocks, np.float32)
    pipeline[blocks, 64](out, tm, K, S, SW)
    padded = np.zeros((8 * K * blocks, 32))
    padded[:rows] = a
    for b in range(blocks):
        want = np.zeros(32)
        for k in range(K):
            r0 = 8 * (k + K * b)
            want = want * 0.5 + padded[r0:r0 + 8].sum(axis=0)
        np.testing.assert_array_equal(out[32 * b:32 * b + 32], want.astype(np.float32))


# ---- asynchronous completion: the tile is not there before the wait ----------------------------

@pyptx.kernel
def early_read(out: f32[:], tm: pyptx.tensormap, wait_first: pyptx.constexpr):
    tile = pyptx.shared.array(64, f32)
    bars = pyptx.shared.array(1, u64)
    tid = thread_idx.x
    if tid == 0:
        pyptx.mbarrier_init(bars, 0, 1)
        pyptx.fence_mbarrier_init()
    pyptx.syncthreads()
    if tid == 0:
        pyptx.mbarrier_arrive_expect_tx(bars, 0, 256)
        pyptx.tma_load(tile, 0, tm, (0, 0), bars, 0)
    if wait_first:
        pyptx.mbarrier_wait(bars, 0, 0)
    out[tid] = tile[tid]
    if not wait_first:
        pyptx.mbarrier_wait(bars, 0, 0)


def test_reading_before_the_wait_sees_stale_shared_memory(cpu_device):
    a = np.arange(1, 65, dtype=np.float32).reshape(8, 8)
    tm = pyptx.TensorMap(a, (8, 8))
    out = np.full(64, -1, np.float32)
    early_read[1, 64](out, tm, False)
    assert (out == 0).all()              # the executor's shared memory starts zeroed
    early_read[1, 64](out, tm, True)
    np.testing.assert_array_equal(out, a.reshape(-1))


def test_sanitizer_reports_reading_an_unfinished_tile(cpu_device):
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    tm = pyptx.TensorMap(a, (8, 8))
    out = np.zeros(64, np.float32)
    with pyptx.sanitize():
        early_read[1, 64](out, tm, True)          # waits: clean
        with pytest.raises(SanitizerError, match=r"TMA.*still writing.*mbarrier_wait") as e:
            early_read[1, 64](out, tm, False)
    assert e.value.kind == "race"


# ---- host errors and compile errors ------------------------------------------------------------

@pytest.mark.parametrize("make,msg", [
    (lambda: pyptx.TensorMap(np.zeros((8, 300), np.float32), (8, 257)), r"box dimension.*1..256"),
    (lambda: pyptx.TensorMap(np.zeros((8, 12), np.float32), (8, 3)),
     r"inner dimension must span a multiple of 16 bytes.*12 bytes"),
    (lambda: pyptx.TensorMap(np.zeros((8, 64), np.float32), (8, 64), swizzle=128),
     r"128-byte swizzle.*at most 128 bytes.*256 bytes"),
    (lambda: pyptx.TensorMap(np.zeros((8, 10), np.float32), (8, 4)),
     r"global stride \(bytes, dims 1..\) must be a multiple of 16.*got 40"),
    (lambda: pyptx.TensorMap(np.zeros((8, 8), np.bool_), (8, 16)), r"no TMA data type"),
    (lambda: pyptx.TensorMap(np.zeros((8, 8), np.complex64), (8, 2)), r"no TMA data type"),
    (lambda: pyptx.TensorMap(np.zeros(64, np.float32), (8,)), r"2-D or 3-D"),
    (lambda: pyptx.TensorMap(np.zeros((8, 8), np.float32), (8, 4), swizzle=16),
     r"swizzle must be 0, 32, 64 or 128"),
    (lambda: pyptx.TensorMap(np.zeros((8, 8), np.float32), (8,)), r"tuple of 2 ints"),
    (lambda: pyptx.TensorMap(np.zeros((8, 16), np.float32)[:, ::2], (8, 4)),
     r"innermost dimension must be contiguous"),
    (lambda: pyptx.TensorMap([[1.0]], (1, 4)), r"numpy array or a DeviceArray"),
])
def test_bad_tensor_map_is_a_value_error(make, msg):
    with pytest.raises(ValueError, match=msg):
        make()


def test_tma_load_needs_a_tensormap_parameter(tmp_path):
    src = ("import pyptx\nfrom pyptx import f32, u64\n\n@pyptx.kernel\n"
           "def bad(x: f32[:, :]):\n    t = pyptx.shared.array(64, f32)\n"
           "    b = pyptx.shared.array(1, u64)\n    pyptx.tma_load(t, 0, x, (0, 0), b, 0)\n")
    path = tmp_path / "bad_tma.py"
    path.write_text(src)
    ns: dict = {}
    exec(compile(src, str(path), "exec"), ns)      # noqa: S102 - the test's own source
    with pytest.raises(CompileError, match=r"tmap must be a tensor map parameter.*"
                                           r"pyptx.tensormap") as e:
        pyptx.compile(ns["bad"], arch="sm_90")
    assert e.value.lineno == 8


def test_tma_load_coordinates_match_the_rank(tmp_path):
    src = ("import pyptx\nfrom pyptx import f32, u64\n\n@pyptx.kernel\n"
           "def bad(tm: pyptx.tensormap):\n    t = pyptx.shared.array(64, f32)\n"
           "    b = pyptx.shared.array(1, u64)\n    pyptx.tma_load(t, 0, tm, 3, b, 0)\n")
    path = tmp_path / "bad_tma2.py"
    path.write_text(src)
    ns: dict = {}
    exec(compile(src, str(path), "exec"), ns)      # noqa: S102 - the test's own source
    with pytest.raises(CompileError, match=r"coords must be a tuple of 2 or 3"):
        pyptx.compile(ns["bad"], arch="sm_90")


def test_wrong_argument_for_a_tensormap_parameter(cpu_device):
    with pytest.raises(pyptx.LaunchError, match=r"must be a pyptx.TensorMap"):
        load2d[1, 64](np.zeros(64, np.uint8), np.zeros((8, 8), np.float32), 0, 0, 64)


def test_inferred_tensormap_parameter(cpu_device):
    @pyptx.kernel
    def copy_box(out, tm):
        tile = pyptx.shared.array(64, f32)
        bars = pyptx.shared.array(1, u64)
        if thread_idx.x == 0:
            pyptx.mbarrier_init(bars, 0, 1)
            pyptx.mbarrier_arrive_expect_tx(bars, 0, 256)
            pyptx.tma_load(tile, 0, tm, (2, 4), bars, 0)
        pyptx.mbarrier_wait(bars, 0, 0)
        out[thread_idx.x] = tile[thread_idx.x]
    a = rng.standard_normal((16, 16)).astype(np.float32)
    out = np.zeros(64, np.float32)
    copy_box[1, 64](out, pyptx.TensorMap(a, (8, 8)))
    np.testing.assert_array_equal(out, a[2:10, 4:12].reshape(-1))


def test_ptx_form_and_param_declaration():
    ptx = pyptx.compile(load3d, arch="sm_90", constexprs=dict(NB=256)).ptx
    assert ".param .align 64 .b8 tm[128]" in ptx
    assert "cvta.param.u64" in ptx
    # numpy order (c0 outermost) becomes PTX's innermost-first {c2, c1, c0}
    line = next(l for l in ptx.splitlines() if "cp.async.bulk.tensor.3d" in l)
    assert ("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
            in line)
    assert ".shared .align 1024 .b8" in ptx      # the destination tile: the 128B swizzle repeat


def test_ptx_coordinates_are_innermost_first():
    ptx = pyptx.compile(load2d, arch="sm_90", constexprs=dict(NB=256)).ptx
    loads = [l for l in ptx.splitlines() if "ld.param.s32" in l]
    reg = {l.split("[")[1].rstrip("];"): l.split()[1].rstrip(",") for l in loads}
    line = next(l for l in ptx.splitlines() if "cp.async.bulk.tensor.2d" in l)
    assert f"{{{reg['c1']}, {reg['c0']}}}" in line


def test_ptxas_accepts_sm_90a():
    from pyptx.toolchain import assemble, find_ptxas
    if find_ptxas() is None:
        pytest.skip("no ptxas")
    for k, cx in ((load2d, dict(NB=256)), (load3d, dict(NB=256)),
                  (pipeline, dict(K=7, S=3, SW=128)), (early_read, dict(wait_first=False)),
                  (move_box, dict(NB=1024, WAIT=True))):
        assemble(pyptx.compile(k, arch="sm_90a", constexprs=cx).ptx, "sm_90a")


# ---- the GPU path on the fake driver (not yet run on hardware) --------------------------------

def _encode_args(fd, ptr, **over):
    drv = fd
    args = dict(dtype=drv.CUtensorMapDataType(7), rank=2, address=ptr, dims=[64, 32],
                strides=[256], box=[32, 8], elem=[1, 1],
                interleave=drv.CUtensorMapInterleave(0), swizzle=drv.CUtensorMapSwizzle(3),
                l2=drv.CUtensorMapL2promotion(3), oob=drv.CUtensorMapFloatOOBfill(0))
    args.update(over)
    return list(args.values())


@pytest.mark.parametrize("over,rule", [
    ({}, None),
    (dict(address=None), "globalAddress 16-byte aligned"),            # ptr + 8
    (dict(strides=[200]), "globalStrides multiples of 16"),
    (dict(box=[32, 300]), "boxDim 1..256"),
    (dict(box=[3, 8]), "boxDim[0] * elementSize a multiple of 16"),
    (dict(box=[64, 8]), "box inner dimension <= swizzle span"),       # 256 B > 128 B
    (dict(rank=6), "rank 1..5"),
    (dict(dims=[64, 0]), "globalDim 1..2^32"),
    (dict(elem=[1, 9]), "elementStrides 1..8"),
    (dict(strides=[]), "array lengths"),
])
def test_fake_encode_checks_the_documented_rules(monkeypatch, over, rule):
    from fake_driver import FakeDriver, on_fake_gpu
    from pyptx.runtime.cpu.tma import decode
    gen = on_fake_gpu(monkeypatch, FakeDriver(cc=(9, 0)))
    fd = next(gen)
    try:
        d = pyptx.to_device(np.zeros((32, 64), np.float32))
        ptr = d.device_pointer
        if "address" in over:
            over = dict(over, address=ptr + 8)
        res = fd.cuTensorMapEncodeTiled(*_encode_args(fd, ptr, **over))
        if rule is None:
            assert res[0] == fd.CUresult.CUDA_SUCCESS
            m = decode(np.array(res[1].opaque, np.uint64).tobytes())
            assert (m["address"], m["dims"], m["strides"], m["box"], m["swizzle"]) == \
                (ptr, (64, 32), (4, 256), (32, 8), 128)
        else:
            assert res[0] == fd.CUresult.CUDA_ERROR_INVALID_VALUE
            assert rule in fd.last_tensormap_error
    finally:
        gen.close()


@pytest.mark.parametrize("swizzle", [0, 128])
def test_tma_load_through_the_fake_driver(monkeypatch, swizzle):
    """The GPU path end to end: cuTensorMapEncodeTiled (fake), the 128-byte parameter packed
    at its 64-byte alignment, the PTX JIT (ptxas for sm_90) and the launch, run by the fake on
    the CPU executor from the map the driver made."""
    from fake_driver import FakeDriver, on_fake_gpu
    gen = on_fake_gpu(monkeypatch, FakeDriver(cc=(9, 0)))
    fd = next(gen)
    try:
        a = _array("float32", (20, 40))
        box = (8, 32 if swizzle else 8)
        tm = pyptx.TensorMap(pyptx.to_device(a), box, swizzle=swizzle)
        out = pyptx.to_device(np.zeros(tm.box_bytes, np.uint8))
        load2d[1, 64](out, tm, 15, 12, tm.box_bytes)
        np.testing.assert_array_equal(out.copy_to_host(),
                                      expected_shared(a, (15, 12), box, swizzle))
        assert fd.count("cuTensorMapEncodeTiled") == 1
    finally:
        gen.close()


def test_numpy_tensor_map_on_a_gpu_is_refused(monkeypatch):
    from fake_driver import FakeDriver, on_fake_gpu
    gen = on_fake_gpu(monkeypatch, FakeDriver(cc=(9, 0)))
    next(gen)
    try:
        tm = pyptx.TensorMap(np.zeros((8, 8), np.float32), (8, 8))
        with pytest.raises(pyptx.LaunchError, match=r"TensorMap of a numpy array.*to_device"):
            load2d[1, 64](pyptx.to_device(np.zeros(256, np.uint8)), tm, 0, 0, 256)
    finally:
        gen.close()


# ---- TMA stores --------------------------------------------------------------------------------

@pyptx.kernel
def move_box(ta: pyptx.tensormap, tb: pyptx.tensormap, r0: i32, c0: i32, r1: i32, c1: i32,
             NB: pyptx.constexpr, WAIT: pyptx.constexpr):
    """Load the box of A at (r0, c0), store it into B at (r1, c1): both maps share the box and
    swizzle, so the tile's shared layout is whatever both agree on."""
    tile = pyptx.shared.array(NB, u8)
    bars = pyptx.shared.array(1, u64)
    if thread_idx.x == 0:
        pyptx.mbarrier_init(bars, 0, 1)
        pyptx.mbarrier_arrive_expect_tx(bars, 0, NB)
        pyptx.tma_load(tile, 0, ta, (r0, c0), bars, 0)
        pyptx.mbarrier_wait(bars, 0, 0)
        pyptx.tma_store(tb, (r1, c1), tile, 0)
        if WAIT:
            pyptx.tma_store_wait(0)


@pytest.mark.parametrize("swizzle", [0, 32, 128])
@pytest.mark.parametrize("dst", [(3, 8), (-2, -4), (14, 30)])
def test_store_writes_only_the_in_bounds_part_of_the_box(cpu_device, swizzle, dst):
    inner = (swizzle or 64) // 4
    box = (6, inner)
    a = _array("float32", (12, 40))
    b = np.full((17, 40), -1.0, np.float32)
    ta = pyptx.TensorMap(a, box, swizzle=swizzle)
    tb = pyptx.TensorMap(b, box, swizzle=swizzle)
    src = (2, 4)
    move_box[1, 32](ta, tb, *src, *dst, ta.box_bytes, True)
    want = np.full((17, 40), -1.0, np.float32)
    tile = expected_box(a, src, box)
    for (i, j), v in np.ndenumerate(tile):
        r, c = dst[0] + i, dst[1] + j
        if 0 <= r < 17 and 0 <= c < 40:
            want[r, c] = v
    np.testing.assert_array_equal(b, want)


def test_unwaited_stores_complete_by_the_end_of_the_kernel(cpu_device):
    a = _array("float32", (8, 16))
    b = np.zeros((8, 16), np.float32)
    ta, tb = pyptx.TensorMap(a, (8, 16)), pyptx.TensorMap(b, (8, 16))
    move_box[1, 32](ta, tb, 0, 0, 0, 0, ta.box_bytes, False)
    np.testing.assert_array_equal(b, a)


def test_store_through_the_fake_driver(monkeypatch):
    from fake_driver import FakeDriver, on_fake_gpu
    gen = on_fake_gpu(monkeypatch, FakeDriver(cc=(9, 0)))
    next(gen)
    try:
        a = _array("float32", (16, 32))
        da, db = pyptx.to_device(a), pyptx.to_device(np.zeros((16, 32), np.float32))
        ta = pyptx.TensorMap(da, (8, 32), swizzle=128)
        tb = pyptx.TensorMap(db, (8, 32), swizzle=128)
        move_box[1, 32](ta, tb, 8, 0, 4, 0, ta.box_bytes, True)
        want = np.zeros((16, 32), np.float32)
        want[4:12] = a[8:16]
        np.testing.assert_array_equal(db.copy_to_host(), want)
    finally:
        gen.close()


def test_store_ptx_form():
    ptx = pyptx.compile(move_box, arch="sm_90", constexprs=dict(NB=1024, WAIT=True)).ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in ptx
    assert "cp.async.bulk.commit_group;" in ptx and "cp.async.bulk.wait_group.read 0;" in ptx
    assert ".param .align 64 .b8 tb[128]" in ptx


def test_pipeline_is_clean_under_the_sanitizer(cpu_device):
    """A correct TMA ring: the consumers read each tile after its phase completed, and the
    next copy into a stage lands only after they arrived on its empty barrier."""
    a = rng.integers(-4, 5, size=(8 * 5 * 2, 32)).astype(np.float32)
    out = np.zeros(64, np.float32)
    with pyptx.sanitize():
        pipeline[2, 64](out, pyptx.TensorMap(a, (8, 32), swizzle=128), 5, 2, 128)
    want = [np.zeros(32), np.zeros(32)]
    for b in range(2):
        for k in range(5):
            want[b] = want[b] * 0.5 + a[8 * (k + 5 * b):8 * (k + 5 * b) + 8].sum(axis=0)
    np.testing.assert_array_equal(out, np.concatenate(want).astype(np.float32))


def test_tensormap_parameter_needs_sm_90(cpu_device):
    @pyptx.kernel
    def unused_map(tm: pyptx.tensormap, out: f32[:]):
        out[0] = 1.0
    with pytest.raises(CompileError, match=r"tensor map parameter 'tm'.*needs sm_90"):
        pyptx.compile(unused_map, arch="sm_80")
    out = np.zeros(1, np.float32)          # the CPU executor compiles it for sm_90 instead
    unused_map[1, 1](pyptx.TensorMap(np.zeros((4, 4), np.float32), (4, 4)), out)
    assert out[0] == 1.0


def test_rank_mismatch_and_misaligned_tile_are_reported(cpu_device):
    a3 = np.zeros((2, 4, 8), np.float32)
    with pytest.raises(pyptx.LaunchError, match=r"bulk.tensor.2d.*the tensor map has rank 3"):
        load2d[1, 64](np.zeros(256, np.uint8), pyptx.TensorMap(a3, (2, 4, 8)), 0, 0, 256)

    @pyptx.kernel
    def offset_tile(tm: pyptx.tensormap, di: i32):
        tile = pyptx.shared.array(2048, u8)
        bars = pyptx.shared.array(1, u64)
        if thread_idx.x == 0:
            pyptx.mbarrier_init(bars, 0, 1)
            pyptx.mbarrier_arrive_expect_tx(bars, 0, 1024)
            pyptx.tma_load(tile, di, tm, (0, 0), bars, 0)
            pyptx.mbarrier_wait(bars, 0, 0)
    a = np.zeros((8, 32), np.float32)
    offset_tile[1, 32](pyptx.TensorMap(a, (8, 32)), 128)             # 128-byte aligned: fine
    with pytest.raises(pyptx.MemoryFault, match=r"must be 128-byte aligned.*got shared address 64"):
        offset_tile[1, 32](pyptx.TensorMap(a, (8, 32)), 64)
    with pytest.raises(pyptx.MemoryFault, match=r"must be 1024-byte aligned.*128-byte swizzle"):
        offset_tile[1, 32](pyptx.TensorMap(a, (8, 32), swizzle=128), 128)


def test_param_packer_aligns_a_tensor_map_to_64_bytes():
    from pyptx.compiler import KernelParam
    from pyptx.runtime.param_packer import ParamPacker
    p = ParamPacker([KernelParam("n", "s32"), KernelParam("tm", "b8[128]"),
                     KernelParam("x", "u64")])
    assert p.offsets == [0, 64, 192]
    raw = bytes(range(128))
    import ctypes
    base = p.pack([7, raw, 9])
    ptrs = (ctypes.c_void_p * 3).from_address(base)
    assert ctypes.string_at(ptrs[1], 128) == raw


def test_device_array_maps_on_the_cpu_executor(cpu_device):
    """A DeviceArray on the CPU device: loads read its copy, stores land in it."""
    a = _array("float32", (16, 32))
    da, db = pyptx.to_device(a), pyptx.to_device(np.zeros((16, 32), np.float32))
    ta, tb = pyptx.TensorMap(da, (8, 32)), pyptx.TensorMap(db, (8, 32))
    move_box[1, 32](ta, tb, 4, 0, 8, 0, ta.box_bytes, True)
    want = np.zeros((16, 32), np.float32)
    want[8:16] = a[4:12]
    np.testing.assert_array_equal(db.copy_to_host(), want)


def test_read_only_array_cannot_be_stored_through(cpu_device):
    b = np.zeros((8, 16), np.float32)
    b.flags.writeable = False
    a = _array("float32", (8, 16))
    with pytest.raises(pyptx.LaunchError, match=r"read-only array.*tma_store"):
        move_box[1, 32](pyptx.TensorMap(a, (8, 16)), pyptx.TensorMap(b, (8, 16)), 0, 0, 0, 0,
                        512, True)

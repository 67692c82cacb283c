"""Read-only data path: arrays a kernel never writes are read with `ld.global.nc`; a launch in
which such an argument overlaps a written one runs the coherent (plain `ld.global`) PTX."""
from __future__ import annotations

import re

import numpy as np
import pytest

import pyptx
import pyptx.compiler as pyptx_compiler
from pyptx import f32, i32, u32
from pyptx.runtime.readonly import coherent_ptx, readonly_aliases_written, uses_nc

from fake_driver import FakeCompiler, FakeDriver, hand_compiled, on_fake_gpu

RNG = np.random.default_rng(11)


@pyptx.kernel
def accumulate(out: f32[:], x: f32[:], h: u32[:], n: i32):
    i = pyptx.grid(1)                  # n is a multiple of the block size (64)
    tile = pyptx.shared.array(64, f32)
    tile[pyptx.thread_idx.x] = x[i]
    pyptx.syncthreads()
    out[i] += tile[pyptx.thread_idx.x] + f32(x.view(u32)[i] & 1)
    pyptx.atomic_add(h, 0, 1)


def _loads(ptx):
    return re.findall(r"\bld\.(\w+(?:\.nc)?)\.\w+ ", ptx)


def test_only_never_written_global_arrays_use_nc():
    ptx = pyptx.compile(accumulate).ptx
    lines = [ln.strip() for ln in ptx.splitlines() if ln.strip().startswith(("ld.", "atom."))]
    nc = [ln for ln in lines if ".nc." in ln]
    assert len(nc) == 2 and all(re.match(r"ld\.global\.nc\.(f32|u32) ", ln) for ln in nc)
    assert any(re.match(r"ld\.global\.f32 ", ln) for ln in lines)        # out[i] += ... reads out
    assert any(ln.startswith("ld.shared.f32") for ln in lines)           # shared: never .nc
    assert any(ln.startswith("atom.global.add") for ln in lines)         # h is written (atomic)


def test_nc_kernels_run_on_the_executor(cpu_device):
    n = 128
    x = RNG.standard_normal(n).astype(np.float32)
    out = RNG.standard_normal(n).astype(np.float32)
    h = np.zeros(1, np.uint32)
    ref = out + (x + (x.view(np.uint32) & 1).astype(np.float32))
    accumulate[2, 64](out, x, h, n)
    assert np.array_equal(out, ref) and h[0] == n


def test_aliased_in_place_launch_is_correct_on_the_executor(cpu_device):
    x = RNG.standard_normal(128).astype(np.float32)
    out = x.copy()
    ref = x + (x + (x.view(np.uint32) & 1).astype(np.float32))
    accumulate[2, 64](out, out, np.zeros(1, np.uint32), 128)     # out is also the read-only x
    assert np.array_equal(out, ref)


def test_coherent_ptx_only_drops_nc():
    ptx = pyptx.compile(accumulate).ptx
    plain = coherent_ptx(ptx)
    assert uses_nc(ptx) and not uses_nc(plain)
    assert plain == ptx.replace("ld.global.nc.", "ld.global.")
    assert len(plain.splitlines()) == len(ptx.splitlines())


@pytest.mark.parametrize("spans,expected", [
    ([(0, 16, True), (16, 16, False)], False),            # adjacent: no overlap
    ([(0, 16, True), (8, 16, False)], True),              # overlapping
    ([(0, 16, True), (0, 16, False)], True),              # the same buffer twice
    ([(0, 16, False), (0, 16, False)], False),            # two readers may share
    ([(0, 16, True), (0, 16, True)], False),              # no read-only argument at all
    ([(0, 0, True), (0, 16, False)], False),              # an empty array overlaps nothing
    ([(32, 8, False), (0, 64, True)], True),              # inside a written one
])
def test_readonly_aliases_written(spans, expected):
    assert readonly_aliases_written(spans) is expected


# ---- the GPU launch path, on the fake driver ------------------------------------------------

@pytest.fixture
def fake(monkeypatch):
    yield from on_fake_gpu(monkeypatch, FakeDriver())


@pyptx.kernel
def scale(out: f32[:], x: f32[:], a: f32, n: i32):
    pass


SCALE = [("out", "array", f32, 1, True), ("x", "array", f32, 1, False),
         ("a", "scalar", f32, 0, False), ("n", "scalar", i32, 0, False)]
NC_BODY = "    .reg .f32 %f<2>;\n    .reg .b64 %rd<2>;\n    ld.global.nc.f32 %f1, [%rd1];\n"


def _body(fake, launch):
    p = launch.params
    x = fake.view(p["x"], np.float32, p["x_shape0"]).copy()
    fake.view(p["out"], np.float32, p["out_shape0"])[:] = x * np.float32(p["a"])


def _loaded_images(fake):
    return [c[1][0][:-1].decode() for c in fake.calls if c[0] == "cuModuleLoadDataEx"]


def test_gpu_launch_falls_back_to_coherent_loads_when_aliased(fake, monkeypatch):
    ck = hand_compiled("scale", SCALE, body=NC_BODY)
    monkeypatch.setattr(pyptx_compiler, "compile_kernel", FakeCompiler(lambda k, c, t: ck))
    fake.bodies["scale"] = _body
    x = RNG.standard_normal(16).astype(np.float32)
    out = np.full_like(x, np.nan)
    scale[1, 16](out, x, 2.0, 16)                       # distinct buffers: the .nc module
    np.testing.assert_array_equal(out, x * np.float32(2.0))
    images = _loaded_images(fake)
    assert len(images) == 1 and uses_nc(images[0])
    y = x.copy()
    scale[1, 16](y, y, 3.0, 16)                         # in place: the coherent module
    np.testing.assert_array_equal(y, x * np.float32(3.0))
    images = _loaded_images(fake)
    assert len(images) == 2 and not uses_nc(images[1])
    assert images[1] == coherent_ptx(images[0])
    launched = [c for c in fake.calls if c[0] == "cuLaunchKernel"]
    assert launched[0][1][0] != launched[1][1][0]       # two different functions
    scale[1, 16](y, y, 3.0, 16)                         # the coherent module is cached
    assert len(_loaded_images(fake)) == 2


def test_gpu_device_arrays_aliased_use_the_coherent_module(fake, monkeypatch):
    """The launcher's fast path (DeviceArray addresses, nothing staged) checks aliasing too."""
    ck = hand_compiled("scale", SCALE, body=NC_BODY)
    monkeypatch.setattr(pyptx_compiler, "compile_kernel", FakeCompiler(lambda k, c, t: ck))
    fake.bodies["scale"] = _body
    x = np.random.default_rng(7).standard_normal(16).astype(np.float32)
    d, other = pyptx.to_device(x), pyptx.to_device(np.full(16, np.nan, np.float32))
    scale[1, 16](other, d, 2.0, 16)                     # distinct arrays: the .nc module
    assert len(_loaded_images(fake)) == 1
    scale[1, 16](d, d, 3.0, 16)                         # in place: the coherent module
    images = _loaded_images(fake)
    assert len(images) == 2 and images[1] == coherent_ptx(images[0])
    np.testing.assert_array_equal(d.copy_to_host(), x * np.float32(3.0))
    np.testing.assert_array_equal(other.copy_to_host(), x * np.float32(2.0))

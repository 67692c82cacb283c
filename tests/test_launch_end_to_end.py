"""The launch API with the real compiler: on the CPU executor (results against numpy) and on the
fake GPU driver (the packed parameters follow the compiled kernel's own `.param` list).

Skipped until the frontend and the CPU executor are in the tree."""
import gc

import numpy as np
import pytest

import pyptx
from pyptx import f32, i32
from pyptx.runtime import driver

from fake_driver import FakeDriver



rng = np.random.default_rng(7)


@pyptx.kernel
def axpy(out: f32[:], x: f32[:], y: f32[:], a: f32, n: i32):
    i = pyptx.block_idx.x * pyptx.block_dim.x + pyptx.thread_idx.x
    if i < n:
        out[i] = a * x[i] + y[i]


@pyptx.kernel(fma=False)
def scale_untyped(out, x, a, n):
    i = pyptx.block_idx.x * pyptx.block_dim.x + pyptx.thread_idx.x
    if i < n:
        out[i] = x[i] * a


@pyptx.kernel
def fill_blocks(out: i32[:], BLOCK: pyptx.constexpr):
    i = pyptx.block_idx.x * BLOCK + pyptx.thread_idx.x
    out[i] = BLOCK


def test_axpy_on_cpu(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    n = 1000
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out = np.zeros_like(x)
    a = np.float32(rng.standard_normal())
    axpy[(n + 255) // 256, 256](out, x, y, a, n)
    np.testing.assert_allclose(out, a * x + y, rtol=1e-6, atol=1e-6)


def test_inferred_types_and_constexpr_on_cpu(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    x = rng.standard_normal(100).astype(np.float32)
    out = np.zeros_like(x)
    scale_untyped[1, 128](out, x, 3.0, 100)
    np.testing.assert_array_equal(out, x * np.float32(3.0))
    o = np.zeros(64, np.int32)
    fill_blocks[2, 32](o, 32)
    assert np.all(o == 32)
    d = pyptx.to_device(np.zeros(64, np.int32))
    fill_blocks.specialize(BLOCK=16)[4, 16](d)
    assert np.all(d.copy_to_host() == 16)


def test_real_compiled_params_packed_for_the_fake_gpu(monkeypatch):
    fd = FakeDriver()
    monkeypatch.setenv("PYPTX_DEVICE", "gpu")
    prev = driver.set_driver(fd)
    try:
        def body(fake, launch):
            p = launch.params
            n = p["n"]
            x = fake.view(p["x"], np.float32, p["x_shape0"])
            y = fake.view(p["y"], np.float32, p["y_shape0"])
            fake.view(p["out"], np.float32, p["out_shape0"])[:n] = np.float32(p["a"]) * x + y
        fd.bodies["axpy"] = body
        n = 300
        x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        out = np.zeros_like(x)
        axpy[2, 256](out, x, y, 0.5, n)
        np.testing.assert_array_equal(out, np.float32(0.5) * x + y)
        ck = pyptx.compile(axpy, arch="sm_80")
        launched = fd.launches[0].params
        assert list(launched) == [p.name for p in ck.params]
        assert launched["n"] == n and launched["x_shape0"] == n
    finally:
        gc.collect()
        driver.set_driver(prev)

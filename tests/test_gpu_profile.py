"""Device choice (PYPTX_DEVICE), GPU profiles and `describe()`, with the fake driver; plus the
real-driver checks that run only where a GPU is present (`@pytest.mark.gpu`)."""
import gc
import subprocess
import sys

import numpy as np
import pytest

import pyptx
from pyptx.errors import DeviceError
from pyptx.runtime import driver, profile
from pyptx.runtime import launch as L

from fake_driver import FakeDriver


@pytest.fixture
def install(monkeypatch):
    installed = []

    def put(fd, mode):
        monkeypatch.setenv("PYPTX_DEVICE", mode)
        installed.append(driver.set_driver(fd))
        return fd
    yield put
    gc.collect()
    if installed:
        driver.set_driver(installed[0])


def test_auto_without_a_driver_library_is_cpu(install):
    fd = install(FakeDriver(library=False), "auto")
    assert pyptx.device() == "cpu"
    assert "no CUDA driver" in L.device_reason()
    assert profile.current_arch() is None and profile.max_ptx_version() is None
    assert profile.describe().startswith("no GPU: CPU executor (reason: no CUDA driver")
    n = len(fd.calls)
    assert pyptx.device() == "cpu" and len(fd.calls) == n      # decided once


def test_gpu_without_a_driver_is_a_device_error_saying_why(install):
    install(FakeDriver(library=False), "gpu")
    with pytest.raises(DeviceError, match="PYPTX_DEVICE=gpu but no usable GPU: no CUDA driver"):
        pyptx.device()


@pytest.mark.parametrize("kw, fail, reason, name", [
    (dict(devices=0), None, "no CUDA device", "CUDA_ERROR_NO_DEVICE"),
    ({}, ("cuInit", "CUDA_ERROR_NO_DEVICE"), "no CUDA device", "CUDA_ERROR_NO_DEVICE"),
    ({}, ("cuInit", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"), "driver failed",
     "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
    ({}, ("cuDevicePrimaryCtxRetain", "CUDA_ERROR_OUT_OF_MEMORY"), "cuDevicePrimaryCtxRetain",
     "CUDA_ERROR_OUT_OF_MEMORY"),
    (dict(cc=(7, 0)), None, "too old", "GPU_TOO_OLD"),
])
def test_unusable_gpu_reasons(install, kw, fail, reason, name):
    fd = FakeDriver(**kw)
    if fail:
        fd.fail[fail[0]] = getattr(fd.CUresult, fail[1])
    install(fd, "gpu")
    with pytest.raises(DeviceError, match=reason) as ei:
        pyptx.device()
    assert ei.value.error_name == name
    install(fd, "auto")
    assert pyptx.device() == "cpu" and reason in L.device_reason()


def test_cpu_forced_never_touches_the_driver(install):
    fd = install(FakeDriver(), "cpu")
    assert pyptx.device() == "cpu"
    assert fd.calls == [] and L.device_reason() == "PYPTX_DEVICE=cpu"


def test_env_change_is_re_read(install, monkeypatch):
    install(FakeDriver(), "auto")
    assert pyptx.device() == "gpu"
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    assert pyptx.device() == "cpu"
    monkeypatch.setenv("PYPTX_DEVICE", "gpu")
    assert pyptx.device() == "gpu"


@pytest.mark.parametrize("cc, arch", [
    ((7, 5), "sm_75"), ((8, 0), "sm_80"), ((8, 6), "sm_86"), ((8, 7), "sm_87"),
    ((8, 9), "sm_89"), ((9, 0), "sm_90"), ((10, 0), "sm_100"), ((10, 3), "sm_103"),
    ((12, 0), "sm_120"), ((12, 1), "sm_121"), ((8, 8), "sm_87"), ((12, 9), "sm_121"),
])
def test_arch_for_compute_capability(install, cc, arch):
    assert profile.arch_for_cc(*cc) == arch
    install(FakeDriver(cc=cc, name=f"Fake {cc}"), "auto")
    p = profile.gpu_profile()
    assert p.arch == arch and p.cc == cc and profile.current_arch() == arch
    assert not p.arch.endswith("a")                       # sm_90a is never auto-chosen
    text = profile.describe()
    assert f"GPU: Fake {cc}" in text and f"compute capability: {cc[0]}.{cc[1]}" in text
    assert f"arch: {arch}" in text and "device used by launches: gpu" in text


def test_too_old_gpu():
    with pytest.raises(ValueError, match="7.5"):
        profile.arch_for_cc(7, 0)


@pytest.mark.parametrize("version, ptx", [
    (11080, "7.8"), (12000, "8.0"), (12010, "8.1"), (12040, "8.4"), (12050, "8.5"),
    (12060, "8.5"), (12080, "8.7"), (12090, "8.8"), (13000, "9.0"), (13010, "9.1"),
    (13020, "9.2"), (11000, "7.0"),
])
def test_ptx_isa_ceiling_from_driver_version(install, version, ptx):
    assert profile.ptx_version_for_driver(version) == ptx
    install(FakeDriver(version=version), "auto")
    assert profile.max_ptx_version() == ptx
    assert profile.gpu_profile().max_ptx_version == ptx


def test_profile_limits_come_from_the_driver(install):
    install(FakeDriver(cc=(9, 0)), "auto")
    p = profile.gpu_profile()
    assert (p.sm_count, p.warp_size, p.max_shared_per_block) == (108, 32, 49152)
    assert p.max_shared_per_block_optin == 232448 and p.driver_version == 12080


def test_importing_pyptx_never_touches_the_driver():
    code = ("import sys, pyptx, pyptx.runtime.launch, pyptx.runtime.gpu, pyptx.runtime.profile;"
            "assert 'cuda.bindings.driver' not in sys.modules, 'driver imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def _real_gpu_present() -> bool:
    prev = driver.set_driver(None)
    try:
        return driver.probe() is None
    finally:
        driver.set_driver(prev)


def test_real_driver_fallback_when_absent(install):
    """The real cuda.bindings path on a machine without a GPU: auto falls back with a reason."""
    if _real_gpu_present():
        pytest.skip("a GPU is present")
    install(None, "auto")
    assert pyptx.device() == "cpu" and L.device_reason()
    assert profile.current_arch() is None


#: a hand-written kernel for the real-driver launch test (independent of the compiler)
ADD1_PTX = """.version 7.0
.target sm_75
.address_size 64
.visible .entry add1(.param .u64 out, .param .s32 out_shape0, .param .u64 x,
                     .param .s32 x_shape0, .param .f32 a)
{
    .reg .pred %p; .reg .b32 %r<5>; .reg .b64 %rd<6>; .reg .f32 %f<3>;
    ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [x]; ld.param.s32 %r1, [x_shape0];
    ld.param.f32 %f1, [a];
    mov.u32 %r2, %tid.x; mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x;
    mad.lo.s32 %r2, %r3, %r4, %r2;
    setp.ge.s32 %p, %r2, %r1; @%p bra DONE;
    mul.wide.s32 %rd3, %r2, 4; add.s64 %rd4, %rd2, %rd3; add.s64 %rd5, %rd1, %rd3;
    ld.global.f32 %f2, [%rd4]; add.rn.f32 %f2, %f2, %f1; st.global.f32 [%rd5], %f2;
DONE:
    ret;
}
"""


def test_handwritten_ptx_is_valid():
    """The PTX the real-GPU test loads must itself be valid (ptxas checks what the JIT would)."""
    from pyptx.toolchain import assemble, find_ptxas
    if find_ptxas() is None:
        pytest.skip("no ptxas")
    assemble(ADD1_PTX, "sm_75")


gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif("not _real_gpu_present()", reason="no CUDA GPU")


@gpu
@needs_gpu
def test_real_gpu_profile_and_device_array(install):
    install(None, "gpu")
    p = profile.gpu_profile()
    assert p.arch.startswith("sm_") and p.warp_size == 32
    host = np.random.default_rng(5).standard_normal(1000).astype(np.float32)
    d = pyptx.to_device(host)
    np.testing.assert_array_equal(d.copy_to_host(), host)


@gpu
@needs_gpu
def test_real_gpu_handwritten_ptx_launch(install):
    """Real driver: load PTX, pack params, launch, copy back (independent of the compiler)."""
    install(None, "gpu")
    from pyptx.compiler import ArgSpec, CompiledKernel, KernelParam
    from pyptx.runtime import gpu as G
    ck = CompiledKernel(ptx=ADD1_PTX, name="add1", arch="sm_75",
                        params=[KernelParam("out", "u64"), KernelParam("out_shape0", "s32"),
                                KernelParam("x", "u64"), KernelParam("x_shape0", "s32"),
                                KernelParam("a", "f32")],
                        signature=[ArgSpec("out", "array", pyptx.f32, 1, True),
                                   ArgSpec("x", "array", pyptx.f32, 1, False),
                                   ArgSpec("a", "scalar", pyptx.f32)])
    x = np.random.default_rng(6).standard_normal(1000).astype(np.float32)
    out = np.zeros_like(x)
    G.launch(ck, (4, 1, 1), (256, 1, 1),
             [G.ArrayArg(out, True), 1000, G.ArrayArg(x, False), 1000, np.float32(1.5)], 0, None)
    np.testing.assert_array_equal(out, x + np.float32(1.5))


@gpu
@needs_gpu
def test_real_gpu_jit_failure_has_a_log(install):
    install(None, "gpu")
    ctx = driver.context()
    bad = ".version 7.0\n.target sm_75\n.address_size 64\n.visible .entry k()\n{\n bogus.op;\n}\n"
    with pytest.raises(DeviceError) as ei:
        ctx.function(bad, "k")
    assert ei.value.error_name and ei.value.jit_log

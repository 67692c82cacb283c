"""`PYPTX_DEVICE=auto` is honest about falling back to the CPU executor: a `DeviceWarning` once
per process naming the reason and the fix when an NVIDIA driver library is present but unusable,
nothing on a machine without one; `python -m pyptx info` prints the same reason.

Driven two ways: the test-suite's fake driver (tests/fake_driver.py), and the real
`cuda.bindings.driver` module with its calls monkeypatched (a CUDA 12.4 driver under the
installed cuda-bindings 13, cuInit errors) — the way a user's machine would answer."""
import gc
import subprocess
import sys
import warnings

import pytest

import pyptx
from pyptx.runtime import driver, profile
from pyptx.runtime import launch as L

from fake_driver import FakeDriver


@pytest.fixture
def install(monkeypatch):
    prev = []

    def put(fd, mode="auto"):
        monkeypatch.setenv("PYPTX_DEVICE", mode)
        prev.append(driver.set_driver(fd))
        return fd
    yield put
    gc.collect()
    if prev:
        driver.set_driver(prev[0])


def _device_with_warnings():
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        dev = pyptx.device()
    return dev, [w for w in got if issubclass(w.category, pyptx.DeviceWarning)]


def test_device_warning_is_a_runtime_warning_and_a_pyptx_error():
    assert issubclass(pyptx.DeviceWarning, RuntimeWarning)
    assert issubclass(pyptx.DeviceWarning, pyptx.PyptxError)


def test_no_driver_library_means_no_warning(install):
    install(FakeDriver(library=False))
    dev, got = _device_with_warnings()
    assert dev == "cpu" and got == []


@pytest.mark.parametrize("make, reason, fix", [
    (lambda: FakeDriver(version=12040, bindings_version="13.0.1"),
     "cuda-python 13.0.1 needs a CUDA 13.x driver, but the installed driver is CUDA 12.4",
     "pip install 'cuda-python<13'"),
    (lambda: FakeDriver(devices=0), "the driver reports 0 devices", "CUDA_VISIBLE_DEVICES"),
    (lambda: _failing("cuInit", "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER"),
     "cuInit returned CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER",
     "'cuda-python<13' for a CUDA 12 driver"),
    (lambda: _failing("cuInit", "CUDA_ERROR_NO_DEVICE"), "cuInit returned CUDA_ERROR_NO_DEVICE",
     "--gpus all"),
    (lambda: _failing("cuInit", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
     "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "reinstall the NVIDIA driver"),
    (lambda: _failing("cuDriverGetVersion", "CUDA_ERROR_UNKNOWN"), "CUDA_ERROR_UNKNOWN",
     "nvidia-smi"),
    (lambda: FakeDriver(cc=(7, 0)), "sm_75", "compute capability 7.5"),
])
def test_fallback_warns_once_with_reason_and_fix(install, make, reason, fix):
    install(make())
    dev, got = _device_with_warnings()
    assert dev == "cpu"
    assert len(got) == 1
    text = str(got[0].message)
    assert reason in text and fix in text and "PYPTX_DEVICE=cpu" in text
    # once per process: a second decision (another PYPTX_DEVICE value) does not warn again
    L.invalidate_plans()
    assert _device_with_warnings() == ("cpu", [])
    # `python -m pyptx info` (describe) prints the same reason and fix
    info = profile.describe()
    assert info.startswith("no GPU: CPU executor (reason: ")
    assert reason in info and fix in info


def _failing(call, name):
    fd = FakeDriver()
    if not hasattr(fd.CUresult, name):
        pytest.skip(f"{name} is not in this cuda-bindings release")
    fd.fail[call] = getattr(fd.CUresult, name)
    return fd


def test_forced_modes_never_warn(install):
    install(FakeDriver(devices=0), "cpu")
    assert _device_with_warnings() == ("cpu", [])
    install(FakeDriver(devices=0), "gpu")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with pytest.raises(pyptx.DeviceError, match="0 devices"):
            pyptx.device()
    assert not [w for w in got if issubclass(w.category, pyptx.DeviceWarning)]


def test_a_working_gpu_never_warns(install):
    install(FakeDriver())
    assert _device_with_warnings() == ("gpu", [])


# ---- the real cuda.bindings.driver, monkeypatched ------------------------------------------------

@pytest.fixture
def real(monkeypatch):
    """The real bindings module in use (no fake), its device decision forgotten before and
    after."""
    import cuda.bindings.driver as cbd
    prev = driver.set_driver(None)
    monkeypatch.setenv("PYPTX_DEVICE", "auto")
    yield cbd
    driver.set_driver(prev)


def test_real_bindings_with_an_older_driver_warn(real, monkeypatch):
    """cuda-bindings 13 with a CUDA 12.4 driver (and, in the CUDA 12 venv CI also runs,
    cuda-bindings 12 with a CUDA 11.4 driver)."""
    import cuda.bindings
    major = int(cuda.bindings.__version__.split(".")[0])
    monkeypatch.setattr(real, "cuDriverGetVersion",
                        lambda: (real.CUresult.CUDA_SUCCESS, (major - 1) * 1000 + 40))
    dev, got = _device_with_warnings()
    assert dev == "cpu" and len(got) == 1
    text = str(got[0].message)
    assert f"CUDA {major - 1}.4" in text and f"cuda-python<{major}" in text
    assert f"cuda-python<{major}" in L.device_reason()


def test_real_bindings_cuinit_error_warns(real, monkeypatch):
    import cuda.bindings
    major = int(cuda.bindings.__version__.split(".")[0])
    monkeypatch.setattr(real, "cuDriverGetVersion",
                        lambda: (real.CUresult.CUDA_SUCCESS, major * 1000 + 80))
    monkeypatch.setattr(real, "cuInit", lambda flags: (real.CUresult.CUDA_ERROR_NO_DEVICE,))
    dev, got = _device_with_warnings()
    assert dev == "cpu" and len(got) == 1
    assert "CUDA_ERROR_NO_DEVICE" in str(got[0].message)


def test_real_bindings_whose_entry_point_is_missing_warn(real, monkeypatch):
    """An old libcuda without an entry point the bindings want: the bindings raise (no
    CUresult); with a driver library present that is a warning, not 'no driver'."""
    def missing():
        raise RuntimeError('Function "cuDriverGetVersion" not found')
    monkeypatch.setattr(real, "cuDriverGetVersion", missing)
    monkeypatch.setattr(driver, "driver_library_present", lambda: True)
    dev, got = _device_with_warnings()
    assert dev == "cpu" and len(got) == 1
    assert "could not be used" in str(got[0].message)
    assert "cuda-python<13" in str(got[0].message)


def test_real_bindings_without_libcuda_do_not_warn(real, monkeypatch):
    if driver.driver_library_present():
        pytest.skip("this machine has an NVIDIA driver library")
    dev, got = _device_with_warnings()
    assert dev == "cpu" and got == []
    assert "no CUDA driver" in L.device_reason()


def test_info_command_prints_the_reason_in_a_fresh_process():
    """No driver library here: `python -m pyptx info` says why and exits 0, with no warning."""
    if driver.driver_library_present():
        pytest.skip("this machine has an NVIDIA driver library")
    r = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "pyptx", "info"],
                       capture_output=True, text=True, env={**__import__("os").environ,
                                                            "PYPTX_DEVICE": "auto"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("no GPU: CPU executor (reason: no CUDA driver")
    assert "install the NVIDIA driver" in r.stdout

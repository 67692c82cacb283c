"""Test-suite wiring: every PTX the compiler emits during a test is assembled with ptxas.

An autouse fixture collects each freshly emitted `CompiledKernel` (through the compiler's emit
hook) and, when the test ends, assembles its PTX for sm_80 and sm_90 (each arch at or above the
PTX's `.target`).  A ptxas rejection fails that test.  ptxas comes from the CUDA toolkit or the
`nvidia-cuda-nvcc` wheel (the `test` extra); without one, `test_ptxas_is_available` fails instead of
everything silently skipping (set PYPTX_ALLOW_NO_PTXAS=1 to accept that knowingly).
"""
from __future__ import annotations

import hashlib
import os
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, settings

# CI is derandomized (the same examples every run: a red CI is a real regression, never a newly
# drawn input); the nightly profile explores with random seeds and many more examples.
settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("nightly", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("PYPTX_HYPOTHESIS_PROFILE", "ci"))

os.environ.setdefault("PYPTX_NO_CACHE", "1")        # tests compile for real, not from ~/.cache

ASSEMBLE_ARCHS = ("sm_80", "sm_90")
_assembled: dict[str, str | None] = {}               # hash(ptx, arch) -> error text or None
_pool = ThreadPoolExecutor(max_workers=2)


def _arch_num(arch: str) -> int:
    return int(re.match(r"sm_(\d+)", arch).group(1))


def _archs_for(ptx: str) -> list[str]:
    m = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M)
    target = m.group(1) if m else "sm_80"
    if not target[-1].isdigit():             # sm_90a: arch-specific, assemble for itself
        return [target]
    archs = [a for a in ASSEMBLE_ARCHS if _arch_num(a) >= _arch_num(target)]
    return archs or [target]


def _assemble_one(ptx: str, arch: str) -> str | None:
    from pyptx.errors import ToolchainError
    from pyptx.toolchain import assemble
    try:
        assemble(ptx, arch)
        return None
    except ToolchainError as e:
        return str(e)


def assemble_all(ptxs) -> list[str]:
    """Assemble each PTX for its archs (cached across the session); return error messages."""
    jobs = []
    for ptx in ptxs:
        for arch in _archs_for(ptx):
            key = hashlib.sha256((arch + "\0" + ptx).encode()).hexdigest()
            if key not in _assembled:
                jobs.append((key, arch, ptx, _pool.submit(_assemble_one, ptx, arch)))
    for key, arch, ptx, fut in jobs:
        _assembled[key] = fut.result()
    errors = []
    for ptx in ptxs:
        if not ptx.isascii():        # ptxas 13.5 lets it pass, 13.0 and the 580 driver's JIT don't
            bad = next(n for n, line in enumerate(ptx.splitlines(), 1) if not line.isascii())
            errors.append(f"PTX is not ASCII (line {bad}): {ptx.splitlines()[bad - 1]!r}")
        for arch in _archs_for(ptx):
            err = _assembled[hashlib.sha256((arch + "\0" + ptx).encode()).hexdigest()]
            if err:
                name = re.search(r"\.entry\s+(\w+)", ptx)
                errors.append(f"ptxas -arch={arch} rejected {name.group(1) if name else '?'}:"
                              f"\n{err}")
    return errors


def ptxas_available() -> bool:
    try:
        from pyptx.toolchain import find_ptxas
    except ImportError:
        return False
    return find_ptxas() is not None


@pytest.fixture(autouse=True)
def _assemble_emitted_ptx():
    """Collect the PTX compiled during the test; assemble it with ptxas when the test ends."""
    try:
        from pyptx import compiler
    except ImportError:
        yield
        return
    emitted: list[str] = []
    hook = lambda ck: emitted.append(ck.ptx)   # noqa: E731
    compiler._emit_hooks.append(hook)
    try:
        yield emitted
    finally:
        compiler._emit_hooks.remove(hook)
    if emitted and ptxas_available():
        errors = assemble_all(dict.fromkeys(emitted))
        if errors:
            pytest.fail("\n\n".join(errors), pytrace=False)


def gpu_present() -> bool:
    """A usable CUDA GPU?  Cheap and silent on machines without a driver."""
    import sys
    if sys.platform.startswith("linux") and not (os.path.exists("/dev/nvidiactl")
                                                 or os.path.exists("/dev/dxg")):
        return False
    try:
        from pyptx.runtime.profile import current_arch
        return current_arch() is not None
    except Exception:  # noqa: BLE001
        return False


def default_arch() -> str:
    """What `arch=None` means: the current GPU's arch, else sm_80 (checked where the default
    matters; on a GPU machine it is not sm_80)."""
    from pyptx.runtime.profile import current_arch
    return (current_arch() if gpu_present() else None) or "sm_80"


#: the devices semantic tests run on: the CPU executor always, the GPU where there is one
DEVICES = ["cpu"] + (["gpu"] if gpu_present() else [])


@pytest.fixture(params=[pytest.param(d, marks=[pytest.mark.gpu] if d == "gpu" else [])
                        for d in DEVICES])
def device(request, monkeypatch):
    """Parametrises a test over every available device (PYPTX_DEVICE set accordingly)."""
    monkeypatch.setenv("PYPTX_DEVICE", request.param)
    yield request.param


@pytest.fixture
def cpu_device(monkeypatch):
    """Run launches on the CPU executor."""
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    yield "cpu"


def pytest_collection_finish(session):
    """Every test module (torch, transformers, hypothesis with them) is imported now: freeze
    that heap, so the suite's many `gc.collect()` calls (DeviceArray finalizers in the fake-GPU
    tests) scan only what the tests create, not the millions of objects of the imports."""
    import gc
    gc.collect()
    gc.freeze()


# ---- where a launch runs (fixtures shared by the test modules) ------------------------------------

@pytest.fixture
def cpu(monkeypatch):
    """Launches run on the CPU executor."""
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")


@pytest.fixture
def hopper(monkeypatch):
    """The GPU path on a fake compute capability 9.0 driver (kernels run on the executor behind
    it, with an H100's limits): the automatic choice of the Hopper (wgmma) kernels."""
    from fake_driver import FakeDriver, on_fake_gpu
    yield from on_fake_gpu(monkeypatch, FakeDriver(cc=(9, 0)))


@pytest.fixture
def ampere(monkeypatch):
    """As `hopper`, compute capability 8.0 (the mma.sync kernels)."""
    from fake_driver import FakeDriver, on_fake_gpu
    yield from on_fake_gpu(monkeypatch, FakeDriver(cc=(8, 0)))


def hopper_sass(ptx: str):
    """The SASS instructions of a one-entry sm_90a module (benchmarks.sass_count.Sass records);
    skips the test where cuobjdump is missing.  Used by the Hopper kernels' static checks."""
    from benchmarks.sass_count import parse_sass
    from benchmarks.sass_report import disassemble, find_cuobjdump
    if find_cuobjdump() is None:
        pytest.skip("no cuobjdump")
    _, text = disassemble(ptx, "sm_90a")
    return next(iter(parse_sass(text).values()))

"""The PTX ISA ceiling per CUDA driver version, checked three ways: the fake driver's JIT (its own
copy of NVIDIA's PTX release history, tests/fake_driver.PTX_ISA_RELEASES) accepts exactly the
`.version`s up to the ceiling, pyptx's `check_ptx_version` (runtime/profile.py's table) draws the
line in the same place, and both agree with cuda.bindings' copy of NVIDIA's table."""
from __future__ import annotations

import gc

import pytest

from pyptx.errors import DeviceError
from pyptx.runtime import driver, gpu, profile

from fake_driver import PTX_ISA_RELEASES, FakeDriver, max_ptx_isa

#: what the review found and NVIDIA's table says (12.6 introduced no ISA; 8.6 is CUDA 12.7)
KNOWN = {12050: (8, 5), 12060: (8, 5), 12070: (8, 6), 12080: (8, 7), 12090: (8, 8),
         13000: (9, 0), 13010: (9, 1), 11080: (7, 8), 12000: (8, 0), 12040: (8, 4)}

ISAS = [isa for isa, _cuda in PTX_ISA_RELEASES]
DRIVERS = sorted({cuda for _isa, cuda in PTX_ISA_RELEASES if cuda >= 11000} | set(KNOWN))


def ptx_of(isa) -> str:
    return (f".version {isa[0]}.{isa[1]}\n.target sm_75\n.address_size 64\n\n"
            f".visible .entry k()\n{{\n    ret;\n}}\n")


def test_the_table_is_nvidias():
    for version, isa in KNOWN.items():
        assert max_ptx_isa(version) == isa, version
    utils = pytest.importorskip("cuda.bindings.utils")
    minimal = getattr(utils, "get_minimal_required_cuda_ver_from_ptx_ver", None)
    if minimal is None:
        pytest.skip("cuda.bindings has no get_minimal_required_cuda_ver_from_ptx_ver")
    known = 0
    for (major, minor), first in PTX_ISA_RELEASES:
        try:
            want = minimal(f"{major}.{minor}")
        except ValueError:          # an older cuda-bindings (12.x) predates this ISA
            continue
        known += 1
        assert want == first, (major, minor)
    assert known >= 10


@pytest.mark.parametrize("version", DRIVERS)
def test_fake_jit_and_pyptx_agree_on_the_ceiling(monkeypatch, version):
    cap = max_ptx_isa(version)
    assert profile.ptx_version_for_driver(version) == f"{cap[0]}.{cap[1]}"
    fd = FakeDriver(version=version, run_ptxas=False)
    monkeypatch.setenv("PYPTX_DEVICE", "gpu")
    prev = driver.set_driver(fd)
    try:
        ctx = driver.context()
        for isa in ISAS:
            ptx = ptx_of(isa)
            try:
                ctx.function(ptx, "k")
                jit_ok = True
            except DeviceError as e:
                assert e.error_name == "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", e
                jit_ok = False
            try:
                gpu.check_ptx_version(ptx)
                pyptx_ok = True
            except DeviceError as e:
                assert e.error_name == "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", e
                pyptx_ok = False
            assert jit_ok == (isa <= cap), (version, isa)
            assert pyptx_ok == jit_ok, (version, isa)
    finally:
        gc.collect()
        driver.set_driver(prev)

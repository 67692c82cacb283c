"""Every stdlib kernel specialisation compiles, and ptxas accepts it for sm_80 and sm_90 with no
register spills (the resource report the benchmark prints without a GPU)."""
from __future__ import annotations

import pytest

import pyptx
from stdlib_kernels.catalog import ARCH_SPECIFIC, SPECIALISATIONS


def _ptxas_or_skip():
    """Only where ptxas is truly absent (then test_ptxas_is_available fails instead)."""
    from pyptx.toolchain import find_ptxas
    if find_ptxas() is None:
        pytest.skip("no ptxas")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("spec", SPECIALISATIONS, ids=[s.label for s in SPECIALISATIONS])
def test_kernel_assembles_without_spills(spec, arch):
    _assembles_without_spills(spec, arch)


@pytest.mark.parametrize("spec", ARCH_SPECIFIC, ids=[s.label for s in ARCH_SPECIFIC])
def test_arch_specific_kernel_assembles_for_its_arch_without_spills(spec):
    _assembles_without_spills(spec, spec.kernel.arch)


def _assembles_without_spills(spec, arch):
    ck = pyptx.compile(spec.kernel, arch=arch, constexprs=spec.constexprs)
    assert f".visible .entry {spec.kernel.name}" in ck.ptx
    _ptxas_or_skip()
    res = ck.resources()
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res
    assert res["registers"] <= 255
    if spec.threads:          # the block the wrapper launches must fit the 64K register file
        assert res["registers"] * spec.threads <= 65536, (res, spec.threads)

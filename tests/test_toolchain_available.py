"""ptxas must be present wherever the test extra is installed: no silent skipping."""
import os

import pytest

from conftest import ptxas_available


def test_ptxas_is_available():
    if os.environ.get("PYPTX_ALLOW_NO_PTXAS") == "1":
        pytest.skip("PYPTX_ALLOW_NO_PTXAS=1: running without ptxas on purpose")
    assert ptxas_available(), (
        "no ptxas found: install the test extra (pip install -e '.[test]' brings the "
        "nvidia-cuda-nvcc wheel) or a CUDA toolkit; every emitted PTX must be assembled")


def test_the_suite_assembles_what_it_emits():
    """The conftest hook really runs ptxas: a broken PTX is reported, a good one is not."""
    import pyptx
    from conftest import assemble_all, ptxas_available
    if not ptxas_available():
        pytest.skip("no ptxas (test_ptxas_is_available fails for this)")
    from kernel_factory import make_kernel
    k = make_kernel("import pyptx\nfrom pyptx import f32\ndef k(o: f32[:]):\n    o[0] = 1.0\n")
    good = pyptx.compile(k, arch="sm_80").ptx
    assert assemble_all([good]) == []
    errors = assemble_all([good.replace("ret;", "not_an_instruction;")])
    assert len(errors) == 2 and "sm_80" in errors[0] and "sm_90" in errors[1]

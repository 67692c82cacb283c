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

"""Run the feature kernels of tests/kernels_semantic.py end to end (CPU executor) against numpy."""
from __future__ import annotations

import os
import zlib

import numpy as np
import pytest

import sys
sys.path.insert(0, os.path.dirname(__file__))
import kernels_semantic as ks  # noqa: E402

CASES = ks.cases()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_kernel_matches_numpy(case, device):
    name, kernel, args_fn, ref, tol = case
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    grid, block, args, smem = args_fn(rng)
    expected = ref([a.copy() if isinstance(a, np.ndarray) else a for a in args])
    kernel[grid, block](*args, shared_mem=smem)
    for idx, want in expected.items():
        if tol:
            np.testing.assert_allclose(args[idx], want, **tol)
        else:
            np.testing.assert_array_equal(args[idx], want)


def test_print_lines(capfd, cpu_device):
    x = np.array([7, -3], np.int32)
    ks.printer[1, 4](x)
    out = capfd.readouterr().out.splitlines()
    assert sorted(out) == ["t 0 x 7 0.000000", "t 1 x -3 1.500000"]

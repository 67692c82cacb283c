"""Bugs planted one at a time in a temporary copy (tests/mutant_harness.py): each must make the
named tests fail.  Keeps the coverage that found or would find them from being lost quietly."""
from __future__ import annotations

import pytest

from mutant_harness import Mutant, assert_caught

MUTANTS = [
    Mutant("paged attention page row wraps in 32 bits (issue 21 #4)",
           "stdlib_kernels/paged.py",
           "return page * n_kv + head if u32(page) < u32(n_pages) else -(1 << 30)",
           "return page * n_kv + head",
           ("tests/test_stdlib_paged.py::test_a_bad_page_id_in_a_device_block_table_faults",)),
    Mutant("GGUF GEMV Q4_K coefficients d*sc and dmin*m rounded through f16 (blanket 2e-3 let it "
           "pass)",
           "stdlib_kernels/qgemv.py",
           "    return d * sc0, d * sc1, dm * m0, dm * m1",
           "    return f32(f16(d * sc0)), f32(f16(d * sc1)), f32(f16(dm * m0)), f32(f16(dm * m1))",
           ("tests/test_stdlib_qmatmul.py::test_paths_match_float64[1-f32-q4_k]",
            "tests/test_stdlib_qmatmul.py::test_paths_match_float64[1-dp4a-q4_k]")),
    Mutant("GGUF tiled Q4_K coefficients d*sc and dmin*m rounded through f16",
           "stdlib_kernels/qtiled.py",
           "    a = half_lo(h) * (sc1 if hi == 1 else sc0)\n"
           "    o = half_hi(h) * (m1 if hi == 1 else m0)",
           "    a = f32(f16(half_lo(h) * (sc1 if hi == 1 else sc0)))\n"
           "    o = f32(f16(half_hi(h) * (m1 if hi == 1 else m0)))",
           ("tests/test_stdlib_qmatmul.py::test_paths_match_float64[1-tiled-q4_k]",)),
]


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_is_caught(mutant):
    assert_caught(mutant)

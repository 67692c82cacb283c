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
    Mutant("Q4_K scale search replaced by a plain min/max grid (hardening: golden ggml bytes)",
           "stdlib_kernels/quant.py",
           "    for step in range(nstep + 1):\n",
           "    for step in range(0):\n",
           ("tests/test_quant_golden.py::test_quantize_matches_ggml_reference_bytes[q4_k]",)),
    Mutant("Q6_K scale search replaced by a plain min/max grid (hardening: golden ggml bytes)",
           "stdlib_kernels/quant.py",
           '    with np.errstate(divide="ignore", invalid="ignore"):\n'
           "        scale = np.where(suml2 != 0, sumlx / suml2, _F32(0)).astype(_F32)\n"
           "    best = scale * sumlx\n"
           "    levels = lv\n"
           "    for step in (*range(-9, 0), *range(1, 10)):\n",
           "    scale = (big / _F32(-nmax)).astype(_F32)\n"
           "    best = scale * sumlx\n"
           "    levels = lv\n"
           "    for step in ():\n",
           ("tests/test_quant_golden.py::test_quantize_matches_ggml_reference_bytes[q6_k]",)),
    Mutant("gemm_tc: no barrier at the end of a K step (tile t + 2 overwrites a stage in use)",
           "stdlib_kernels/gemm_tc.py",
           "        pyptx.syncthreads()         # stage s is done: the next step copies tile t + 2 "
           "into it\n",
           "",
           ("tests/test_sanitize_stdlib.py::test_pipelined_kernels_run_clean_over_three_tiles"
            "[gemm_tc cp.async, K = 96]",)),
    Mutant("flash_attention_tc: no barrier at the end of a KV step (tile t + 2 overwrites a "
           "stage in use)",
           "stdlib_kernels/flash_attention.py",
           "    pyptx.syncthreads()                 # this stage is refilled two tiles later\n",
           "",
           ("tests/test_sanitize_stdlib.py::test_pipelined_kernels_run_clean_over_three_tiles"
            "[flash_attention_tc causal, 70 keys]",)),
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
    Mutant("qmma: no barrier at the end of a k tile (the next tile's loads overwrite shared "
           "rows other warps still read)",
           "stdlib_kernels/qmma.py",
           "            c13 = _tile(c13, fa1, bh, bl, 1, zero, w1, xv, 3, FMT)\n"
           "        pyptx.syncthreads()\n",
           "            c13 = _tile(c13, fa1, bh, bl, 1, zero, w1, xv, 3, FMT)\n",
           ("tests/test_sanitize_stdlib.py::test_pipelined_kernels_run_clean_over_three_tiles"
            "[q4k_matmul mma, K = 512]",)),
    Mutant("qmma Q4_K scale d*sc/254 rounded through f16",
           "stdlib_kernels/qmma.py",
           "    sa[2 * s, jr] = d * sc0 * (1.0 / RES)",
           "    sa[2 * s, jr] = f32(f16(d * sc0 * (1.0 / RES)))",
           ("tests/test_stdlib_qmatmul.py::test_paths_match_float64[17-mma-q4_k]",)),
]


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_is_caught(mutant):
    assert_caught(mutant)

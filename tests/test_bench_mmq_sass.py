"""benchmarks/bench_mmq_sass.py: the IMMA counting on a hand-made listing (always), and the static
bar on our kernels through ptxas + cuobjdump when those tools are installed: no spills, no local
memory, no f64, IMMA in the k loop, and at most 1.25x llama.cpp's instructions per IMMA in it.

The llama.cpp anchor is `mul_mat_q<GGML_TYPE_Q4_K, 128, false>` from ggml d99724f compiled for
sm_90 by nvcc 13 (the report prints it with --ggml): 255 registers, a k loop of 2998
instructions for 128 IMMA.16832, 23.4 per IMMA.  Compiling it needs a ggml checkout and a full
CUDA toolkit, so the number is a constant here; the report recomputes it."""
from __future__ import annotations

import pytest

from benchmarks import bench_mmq_sass as bms
from benchmarks.sass_count import parse_sass
from test_sass_report import _listing

#: llama.cpp mul_mat_q<Q4_K, 128> k loop on sm_90: instructions per IMMA (module docstring)
LLAMA_Q4K_PER_IMMA = 2998 / 128

LOOP = ["MOV R0, RZ",                                  # 0x00
        "IMMA.16832.S8.S8 R4, R8.ROW, R12.COL, R4",    # 0x10  header
        "IMMA.16816.S8.S8 R4, R8.ROW, R12.COL, R4",    # 0x20
        "I2F R5, R4",                                  # 0x30
        "@P1 BRA 0x10",                                # 0x40  back edge
        "EXIT"]                                        # 0x50


def test_imma_work_is_counted_by_shape():
    ins = parse_sass(_listing("k", LOOP))["k"]
    row = bms.count_function(bms.LoopCount("k", "q4_k", "llama.cpp"), ins)
    assert row.count["insns"] == 4 and row.count["IMMA"] == 2 and row.count["I2F"] == 1
    assert row.count["imma_macs"] == 16 * 8 * 32 + 16 * 8 * 16
    assert bms.per_imma(row) == pytest.approx(4 / 1.5)          # the .16816 counts half


def test_without_a_checkout_llama_cpp_is_skipped_with_a_reason(tmp_path):
    rows, why = bms.llama_rows("sm_90", None)
    assert rows == [] and "GGML_SRC" in why
    rows, why = bms.llama_rows("sm_90", str(tmp_path))
    assert rows == [] and "mmq.cuh" in why


def test_qmma_meets_the_static_bar():
    from benchmarks import ggml_build as gb
    from pyptx.toolchain import find_ptxas
    if gb.tool("cuobjdump") is None or find_ptxas() is None:
        pytest.skip("no cuobjdump / ptxas")
    rows = {r.label: r for r in bms.ours_rows("sm_90")}
    for fmt in ("q4_k", "q6_k", "q8_0"):
        r = rows[f"pyptx qmma[{fmt}]"]
        assert not r.error, r.error
        assert r.local == "spill 0 B, stack 0 B" and r.count["f64_kernel"] == 0
        assert not r.nested and r.count["IMMA"] >= 64
        assert r.count["local"] == 0
        assert bms.per_imma(r) <= 1.25 * LLAMA_Q4K_PER_IMMA, bms.per_imma(r)

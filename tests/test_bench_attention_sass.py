"""benchmarks/bench_attention_sass.py and sass_count.iterations: the per-iteration counting of a
KV main loop on hand-made SASS listings (always), and our kernels through ptxas + cuobjdump when
those tools are installed.  llama.cpp's side needs a ggml checkout and nvcc: without one the report
says why instead of failing."""
from __future__ import annotations

import pytest

from benchmarks import bench_attention_sass as bas
from benchmarks.sass_count import iteration_lengths, iterations, loops, parse_sass
from test_sass_report import _listing

# a loop 0x10..0x90 whose body is an if/else (a masked and an unmasked copy) joined at 0x80
LOOP = ["MOV R0, RZ",                                  # 0x00
        "ISETP.NE.AND P0, PT, R1, RZ, PT",             # 0x10  header
        "@P0 BRA 0x50",                                # 0x20
        "HMMA.16816.F32 R4, R8, R12, R4",              # 0x30  unmasked side (2 instructions)
        "BRA 0x80",                                    # 0x40
        "FMNMX R2, R2, R3, !PT",                       # 0x50  masked side (3 instructions)
        "FSEL R2, R2, -INF, P2",                       # 0x60
        "HMMA.16816.F32 R4, R8, R12, R4",              # 0x70
        "MUFU.EX2 R5, R5",                             # 0x80  join
        "@P1 BRA 0x10",                                # 0x90  back edge
        "EXIT"]                                        # 0xa0


def test_iterations_take_one_side_of_an_if_else():
    ins = parse_sass(_listing("k", LOOP))["k"]
    [lp] = loops(ins)
    assert len(lp) == 9                                 # the whole body: both sides
    short, long = iterations(ins, lp)
    assert [i.addr for i in short] == [0x10, 0x20, 0x30, 0x40, 0x80, 0x90]
    assert [i.addr for i in long] == [0x10, 0x20, 0x50, 0x60, 0x70, 0x80, 0x90]
    assert iteration_lengths(ins, lp) == [6, 7]


def test_main_loop_counts_one_iteration():
    ins = parse_sass(_listing("k", LOOP))["k"]
    row = bas.count_function("k", "fa", ins, 100, "")
    assert not row.nested and row.short["insns"] == 6 and row.long["insns"] == 7
    assert row.long["HMMA"] == 1 and row.long["EX2"] == 1
    assert bas.normalised(row) == 7.0                   # instructions per HMMA, longest way


def test_without_a_checkout_llama_cpp_is_skipped_with_a_reason(tmp_path):
    rows, why = bas.llama_rows("sm_90", None)
    assert rows == [] and "GGML_SRC" in why
    rows, why = bas.llama_rows("sm_90", str(tmp_path))
    assert rows == [] and "fattn-mma-f16.cuh" in why


def test_our_attention_kernels_are_counted():
    from benchmarks.sass_report import find_cuobjdump
    from pyptx import toolchain
    if find_cuobjdump() is None or toolchain.find_ptxas() is None:
        pytest.skip("SKIPPED LOUDLY: cuobjdump or ptxas is not installed (test extra)")
    rows = {r.label: r for r in bas.ours_rows("sm_90")}
    fa = rows["pyptx flash_attention_tc[D=128,causal=False,f16]"]
    assert not fa.error and fa.long["HMMA"] == 64 and fa.long["LDGSTS.128"] > 0
    assert bas.work(fa).startswith("512 key·rows")      # 32 keys x 16 query rows per warp
    dec = rows["pyptx decode_attention[DPL=4,SPLIT=True]"]
    assert not dec.error and dec.long["EX2"] >= 2 and dec.positions == 32


def test_the_hopper_kernel_is_counted_by_hmma_equivalents():
    """flash_attention_wgmma (sm_90a): its main loop is the HGMMA loop without the try-wait
    retries; D = 128 with 128-key tiles: S is 8 HGMMA.64x128x16 (16 HMMA-eq each), PV 8
    HGMMA.64x128x16 (16 each): 256 HMMA-eq = 128 keys x 16 rows per warp."""
    from benchmarks.sass_report import find_cuobjdump
    from pyptx import toolchain
    if find_cuobjdump() is None or toolchain.find_ptxas() is None:
        pytest.skip("SKIPPED LOUDLY: cuobjdump or ptxas is not installed (test extra)")
    rows = {r.label: r for r in bas.ours_rows("sm_90")}
    fa = rows["pyptx flash_attention_wgmma[d=128,f16,causal]"]
    assert not fa.error and fa.long["HGMMA"] == 16 and fa.long["HMMA_EQ"] == 256
    assert fa.long["EX2"] == 66 and fa.long["local"] == 0       # 64 probabilities + 2 factors
    assert bas.work(fa).startswith("2048 key·rows (= 128 keys x 16 rows)")
    assert "flash_attention_wgmma" not in " ".join(r.label for r in bas.ours_rows("sm_80"))

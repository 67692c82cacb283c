"""benchmarks/sass_count.py and sass_report.py: the SASS text counting (always), and the whole
ptxas + cuobjdump path on a small generated kernel (when cuobjdump, a bench extra, is present)."""
from __future__ import annotations

import pytest

import pyptx
from pyptx import f32, i32, toolchain
from benchmarks import sass_report
from benchmarks.sass_count import (access_bits, hot_loop, innermost, is_f64, kernel_stats, loops,
                                   parse_sass)


def _listing(name: str, body: list[str]) -> str:
    """A `cuobjdump -sass`-shaped listing: one instruction per 16 bytes, encoding lines after."""
    out = ["", "\tcode for sm_90", f"\t\tFunction : {name}", '\t.headerflags\t@"EF_CUDA_SM90"']
    for k, text in enumerate(body):
        guard, _, rest = text.partition(" ") if text.startswith("@") else ("", "", text)
        out.append(f"        /*{16 * k:04x}*/      {guard:>6s} {rest} ;   /* 0x{k:016x} */")
        out.append(f"{'':76s}/* 0x{k:016x} */")
    return "\n".join(out) + "\n"


# addresses: 16 bytes per line; the inner loop is lines 3..6, the outer 2..8
BODY = ["LDC R1, c[0x0][0x28]",                      # 0x00
        "LDG.E.128.CONSTANT R4, desc[UR4][R2.64]",   # 0x10
        "LDG.E R8, desc[UR4][R2.64+0x10]",           # 0x20  outer loop head
        "FFMA R9, R4, R5, R9",                       # 0x30  inner loop head
        "FFMA R10, R6, R7, R10",                     # 0x40
        "IADD3 R11, R11, 0x1, RZ",                   # 0x50
        "@P0 BRA 0x30",                              # 0x60  inner back edge
        "LDG.E.U8 R12, desc[UR4][R2.64]",            # 0x70
        "@!P1 BRA 0x20",                             # 0x80  outer back edge
        "DFMA R14, R14, R16, R18",                   # 0x90
        "F2F.F64.F32 R20, R9",                       # 0xa0
        "F2I.U64.TRUNC R22, R9",                     # 0xb0  f32 -> u64: not f64
        "LDG.E.64 R24, desc[UR4][R2.64]",            # 0xc0
        "EXIT",                                      # 0xd0
        "BRA 0xe0",                                  # 0xe0  padding: branch to itself
        "NOP",                                       # 0xf0  padding
        ]


def test_parse_drops_padding_and_keeps_guards():
    funcs = parse_sass(_listing("k", BODY) + _listing("other", ["EXIT"]))
    assert list(funcs) == ["k", "other"]
    ins = funcs["k"]
    assert len(ins) == 14 and ins[-1].opcode == "EXIT"
    assert ins[6].guard == "@P0" and ins[6].base == "BRA" and ins[8].guard == "@!P1"
    assert ins[1].opcode == "LDG.E.128.CONSTANT" and ins[1].modifiers == ("E", "128", "CONSTANT")


def _addrs(body):
    return [i.addr for i in body]


def test_loops_and_the_hot_loop():
    ins = parse_sass(_listing("k", BODY))["k"]
    assert [_addrs(lp) for lp in loops(ins)] == [list(range(0x20, 0x90, 16)),
                                                   list(range(0x30, 0x70, 16))]
    assert [_addrs(lp) for lp in innermost(loops(ins))] == [list(range(0x30, 0x70, 16))]
    assert _addrs(hot_loop(ins)) == [0x30, 0x40, 0x50, 0x60]
    assert hot_loop(ins[:6]) == []                         # no back edge: no loop


def test_a_cold_path_jumping_back_is_not_a_loop():
    body = ["ISETP.GE.AND P0, PT, R0, 0x10, PT",          # 0x00
            "@P0 BRA 0x50",                                # 0x10  to the cold path
            "FFMA R1, R2, R3, R1",                         # 0x20  join point
            "STG.E desc[UR4][R4.64], R1",                  # 0x30
            "EXIT",                                        # 0x40
            "FMUL R2, R2, 0.5",                            # 0x50  cold path ...
            "BRA 0x20"]                                    # 0x60  ... jumps back
    ins = parse_sass(_listing("k", body))["k"]
    assert loops(ins) == [] and hot_loop(ins) == []


def test_widths_and_f64():
    ins = parse_sass(_listing("k", BODY))["k"]
    assert [access_bits(i) for i in ins if i.base == "LDG"] == [128, 32, 8, 64]
    assert [i.opcode for i in ins if is_f64(i)] == ["DFMA", "F2F.F64.F32"]
    s = kernel_stats(ins)
    assert (s.instructions, s.f64, s.ldg) == (14, 2, {8: 1, 32: 1, 64: 1, 128: 1})
    assert (s.loop_size, s.loop_ffma, s.ffma_share) == (4, 2, 0.5)
    assert s.widest_ldg == 128


def test_missing_cuobjdump_is_reported_not_raised(monkeypatch):
    monkeypatch.setattr(sass_report, "find_cuobjdump", lambda: None)
    monkeypatch.setattr(toolchain, "find_ptxas", lambda: "/usr/bin/true")
    row = sass_report.measure("dot4", "pyptx", lambda: pyptx.compile(_dot4).ptx, "sm_90")
    assert row.stats is None and "cuobjdump not found" in row.error
    assert "cuobjdump not found" in sass_report.format_report(
        {"stdlib": [row], "peers": []}, "sm_90")


@pyptx.kernel
def _dot4(out: f32[:], x: f32[:], n: i32):
    t = pyptx.thread_idx.x
    acc = 0.0
    for j in range(t * 4, n, 128):
        a, b, c, d = pyptx.vload(x, j, 4)
        acc += a * b + c * d
    out[t] = acc


def test_generated_kernel_through_ptxas_and_cuobjdump():
    if sass_report.find_cuobjdump() is None or toolchain.find_ptxas() is None:
        pytest.skip("SKIPPED LOUDLY: cuobjdump or ptxas is not installed (both come with "
                    "pip install -e '.[test]'); the text counting is still tested above")
    row = sass_report.measure("dot4", "pyptx", lambda: pyptx.compile(_dot4, arch="sm_90").ptx,
                              "sm_90")
    assert row.error is None, row.error
    s = row.stats
    assert s.ldg.get(128, 0) >= 1 and s.ldg.get(32, 0) == 0     # the vload is one LDG.E.128
    assert s.f64 == 0 and row.spills == 0 and 0 < row.registers < 64
    assert s.loop_size > 0 and s.loop_ffma >= 1
    assert s.instructions > s.loop_size and s.ffma_share > 0

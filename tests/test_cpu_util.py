"""Helpers for the CPU-executor tests (no tests here): every hand-written PTX test input is
first assembled by ptxas (sm_80), so the executor is only ever tested on valid PTX."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from pyptx.runtime.cpu import ArrayArg, launch

HEADER = ".version 7.0\n.target sm_80\n.address_size 64\n"


@functools.lru_cache(maxsize=None)
def _ptxas() -> str | None:
    for cand in ("/usr/local/bin/ptxas", shutil.which("ptxas")):
        if cand and os.path.exists(cand):
            return cand
    try:
        from cuda import pathfinder
        return pathfinder.find_nvidia_binary_utility("ptxas")
    except Exception:
        return None


@functools.lru_cache(maxsize=None)
def ptxas_errors(ptx: str) -> str | None:
    exe = _ptxas()
    if exe is None:
        pytest.skip("no ptxas available")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        r = subprocess.run([exe, "-arch=sm_80", src, "-o", os.path.join(d, "k.cubin")],
                           capture_output=True, text=True)
        return None if r.returncode == 0 else r.stderr


def assert_ptxas_ok(ptx: str):
    err = ptxas_errors(ptx)
    assert err is None, f"ptxas rejected the test PTX:\n{err}\n{ptx}"


def run(ptx: str, entry: str, grid, block, args, shared_mem=0, check_ptxas=True):
    if check_ptxas:
        assert_ptxas_ok(ptx)
    return launch(ptx, entry, grid, block, args, shared_mem)


def out(a):
    return ArrayArg(a, True)


def inp(a):
    return ArrayArg(a, False)


# ---- elementwise kernels: `ld` operands, one instruction, `st` the result ---------------------

REGCLASS = {"pred": ".pred", "f32": ".f32", "f64": ".f64", "f16": ".b16"}


def _regdecl(t):
    if t in REGCLASS:
        return REGCLASS[t]
    size = int(t[1:]) if t[1:].isdigit() else 32
    return {8: ".b16", 16: ".b16", 32: ".b32", 64: ".b64"}[size]


def _mem_type(t):
    return {"pred": "u8", "f16": "b16"}.get(t, t)


def _size(t):
    return 1 if t == "pred" else max(int(t[1:]) // 8, 1)


def elementwise_ptx(instr: str, in_types, out_type: str, out2_type: str | None = None) -> str:
    """PTX for `out[i] = INSTR(in0[i], in1[i], ...)`.  In `instr`, {d} is the destination
    register, {a} {b} {c} the operands, {q} an optional second destination."""
    regs = [f".reg .pred %p<2>;", ".reg .b32 %r<8>;", ".reg .b64 %rd<32>;", ".reg .b16 %rs<4>;"]
    body = []
    names = "abc"
    params = [".param .u64 o"] + ([".param .u64 o2"] if out2_type else []) + \
        [f".param .u64 i{k}" for k in range(len(in_types))] + [".param .s32 n"]
    body += ["ld.param.s32 %r1, [n];", "mov.u32 %r2, %ctaid.x;", "mov.u32 %r3, %ntid.x;",
             "mov.u32 %r4, %tid.x;", "mad.lo.s32 %r5, %r2, %r3, %r4;",
             "setp.ge.s32 %p1, %r5, %r1;", "@%p1 bra DONE;", "cvt.s64.s32 %rd1, %r5;"]
    fmt = {}
    for k, t in enumerate(in_types):
        regs.append(f".reg {_regdecl(t)} %x{k};")
        body += [f"ld.param.u64 %rd{2 + 3 * k}, [i{k}];",
                 f"mul.lo.s64 %rd{3 + 3 * k}, %rd1, {_size(t)};",
                 f"add.s64 %rd{4 + 3 * k}, %rd{2 + 3 * k}, %rd{3 + 3 * k};"]
        if t == "pred":
            body += [f"ld.global.u8 %rs1, [%rd{4 + 3 * k}];", f"setp.ne.s16 %x{k}, %rs1, 0;"]
        else:
            body.append(f"ld.global.{_mem_type(t)} %x{k}, [%rd{4 + 3 * k}];")
        fmt[names[k]] = f"%x{k}"
    regs.append(f".reg {_regdecl(out_type)} %y;")
    fmt["d"] = "%y"
    if out2_type:
        regs.append(f".reg {_regdecl(out2_type)} %y2;")
        fmt["q"] = "%y2"
    body.append(instr.format(**fmt))
    for reg, t, pname, base in (("%y", out_type, "o", 20),) + (
            (("%y2", out2_type, "o2", 24),) if out2_type else ()):
        body += [f"ld.param.u64 %rd{base}, [{pname}];",
                 f"mul.lo.s64 %rd{base + 1}, %rd1, {_size(t)};",
                 f"add.s64 %rd{base + 2}, %rd{base}, %rd{base + 1};"]
        if t == "pred":
            body += [f"selp.u16 %rs2, 1, 0, {reg};", f"st.global.u8 [%rd{base + 2}], %rs2;"]
        else:
            body.append(f"st.global.{_mem_type(t)} [%rd{base + 2}], {reg};")
    body.append("DONE:\n    ret;")
    return (HEADER + ".visible .entry k(" + ", ".join(params) + ")\n{\n    "
            + "\n    ".join(regs + body) + "\n}\n")


NP = {"pred": np.bool_, "f16": np.float16, "f32": np.float32, "f64": np.float64,
      "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64, "u8": np.uint8,
      "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "b16": np.uint16, "b32": np.uint32,
      "b64": np.uint64}


def run_elementwise(instr, in_types, out_type, inputs, out2_type=None):
    """Run the elementwise kernel over the input arrays; returns the output array(s)."""
    ptx = elementwise_ptx(instr, in_types, out_type, out2_type)
    n = len(inputs[0])
    o = np.zeros(n, NP[out_type])
    args = [out(o)]
    if out2_type:
        o2 = np.zeros(n, NP[out2_type])
        args.append(out(o2))
    args += [inp(np.ascontiguousarray(x, NP[t])) for x, t in zip(inputs, in_types)] + [n]
    run(ptx, "k", ((n + 127) // 128, 1, 1), (128, 1, 1), args)
    return (o, o2) if out2_type else o

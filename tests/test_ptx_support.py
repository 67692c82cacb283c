"""Shared helpers of the PTX backend tests (no tests in here)."""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from pyptx.errors import ToolchainError
from pyptx.toolchain import assemble, find_ptxas

ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")

_pool = ThreadPoolExecutor(max_workers=2)


def _try(ptx, arch):
    try:
        assemble(ptx, arch)
        return None
    except ToolchainError as e:
        return f"{arch}: {e}"


def assemble_ok(jobs):
    """Assemble every (ptx, arch); fail the test with ptxas's messages if any is rejected."""
    if find_ptxas() is None:
        pytest.fail("no ptxas found (the tests need one to validate the emitted PTX)")
    errors = [e for e in _pool.map(lambda j: _try(*j), jobs) if e]
    if errors:
        pytest.fail("\n".join(errors), pytrace=False)


_INSTR = re.compile(r"^\s*(?:@!?%p\d+\s+)?([a-z][^;]*);", re.M)


def instructions(text: str) -> list[str]:
    """The instructions of a PTX text (guards stripped), one string each, without ';'."""
    body = text[text.index("{"):] if "{" in text else text
    return [m.group(1).strip() for m in _INSTR.finditer(body)]


# ---- a tiny reference interpreter for control-flow tests ----------------------------------------

_LINE = re.compile(r"^\s*(?:(@!?)(%p\d+)\s+)?([a-z][\w.]*)\s*(.*?);\s*$")
_CMP = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
        "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}


def _wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def run_scalar(text: str, params: dict) -> dict:
    """Run one thread of a small s32/pred-only PTX kernel; returns {(param, byte offset): value}
    for every `st.global.s32`.  Understands just what the control-flow tests emit, and fails
    loudly on anything else, so a wrong parallel copy or branch shows up as a wrong value."""
    body = text[text.index("{") + 1:text.rindex("}")]
    prog, labels = [], {}
    for line in body.splitlines():
        s = line.strip()
        if not s or s.startswith(("//", ".reg", ".shared", ".local")):
            continue
        if s.endswith(":"):
            labels[s[:-1]] = len(prog)
            continue
        m = _LINE.match(s)
        assert m, f"cannot parse {s!r}"
        prog.append(m.groups())
    regs: dict = {}
    stores: dict = {}

    def val(o):
        o = o.strip()
        return regs[o] if o.startswith("%") else int(o, 0)

    pc, steps = 0, 0
    while True:
        steps += 1
        assert steps < 100_000, "runaway loop"
        guard, p, op, args = prog[pc]
        pc += 1
        if guard and (regs[p] if guard == "@" else not regs[p]):
            pass
        elif guard:
            continue
        ops = [a.strip() for a in args.split(",")] if args else []
        head = op.split(".")[0]
        if op == "ret":
            return stores
        if head == "bra":
            pc = labels[ops[0]]
        elif op.startswith("ld.param"):
            regs[ops[0]] = params[ops[1].strip("[]")] if "u64" not in op else (ops[1].strip("[]"), 0)
        elif op.startswith("cvta") or head == "mov":
            regs[ops[0]] = val(ops[1])
        elif op in ("add.s32", "sub.s32", "mul.lo.s32"):
            a, b = val(ops[1]), val(ops[2])
            regs[ops[0]] = _wrap32(a + b if head == "add" else a - b if head == "sub" else a * b)
        elif head == "setp":
            regs[ops[0]] = _CMP[op.split(".")[1]](val(ops[1]), val(ops[2]))
        elif op == "not.pred":
            regs[ops[0]] = not regs[ops[1]]
        elif op in ("and.pred", "or.pred", "xor.pred"):
            a, b = regs[ops[1]], regs[ops[2]]
            regs[ops[0]] = {"and": a and b, "or": a or b, "xor": a != b}[head]
        elif head == "selp":
            regs[ops[0]] = val(ops[1]) if regs[ops[3]] else val(ops[2])
        elif op == "mad.wide.s32":
            base = regs[ops[3]]
            regs[ops[0]] = (base[0], base[1] + val(ops[1]) * val(ops[2]))
        elif op == "add.s64":
            base = regs[ops[1]]
            regs[ops[0]] = (base[0], base[1] + val(ops[2]))
        elif op == "st.global.s32":
            addr = ops[0].strip("[]").split("+")
            base = regs[addr[0]]
            stores[(base[0], base[1] + (int(addr[1]) if len(addr) > 1 else 0))] = val(ops[1])
        else:
            raise AssertionError(f"run_scalar does not know {op}")

"""A parsed + decoded PTX module, cached by its text: per entry the Op list with resolved branch
targets, the register slots, and the shared/local memory layouts."""
from __future__ import annotations

from ...errors import LaunchError
from .decode import decode
from .opkinds import BRANCH
from .operands import Ctx
from .parser import parse

_CACHE: dict = {}
_CACHE_MAX = 128


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


class EntryCode:
    """Everything the executor needs for one `.entry`."""

    def __init__(self, module, entry, mode=None):
        self.name = entry.name
        self.params = entry.params
        self.reg_types = entry.regs
        shared, local = [], []
        dyn_names = []
        for v in list(module.globals) + list(entry.vars):
            if v.space == "shared":
                (dyn_names.append(v.name) if v.extern or v.nbytes is None else shared.append(v))
            elif v.space == "local":
                local.append(v)
        self.shared_syms, off = {}, 0
        self.shared_layout = []        # (offset, size, name)
        for v in shared:
            off = _align(off, max(v.align, 1))
            self.shared_syms[v.name] = off
            self.shared_layout.append((off, v.nbytes, v.name))
            off += v.nbytes
        self.shared_static = _align(off, 16)
        for n in dyn_names:
            self.shared_syms[n] = self.shared_static
        self.local_syms, off = {}, 0
        self.local_layout = []
        for v in local:
            off = _align(off, max(v.align, 1))
            self.local_syms[v.name] = off
            self.local_layout.append((off, v.nbytes, v.name))
            off += v.nbytes
        self.local_bytes = _align(off, 16)
        self.global_vars = [v for v in module.globals if v.space in ("global", "const")]
        global_syms = {v.name for v in self.global_vars}
        ctx = Ctx(entry, self.shared_syms, self.local_syms, global_syms)
        ctx.mode = self.mode = mode
        labels, ops = {}, []
        for item in entry.body:
            if isinstance(item, str):
                labels[item] = len(ops)
            else:
                ops.append(decode(ctx, item))
        for op in ops:
            if op.kind == BRANCH:
                if op.target not in labels:
                    ctx.instr = op.instr
                    ctx.error(f"branch to unknown label {op.target}")
                op.target = labels[op.target]
        ops.append(decode(ctx, _implicit_ret(entry)))   # falling off the end returns
        self.ops = ops
        self.slots = list(ctx.slots)        # [(reg, dtype)] in slot order
        self.sites = ctx.sites              # checked launches: Instr of each instrumented site


def _implicit_ret(entry):
    from .parser import Instr
    return Instr("ret", [], None, entry.line)


class Program:
    def __init__(self, text: str, mode=None):
        self.module = parse(text)
        self.entries: dict = {}
        self.mode = mode

    def entry(self, name: str) -> EntryCode:
        code = self.entries.get(name)
        if code is None:
            e = self.module.entries.get(name)
            if e is None:
                raise LaunchError(f"PTX has no entry '{name}' (entries: "
                                  f"{', '.join(self.module.entries) or 'none'})")
            code = self.entries[name] = EntryCode(self.module, e, self.mode)
        return code


def program(text: str, mode=None) -> Program:
    """The decoded program of `text`; `mode` (an instrument.Mode) gives a checked launch its
    own instrumented copy, so the plain copy never carries a check."""
    key = text if mode is None else (text, mode)
    p = _CACHE.get(key)
    if p is None:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.pop(next(iter(_CACHE)))
        p = _CACHE[key] = Program(text, mode)
    return p

"""Counting SASS: parse `cuobjdump -sass` text and measure what the static quality report shows.

Pure text functions (no tools needed), so they are unit-tested on their own:

* `parse_sass(text)` -> {function name: [Sass]} (address, guard, opcode with modifiers, operands);
  the padding at the end of a function (NOPs and the `BRA` to itself) is dropped.
* `loops(instrs)` -> the (start, end) address ranges closed by a backward branch;
  `hot_loop(instrs)` -> the innermost loop with the most FFMAs (ties: the longer one), the loop
  whose code a GPU runs most in the kernels we write.
* `kernel_stats(instrs)` -> `SassStats`: instruction count, f64 instructions, global loads by width
  (LDG.E = 32 bits, .64, .128; .U8/.S16 ... narrower), shared loads by width, hot-loop size and
  its FFMA count.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)", re.M)
_INSTR = re.compile(r"/\*([0-9a-fA-F]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
_BRANCH_TARGET = re.compile(r"0x([0-9a-fA-F]+)")

#: opcodes that are double precision whatever their modifiers
_F64_OPS = frozenset({"DADD", "DMUL", "DFMA", "DSETP", "DSET", "DMNMX", "DMMA"})
#: opcodes that are double precision when a modifier says F64 (conversions, MUFU.RCP64H ...)
_F64_IF_MARKED = frozenset({"F2F", "F2I", "I2F", "MUFU", "FRND", "F2FP"})
_NARROW = {"U8": 8, "S8": 8, "U16": 16, "S16": 16}


@dataclass(frozen=True)
class Sass:
    addr: int
    guard: str          # '' or '@P0', '@!P1', ...
    opcode: str         # with modifiers: 'LDG.E.128.CONSTANT'
    operands: str

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def modifiers(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])


def parse_sass(text: str) -> dict[str, list[Sass]]:
    """{function name: instructions in address order} of a `cuobjdump -sass` listing."""
    out: dict[str, list[Sass]] = {}
    marks = list(_FUNCTION.finditer(text))
    for k, m in enumerate(marks):
        body = text[m.end():marks[k + 1].start() if k + 1 < len(marks) else len(text)]
        instrs = [Sass(int(a, 16), (g or "").strip(), op, ops.strip())
                  for a, g, op, ops in _INSTR.findall(body)]
        out[m.group(1)] = _drop_padding(instrs)
    return out


def _drop_padding(instrs: list[Sass]) -> list[Sass]:
    """Remove NOPs and the final `BRA` to itself that pad a function to its alignment."""
    return [i for i in instrs if i.base != "NOP" and not (i.base == "BRA" and not i.guard
                                                            and branch_target(i) == i.addr)]


def branch_target(i: Sass) -> int | None:
    if i.base not in ("BRA", "BRX", "JMP"):
        return None
    m = _BRANCH_TARGET.search(i.operands)
    return int(m.group(1), 16) if m else None


def loops(instrs: list[Sass]) -> list[tuple[int, int]]:
    """(first address, branch address) of every loop: a branch back to an earlier address."""
    out = set()
    for i in instrs:
        t = branch_target(i)
        if t is not None and t <= i.addr:
            out.add((t, i.addr))
    return sorted(out)


def innermost(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The loops that contain no other loop."""
    return [a for a in spans
            if not any(b != a and a[0] <= b[0] and b[1] <= a[1] for b in spans)]


def hot_loop(instrs: list[Sass]) -> list[Sass]:
    """The instructions of the innermost loop with the most FFMAs (ties: the longest); [] when
    the function has no loop."""
    best, best_key = [], None
    for lo, hi in innermost(loops(instrs)):
        body = [i for i in instrs if lo <= i.addr <= hi]
        key = (sum(i.base == "FFMA" for i in body), len(body))
        if best_key is None or key > best_key:
            best, best_key = body, key
    return best


def is_f64(i: Sass) -> bool:
    if i.base in _F64_OPS:
        return True
    return i.base in _F64_IF_MARKED and any("64" in m and m != "U64" and m != "S64"
                                            for m in i.modifiers)


def access_bits(i: Sass) -> int:
    """Width in bits of one load/store (LDG.E -> 32, LDG.E.128 -> 128, LDG.E.U8 -> 8)."""
    mods = i.modifiers
    for m in mods:
        if m in ("128", "64"):
            return int(m)
        if m in _NARROW:
            return _NARROW[m]
    return 32


@dataclass
class SassStats:
    instructions: int
    f64: int
    ldg: dict = field(default_factory=dict)       # bits -> count of global loads
    lds: dict = field(default_factory=dict)       # bits -> count of shared loads
    loop_size: int = 0                            # instructions in the hot loop (0: no loop)
    loop_ffma: int = 0

    @property
    def ffma_share(self) -> float:
        return self.loop_ffma / self.loop_size if self.loop_size else 0.0

    @property
    def widest_ldg(self) -> int:
        return max(self.ldg, default=0)


def _widths(instrs, base) -> dict:
    out: dict = {}
    for i in instrs:
        if i.base == base:
            b = access_bits(i)
            out[b] = out.get(b, 0) + 1
    return dict(sorted(out.items()))


def kernel_stats(instrs: list[Sass]) -> SassStats:
    loop = hot_loop(instrs)
    return SassStats(instructions=len(instrs), f64=sum(map(is_f64, instrs)),
                     ldg=_widths(instrs, "LDG"), lds=_widths(instrs, "LDS"),
                     loop_size=len(loop), loop_ffma=sum(i.base == "FFMA" for i in loop))

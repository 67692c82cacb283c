"""Counting SASS: parse `cuobjdump -sass` text and measure what the static quality report shows.

Pure text functions (no tools needed), so they are unit-tested on their own:

* `parse_sass(text)` -> {function name: [Sass]} (address, guard, opcode with modifiers, operands);
  the padding at the end of a function (NOPs and the `BRA` to itself) is dropped.
* `loops(instrs)` -> the natural loops (basic blocks, dominators, back edges), so a cold path
  that ptxas lays out at the end and jumps back from is not mistaken for a loop;
  `hot_loop(instrs)` -> the innermost loop with the most FFMAs (ties: the longer one), the loop
  whose code a GPU runs most in the kernels we write; `iterations(instrs, loop)` -> the shortest
  and longest path once round it (the instructions one iteration executes).
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


def _blocks(instrs: list[Sass]) -> tuple[list[list[Sass]], dict[int, list[int]]]:
    """Basic blocks (split at branch targets and after control transfers) and their successors
    (block index -> block indices)."""
    targets = {t for i in instrs if (t := branch_target(i)) is not None}
    blocks: list[list[Sass]] = []
    for k, i in enumerate(instrs):
        if not blocks or i.addr in targets or _ends_block(instrs[k - 1]):
            blocks.append([])
        blocks[-1].append(i)
    first = {b[0].addr: n for n, b in enumerate(blocks)}
    succs: dict[int, list[int]] = {}
    for n, b in enumerate(blocks):
        last = b[-1]
        out = []
        t = branch_target(last)
        if t is not None and t in first:
            out.append(first[t])
        if not _no_fallthrough(last) and n + 1 < len(blocks):
            out.append(n + 1)
        succs[n] = out
    return blocks, succs


def _ends_block(i: Sass) -> bool:
    return i.base in ("BRA", "BRX", "JMP", "JMX", "EXIT", "RET")


def _no_fallthrough(i: Sass) -> bool:
    return i.base in ("BRA", "BRX", "JMP", "JMX", "EXIT", "RET") and not i.guard


def _dominators(n_blocks: int, succs: dict[int, list[int]]) -> list[set[int]]:
    preds: dict[int, list[int]] = {n: [] for n in range(n_blocks)}
    for a, bs in succs.items():
        for b in bs:
            preds[b].append(a)
    every = set(range(n_blocks))
    dom = [{0}] + [set(every) for _ in range(n_blocks - 1)]
    changed = True
    while changed:
        changed = False
        for n in range(1, n_blocks):
            ps = [dom[p] for p in preds[n]]
            new = (set.intersection(*ps) if ps else set()) | {n}
            if new != dom[n]:
                dom[n], changed = new, True
    return dom


def _natural_loops(instrs: list[Sass]):
    """(blocks, successors, {header block: body block set}) of the natural loops."""
    blocks, succs = _blocks(instrs)
    dom = _dominators(len(blocks), succs)
    preds: dict[int, list[int]] = {n: [] for n in range(len(blocks))}
    for a, bs in succs.items():
        for b in bs:
            preds[b].append(a)
    bodies: dict[int, set[int]] = {}
    for a, bs in succs.items():
        for h in bs:
            if h in dom[a]:                          # a -> h is a back edge
                body = bodies.setdefault(h, {h})
                work = [a]
                while work:
                    x = work.pop()
                    if x not in body:
                        body.add(x)
                        work.extend(preds[x])
    return blocks, succs, bodies


def loops(instrs: list[Sass]) -> list[list[Sass]]:
    """The natural loops (a back edge to a block that dominates its source), one per header,
    each as its instructions in address order.  A backward jump that is not a loop (a cold path
    laid out at the end that jumps back) does not count."""
    if not instrs:
        return []
    blocks, _, bodies = _natural_loops(instrs)
    return [[i for n in sorted(body) for i in blocks[n]] for _, body in sorted(bodies.items())]


def _loop_dag(instrs: list[Sass], loop: list[Sass]):
    """(blocks, successors, header, body) of the natural loop whose instructions are `loop`."""
    blocks, succs, bodies = _natural_loops(instrs)
    want = {i.addr for i in loop}
    header, body = next((h, b) for h, b in bodies.items()
                        if {i.addr for n in b for i in blocks[n]} == want)
    return blocks, succs, header, body


def iteration_lengths(instrs: list[Sass], loop: list[Sass], limit: int = 16) -> list[int]:
    """The distinct instruction counts of the ways once round an innermost loop, ascending (at
    most `limit` of them: the shortest ones when there are more)."""
    blocks, succs, header, body = _loop_dag(instrs, loop)
    memo: dict[int, set[int]] = {}

    def ways(n: int) -> set[int]:
        if n not in memo:
            out = {0} if header in succs[n] else set()
            for s in succs[n]:
                if s in body and s != header:
                    out |= ways(s)
            memo[n] = set(sorted(len(blocks[n]) + w for w in (out or {0}))[:limit])
        return memo[n]
    return sorted(ways(header))


def iterations(instrs: list[Sass], loop: list[Sass]) -> tuple[list[Sass], list[Sass]]:
    """The shortest and the longest way once round an innermost `loop` (one of `loops(instrs)`),
    header to back edge, as the instructions executed.  A loop body with an if/else (a bounds
    checked and an unchecked copy, a masked and an unmasked one) runs only one side per
    iteration, so its size overstates the work of an iteration; these two bound it."""
    blocks, succs, header, body = _loop_dag(instrs, loop)
    memo: dict[int, tuple[list[Sass], list[Sass]]] = {}

    def ways(n: int) -> tuple[list[Sass], list[Sass]]:      # (shortest, longest) from n round
        if n not in memo:
            nxt = [ways(s) for s in succs[n] if s in body and s != header]
            if header in succs[n] or not nxt:
                nxt.append(([], []))
            memo[n] = (blocks[n] + min((w[0] for w in nxt), key=len),
                       blocks[n] + max((w[1] for w in nxt), key=len))
        return memo[n]
    return ways(header)


def innermost(all_loops: list[list[Sass]]) -> list[list[Sass]]:
    """The loops that contain no other loop."""
    sets = [{i.addr for i in lp} for lp in all_loops]
    return [lp for lp, s in zip(all_loops, sets)
            if not any(o is not s and o < s for o in sets)]


def hot_loop(instrs: list[Sass]) -> list[Sass]:
    """The instructions of the innermost loop with the most FFMAs (ties: the longest); [] when
    the function has no loop."""
    best, best_key = [], None
    for body in innermost(loops(instrs)):
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

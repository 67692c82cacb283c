"""What a decoded instruction is (`Op`, its scheduling kind) and the registry of the builders
that make one from a PTX instruction (`BUILDERS`, filled by the `@builds` decorator).

Why a leaf module: every builder module (scalar, control, memops, warp, tensorcore, printf)
needs `Op` and the kinds, and the decoder, the scheduler and the profiler need the registry.
When these lived in decode.py, decode had to import the builder modules lazily and patch its
table on the first call (decode -> memops -> decode ...).  Here they import nothing from the
package, so every module depends on this one and the import graph has no cycle
(tests/test_cpu_builders.py checks both).

A registration says, next to the builder, everything the rest of the executor needs to know
about an opcode: which kinds of Op it returns (the scheduler's view) and its profiler class
(the counters' view), so a new instruction cannot be decodable yet missing from the profiler.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

# WARPSYNC (shfl.sync, vote.sync, match.sync, bar.warp.sync) is "NORMAL" when the warp is
# converged; when it is not, lanes wait until every not-exited lane of the member mask has
# arrived.  The scheduler relies on the order: kind <= NORMAL runs inline.
# MBARWAIT (mbarrier.try_wait): `run(st, sel)` returns which lanes saw their phase complete;
# the scheduler parks the others until nothing else can run, then polls them again
# (mbarrier.py), so a thread spinning on an mbarrier lets the threads that complete it run.
# WGSYNC (wgmma.fence/mma_async/commit_group/wait_group): a warpgroup-collective .sync.aligned
# op.  Its warps may arrive at different times: each parks (like bar.sync, at warpgroup scope)
# until all 128 threads of its warpgroup are at that same instruction, which then runs once
# for the warpgroup; a partner at another warpgroup instruction, or exited, is a LaunchError.
WARPSYNC, NORMAL, BRANCH, EXIT, BARRIER, MBARWAIT, WGSYNC = -1, 0, 1, 2, 3, 4, 5
KIND_NAMES = {WARPSYNC: "WARPSYNC", NORMAL: "NORMAL", BRANCH: "BRANCH", EXIT: "EXIT",
              BARRIER: "BARRIER", MBARWAIT: "MBARWAIT", WGSYNC: "WGSYNC"}


class Op:
    """One decoded instruction: `run(st, sel)` over numpy lanes plus what the scheduler needs.

    probe: None, or (checked launches only) f(st, lanes, taken) that the scheduler calls when
    a branch/exit executes or a barrier releases (bar.red included, whose `run` is only its
    reduction: instrument.instrument_op keys the probe on the kind, not on a missing run)."""
    __slots__ = ("run", "kind", "gslot", "gneg", "target", "instr", "mask", "probe")

    def __init__(self, run, kind=NORMAL, target=None, mask=None):
        self.run, self.kind, self.target, self.mask = run, kind, target, mask
        self.gslot, self.gneg, self.instr, self.probe = None, False, None, None


class Builder(NamedTuple):
    """A registered builder of one base opcode.

    build: (ctx, ins, parts) -> Op, or a bare `run` closure (a NORMAL op).
    kinds: the Op kinds it can return (bar: BARRIER or, for bar.warp.sync, WARPSYNC).
    cls: the profiler's instruction class: a string, or parts -> (class, flops per thread)
    where the class depends on the form (ld.global vs ld.shared, fp32 vs int, mma's shape)."""
    build: Callable
    kinds: tuple
    cls: object

    def classify(self, parts) -> tuple:
        """(instruction class, flops per active thread) of an opcode split at its dots."""
        return self.cls(parts) if callable(self.cls) else (self.cls, 0)


#: base opcode (the text before the first dot) -> Builder
BUILDERS: dict[str, Builder] = {}


def builds(*opcodes: str, cls, kind=NORMAL):
    """Register the decorated function as the builder of `opcodes` (base names, e.g. "ld").

    `kind` is one kind or a tuple of the kinds its Ops can have; `cls` is the profiler class
    (see Builder).  Registering an opcode twice with different builders is an error: decode
    would silently keep only one of them."""
    kinds = kind if isinstance(kind, tuple) else (kind,)

    def register(fn):
        for name in opcodes:
            old = BUILDERS.get(name)
            if old is not None and _ident(old.build) != _ident(fn):    # reload is fine
                raise ValueError(f"two CPU builders for '{name}': "
                                 f"{_ident(old.build)} and {_ident(fn)}")
            BUILDERS[name] = Builder(fn, kinds, cls)
        return fn
    return register


def _ident(fn) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"

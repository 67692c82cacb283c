"""IR -> PTX text.  `emit(fn, arch)` is the whole interface (docs/architecture.md, "IR -> PTX").

The package is table-driven: `tables` holds the PTX facts (suffixes, templates, predicates, ISA
minimums), `emitter` the per-function machinery (registers, blocks, edge copies, module text),
`lower_*` one lowering per IR op.  No subprocess, no randomness, no dict-order dependence: the
same IR always gives byte-identical text.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..ir.core import Function
from . import lower_compute, lower_memory, lower_sync  # noqa: F401  (register the lowerings)
from . import lower_vector  # noqa: F401
from . import lower_tensorcore  # noqa: F401
from . import lower_tma, lower_wgmma  # noqa: F401
from . import lower_specialize  # noqa: F401
from .emitter import EMITTER_MNEMONICS, LOWERINGS, FunctionEmitter, param_ptx_type
from .tables import format_version, suffixes

__all__ = ["KernelParam", "PtxModule", "emit", "LOWERINGS", "ptx_mnemonics"]


def ptx_mnemonics() -> frozenset[str]:
    """Every PTX mnemonic (the first dotted part of an instruction: 'add', 'cvt', 'mma', ...)
    this backend may emit: the op records' `ptx` plus the emitter's own.  The contract with any
    consumer of the PTX text, such as the CPU executor's decoder, which must build each one
    (tests/test_op_coherence.py checks the list against the PTX of real kernels)."""
    from ..ir.ops import ptx_mnemonics as of_ops
    return of_ops() | EMITTER_MNEMONICS


class KernelParam(NamedTuple):
    """One `.param` of the entry as PTX sees it: name and PTX type ('u64', 's32', 'f32', ...).
    A named tuple, so `for name, ptx_type in compiled.params` works too."""
    name: str
    ptx_type: str


@dataclass
class PtxModule:
    """The emitted module: PTX text, its `.version`, and the entry's parameters as PTX sees them."""
    text: str
    version: str
    params: list = field(default_factory=list)
    entry: str = ""


def emit(fn: Function, arch: str, *, line_comments: bool = True) -> PtxModule:
    """Translate one kernel `fn` to a PTX module for `arch` (e.g. 'sm_80')."""
    em = FunctionEmitter(fn, arch, line_comments)
    em.run()
    params = [KernelParam(name, param_ptx_type(p.type))
              for p, name in zip(fn.params, em.param_names)]
    return PtxModule(em.module_text(), format_version(em.isa), params, em.entry_name)

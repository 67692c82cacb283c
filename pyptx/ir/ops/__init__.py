"""The opcode table: one `OpDef` record per IR operation (see `record.py` for the fields).

This table is the contract between the frontend (which produces these ops), the passes (which
read `pure`, `commutative`, `fold` from it), the verifier (`check`) and the PTX backend (one
lowering per op in `pyptx/ptx/lower_*.py`, gated by `gate`/`features`).  Semantics are exact:
the backend must emit PTX meaning precisely `doc`, and the CPU executor then reproduces it.

The records live with their family: arith (arithmetic, float functions, compare, select,
conversions), bits, memory, warp, sync, tensorcore, control (special registers, checks, print,
terminators).  Adding an op is one record there plus its PTX lowering; tests/test_op_coherence.py
fails until both exist and agree (docs/architecture.md, "Adding an intrinsic").

Notation in `doc`: T is the instruction's result type, operands are listed in order.  "int"
covers signed and unsigned, bool is the 1-bit predicate type `bool_`.  Attributes (in
`Instr.attrs`) are plain str/int/float/bool.
"""
from __future__ import annotations

from . import arith, bits, control, hopper_async, memory, sync, tensorcore, warp, wgmma
from . import warp_specialize
from .arith import APPROX_FNS, CMP_PREDICATES
from .control import SREGS
from .memory import ATOMIC_KINDS, VECTOR_LANES
from .record import OpDef
from .warp import SHFL_MODES

FAMILIES = (arith, bits, memory, warp, sync, tensorcore, wgmma, control, hopper_async,
            warp_specialize)

OPS: dict[str, OpDef] = {}
for _family in FAMILIES:
    for _rec in _family.OPS:
        assert _rec.name not in OPS, f"IR op {_rec.name!r} is defined twice"
        OPS[_rec.name] = _rec

#: the old name of the record type
OpInfo = OpDef

# ---- tables derived from the records (for the hot loops of the passes) ---------------------------

#: op -> ((operand index, attrs key), ...) of each address it takes
ADDRESS_OFFSETS = {n: d.addresses for n, d in OPS.items() if d.addresses}
#: ops ending a block, and how many branch targets each has
TERMINATORS = frozenset(n for n, d in OPS.items() if d.succs is not None)
#: ops whose operand order does not matter (for every type / for int types only)
COMMUTATIVE = frozenset(n for n, d in OPS.items() if d.commutative == "all")
INT_COMMUTATIVE = frozenset(n for n, d in OPS.items() if d.commutative == "int")
#: op -> fold function, for the ops constant folding may evaluate
FOLDS = {n: d.fold for n, d in OPS.items() if d.fold is not None}


def ptx_features() -> dict[str, tuple[int, int | str]]:
    """Every PTX feature an op's lowering may need: name -> (min ISA x10, min sm).  The sm is
    an int (this sm or newer) or, for an arch-specific feature, the one arch string that has it
    ('sm_90a': not sm_90, not sm_100a)."""
    out: dict[str, tuple[int, int]] = {}
    for d in OPS.values():
        for name, isa, sm in ((d.gate,) if d.gate else ()) + d.features:
            assert out.get(name, (isa, sm)) == (isa, sm), f"feature {name} defined twice"
            out[name] = (isa, sm)
    return out


def ir_op_names() -> frozenset[str]:
    """Every IR op.  Hook for the CPU side: whatever it builds per op must cover these."""
    return frozenset(OPS)


def ptx_mnemonics() -> frozenset[str]:
    """Every PTX mnemonic (first dotted part: 'add', 'cvt', 'mma' ...) the lowerings of the IR
    ops may emit (the backend's own parameter loads, branches and returns are added by
    `pyptx.ptx.ptx_mnemonics`).  Hook for the CPU executor: its decoder must build each."""
    return frozenset(m for d in OPS.values() for m in d.ptx)


__all__ = ["OPS", "OpDef", "OpInfo", "ADDRESS_OFFSETS", "TERMINATORS", "COMMUTATIVE",
           "INT_COMMUTATIVE", "FOLDS", "CMP_PREDICATES", "ATOMIC_KINDS", "SHFL_MODES",
           "APPROX_FNS", "SREGS", "VECTOR_LANES", "ptx_features", "ir_op_names", "ptx_mnemonics"]

"""Compile-time evaluation of one pure op on constants, bit-exact with the op records / PTX.

Why this entry point: each op's record (`pyptx/ir/ops/`) carries its own `fold` (the arithmetic
is in `ir/ops/numeric.py`); what is common to every op is decided here once: pointers and bf16
are never folded (bf16 ops round through f32 in the backend), and an op without a fold is left
alone.  Constant folding and loop unrolling's trip counts call `evaluate`.

`evaluate(op, type, attrs, values)` returns the Python value of the result, or `None` when the
op must not be folded: int div/rem by zero or MIN / -1 (unspecified), `approx` (hardware
specific), a float result that is NaN (PTX returns a canonical NaN whose payload numpy does not
reproduce), min/max of two zeros of opposite sign.
"""
from __future__ import annotations

from ..ir.ops import FOLDS
from ..ir.ops.numeric import round_to_float, wrap  # noqa: F401  (re-exported)
from ..types import PtrType, ScalarType, bf16


def evaluate(op: str, t, attrs: dict, operands: list):
    """Fold `op` (result type t) over Const operands; None = do not fold."""
    fold = FOLDS.get(op)
    if fold is None or isinstance(t, PtrType) or t is bf16:
        return None
    types = [c.type for c in operands]
    for x in types:
        if x.__class__ is ScalarType:    # (x == bf16 for a ScalarType x compares names)
            if x.name == "bf16":
                return None              # bf16 ops round through f32 in the backend: not folded
        elif isinstance(x, PtrType) or x is bf16 or x == bf16:
            return None
    return fold(t, attrs, [c.value for c in operands], types)

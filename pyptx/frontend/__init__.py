"""The frontend: a kernel's Python `ast` -> typed SSA IR (`ir.Function`).

Modules: `source` (cached parsing, locations), `values` (what expressions evaluate to),
`arith` (NumPy-2 arithmetic), `memory` (arrays), `lowering` (statements/expressions),
`loops`, `calls` (device-function inlining), `intrinsics` + `mathfns` (the intrinsic registry),
`lower` (the entry point and type fixpoint), `describe` (how diagnostics name values).
"""
from .lower import lower_kernel  # noqa: F401

__all__ = ["lower_kernel"]

"""The error a not-yet-available stdlib feature raises (none does at present; the class stays
importable for code that catches it).

`NotYetImplementedError` is both a `NotImplementedError` (what it is) and a `ValueError` (what
`gemm(variant=...)` raises for any other variant it cannot run), so either `except` catches it.
"""
from __future__ import annotations


class NotYetImplementedError(NotImplementedError, ValueError):
    """A library feature that this version of stdlib_kernels does not provide yet."""


def not_yet(what: str, instead: str = "") -> NotYetImplementedError:
    tail = f"; {instead}" if instead else ""
    return NotYetImplementedError(f"{what} is not implemented yet in stdlib_kernels "
                                  f"(a later release){tail}")


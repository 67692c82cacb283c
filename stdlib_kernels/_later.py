"""SPEC §6 functions that are a later issue: present by name so users get a clear error.

`NotYetImplementedError` is both a `NotImplementedError` (what it is) and a `ValueError` (what
`gemm(variant=...)` raises for any other variant it cannot run), so either `except` catches it.
"""
from __future__ import annotations


class NotYetImplementedError(NotImplementedError, ValueError):
    """A SPEC §6 feature that this version of stdlib_kernels does not provide yet."""


def not_yet(what: str, instead: str = "") -> NotYetImplementedError:
    tail = f"; {instead}" if instead else ""
    return NotYetImplementedError(f"{what} is not implemented yet in stdlib_kernels "
                                  f"(a later release){tail}")


"""The read-only data path and aliasing: when a launch must not use `ld.global.nc`.

The backend reads every array parameter the kernel never writes with `ld.global.nc` (CUDA's
`const __restrict__` promise: the data does not change while the kernel runs).  If the same
memory is also passed as a parameter the kernel writes, the promise is false and a `.nc` read may
see stale data.  Such a launch runs the *coherent* variant of the PTX instead - the same text with
every `ld.global.nc` made a plain `ld.global` (identical semantics otherwise) - so aliasing stays
correct, as it is on the CPU executor, which has no read-only cache.
"""
from __future__ import annotations

import re

_NC = re.compile(r"\bld\.global\.nc\.")


def uses_nc(ptx: str) -> bool:
    return _NC.search(ptx) is not None


def coherent_ptx(ptx: str) -> str:
    """`ptx` with plain global loads instead of read-only-path ones."""
    return _NC.sub("ld.global.", ptx)


def readonly_aliases_written(spans) -> bool:
    """spans: (start address, nbytes, writable) per array argument.  True when a read-only one
    overlaps a written one (an empty array overlaps nothing)."""
    written = [(s, s + n) for s, n, w in spans if w and n]
    if not written:
        return False
    for s, n, w in spans:
        if not w and n and any(s < we and ws < s + n for ws, we in written):
            return True
    return False

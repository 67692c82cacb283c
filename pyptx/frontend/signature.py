"""`ArgSpec`: what the frontend tells the launcher about each user parameter.

One record per non-constexpr parameter, in order.  The launcher checks and flattens the launch
arguments with these (an array becomes its pointer plus one i32 per dimension, and when
`strided` - layout 'A', types.ArrayType - one i64 element stride per dimension after those);
`writable` says whether the kernel may store to the array, so only those are copied back.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..types import ScalarType


@dataclass(frozen=True)
class ArgSpec:
    name: str
    kind: str                  # 'array' | 'scalar' | 'tensormap'
    dtype: ScalarType
    ndim: int = 0
    writable: bool = False
    strided: bool = False

"""The CPU PTX executor: runs the PTX text the GPU would get, with numpy, all threads of the
launch as vector lanes, memcheck on every access.

`launch(ptx_text, entry, grid, block, args, shared_mem=0)` — see docs/architecture.md
("PTX -> runtime").  lark is imported only when a launch parses PTX.
"""
from __future__ import annotations

from .launch import ArrayArg, launch

__all__ = ["ArrayArg", "launch"]

"""The `kernelParams` array of a GPU launch: `ParamPacker` lays a compiled kernel's PTX
parameters out once (natural alignment, a `void*[]` pointing at each) and packs one launch's
values with a single `struct.pack_into`.

Separate from `driver.py` because it never calls the driver: it only turns the flat argument
values the launcher checked (arg_checks.py) into the bytes `cuLaunchKernel` is given.
"""
from __future__ import annotations

import ctypes
import struct

from ..errors import DeviceError

#: PTX .param type -> struct code.  b16 carries f16 here (see architecture.md); a packer built
#: with `half_slots` (parameter positions) packs those as IEEE half ('e').
_STRUCT_CODE = {
    "u64": "Q", "s64": "q", "b64": "Q", "f64": "d",
    "u32": "I", "s32": "i", "b32": "I", "f32": "f",
    "u16": "H", "s16": "h", "b16": "H", "f16": "e",
    "u8": "B", "s8": "b", "b8": "B", "pred": "B",
    "b8[128]": "128s",        # a tensor map (pyptx.tensormap), by value
}


class ParamPacker:
    """The `kernelParams` array for one compiled kernel, laid out once.

    One buffer holds every parameter at its natural alignment; a `void*[]` points at each.
    Per launch only `pack(values)` runs: a single `struct.pack_into`.  Not re-entrant across
    threads launching the same kernel at the same time (the driver copies the values during
    cuLaunchKernel, so sequential reuse is safe).
    """

    def __init__(self, params, half_slots=()):
        fmt = ["<"]
        offsets = []
        off = 0
        for i, p in enumerate(params):
            code = "e" if i in half_slots else _STRUCT_CODE.get(p.ptx_type)
            if code is None:
                raise DeviceError(f"cannot pass a .param of type .{p.ptx_type} ('{p.name}')")
            size = struct.calcsize(code)
            align = 64 if p.ptx_type == "b8[128]" else size     # a tensor map: .align 64
            pad = (-off) % align
            fmt.append("x" * pad + code)
            off += pad
            offsets.append(off)
            off += size
        self.struct = struct.Struct("".join(fmt))
        self.offsets = offsets
        self.sizes = [struct.calcsize(f[-1]) for f in fmt[1:]]
        self.buffer = ctypes.create_string_buffer(max(self.struct.size, 8))
        base = ctypes.addressof(self.buffer)
        self.pointers = (ctypes.c_void_p * max(len(offsets), 1))(*[base + o for o in offsets])
        self.address = ctypes.addressof(self.pointers) if offsets else 0

    def pack(self, values) -> int:
        """Write the values; returns the `void**` address to pass as kernelParams."""
        self.struct.pack_into(self.buffer, 0, *values)
        return self.address

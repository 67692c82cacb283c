"""`call vprintf` on the CPU: format string from global memory, arguments from the thread's
local buffer in 8-byte slots (C varargs promotion: ints as 8-byte slots, floats as doubles),
formatted with Python's `%` (C-compatible for the conversions the backend emits) and printed
with `print`, one lane at a time in thread order, so pytest's capsys sees it.
"""
from __future__ import annotations

import re
import struct
import sys

import numpy as np

from .memory import LOCAL_WINDOW
from .opkinds import builds
from .operands import reader, writer

_CONV = re.compile(r"%([-+ #0]*\d*(?:\.\d+)?)(hh|h|ll|l|z|j|t|L)?([diouxXeEfFgGcsp%])")


def format_c(fmt: str, slot, cstring) -> str:
    """C printf formatting; `slot(k)` gives the k-th 8-byte argument as an int (raw bits)."""
    out = []
    pos = 0
    k = 0
    for m in _CONV.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        flags, length, conv = m.groups()
        if conv == "%":
            out.append("%")
            continue
        raw = slot(k)
        k += 1
        wide = length in ("l", "ll", "j", "z", "t")
        if conv in "di":
            v = raw if wide else raw & 0xFFFFFFFF
            bits = 64 if wide else 32
            if v >= 1 << (bits - 1):
                v -= 1 << bits
        elif conv in "ouxX":
            v = raw if wide else raw & 0xFFFFFFFF
        elif conv in "eEfFgG":
            v = struct.unpack("<d", struct.pack("<Q", raw))[0]
        elif conv == "c":
            v = chr(raw & 0xFF)
        elif conv == "s":
            v = cstring(raw).decode("utf-8", "replace")
        else:  # p
            out.append(hex(raw))
            continue
        out.append(("%" + flags + conv) % v)
    out.append(fmt[pos:])
    return "".join(out)


@builds("call", cls="call")
def build_call(ctx, ins, parts):
    ops = ins.operands
    plists = [o for o in ops if o[0] == "plist"]
    fname = next(o[1] for o in ops if o[0] == "sym")
    if fname != "vprintf":
        ctx.error(f"call to '{fname}' (only vprintf is supported)")
    rets = plists[0][1] if len(plists) == 2 else []
    args = plists[-1][1]
    fmt_r = reader(ctx, ("reg", args[0][1]), "u64")
    buf_r = reader(ctx, ("reg", args[1][1]), "u64") if len(args) > 1 else None
    ret_w = writer(ctx, ("reg", rets[0][1]), "s32") if rets else None

    def run(st, sel):
        t = st.tidx if sel is None else sel
        fmts = np.broadcast_to(np.asarray(fmt_r(st, sel)), t.shape)
        bufs = np.broadcast_to(np.asarray(buf_r(st, sel)), t.shape) if buf_r else None
        lv = st.local.views[8]
        n_out = np.zeros(t.shape, np.int32)
        for i, lane in enumerate(t):
            fmt = st.heap.cstring(int(fmts[i])).decode("utf-8", "replace")
            base = int(bufs[i]) - LOCAL_WINDOW if bufs is not None else 0

            def slot(k, lane=lane, base=base):
                off = base + 8 * k
                row = int(lane) * st.local.stride
                if off < 0 or off + 8 > st.local.row:
                    return 0
                return int(lv[(row + off) // 8])
            text = format_c(fmt, slot, lambda a: st.heap.cstring(int(a)))
            n_out[i] = len(text)
            st.flush_print(text)
        if ret_w is not None:
            ret_w(st, sel, n_out)
    return run


def emit(text: str):
    print(text, end="", file=sys.stdout)

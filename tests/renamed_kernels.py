"""Kernels whose names the PTX namer must change: a non-ASCII kernel name, and a kernel and
parameters named like the identifiers the backend reserves for itself."""
import pyptx
from pyptx import f32, i32


@pyptx.kernel
def ядро(out: f32[:], x: f32[:], n: i32):
    i = pyptx.grid(1)
    if i < n:
        out[i] = x[i] * 2.0


@pyptx.kernel
def param0(param0: f32[:], param1: f32[:], n: i32):
    i = pyptx.grid(1)
    if i < n:
        param0[i] = param1[i] + 1.0

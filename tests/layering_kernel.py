"""A kernel for test_layering.py's fresh-process compile."""
import pyptx
from pyptx import f32


@pyptx.kernel
def copy(out: f32[:], x: f32[:]):
    i = pyptx.grid(1)
    if i < len(x):
        out[i] = x[i]

"""The README's saxpy: `python examples/saxpy.py` runs it (GPU if present, else the CPU executor)."""
import numpy as np

import pyptx
from pyptx import block_dim, block_idx, f32, i32, thread_idx


@pyptx.kernel
def saxpy(out: f32[:], x: f32[:], y: f32[:], a: f32, n: i32):
    i = block_idx.x * block_dim.x + thread_idx.x
    if i < n:
        out[i] = a * x[i] + y[i]


if __name__ == "__main__":
    n = 1000
    x = np.arange(n, dtype=np.float32)
    y = np.ones_like(x)
    out = np.empty_like(x)
    saxpy[(n + 255) // 256, 256](out, x, y, 2.0, n)
    assert np.array_equal(out, 2.0 * x + y)
    print(f"saxpy ran on the {pyptx.device()}: out[:5] = {out[:5]}")

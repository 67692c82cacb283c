"""The README's quickstart: compile a kernel, print its PTX, run it wherever it can (the GPU if
one is usable, else the CPU executor) and check the result against numpy.

    python examples/quickstart.py
"""
import numpy as np

import pyptx
from pyptx import block_dim, block_idx, f32, i32, thread_idx


@pyptx.kernel
def saxpy(out: f32[:], x: f32[:], y: f32[:], a: f32, n: i32):
    i = block_idx.x * block_dim.x + thread_idx.x
    if i < n:
        out[i] = a * x[i] + y[i]


def main():
    compiled = pyptx.compile(saxpy)                  # no GPU needed to compile
    print(compiled.ptx)

    n = 100_000
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    out = np.full(n, np.nan, np.float32)             # poisoned: every element must be written
    saxpy[(n + 255) // 256, 256](out, x, y, 2.0, n)

    # fma=True (the default) contracts a * x + y into one fma: compare with a fused reference
    expected = (np.float64(2.0) * x + y).astype(np.float32)
    np.testing.assert_array_equal(out, expected)
    print(f"saxpy of {n} elements on the {pyptx.device()}: matches numpy")


if __name__ == "__main__":
    main()

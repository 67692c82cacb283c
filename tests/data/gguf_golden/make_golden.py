"""Regenerate golden.npz: inputs covering the quantisers' edge cases and the bytes ggml's own C
reference (`quantize_row_q4_K_ref`, `quantize_row_q6_K_ref`, `quantize_row_q8_0_ref`) makes of them.

    python tests/data/gguf_golden/make_golden.py /path/to/ggml [--commit SHA]

`/path/to/ggml` is an unmodified ggml source tree (github.com/ggml-org/ggml: its `include/` and
`src/`; the files used are src/ggml-quants.c and the headers it includes).  gen_golden.c is
compiled against it with the system C compiler (`$CC`, default gcc) into a temporary directory;
nothing of ggml is copied into this repository.  The ggml commit is read with `git rev-parse HEAD`
in that tree, or given with --commit (an exported tree has no .git), and stored in the file.

The inputs are drawn from a fixed seed, but the test reads them from golden.npz, so a numpy whose
generators draw differently only changes what a regeneration covers, never what the test checks.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "golden.npz")
QK_K = 256
FORMATS = {"q4_k": 144, "q6_k": 210, "q8_0": 8 * 34}     # bytes per 256 weights


def inputs(seed: int = 20240611) -> tuple[np.ndarray, np.ndarray]:
    """([n, 256] float32 blocks, [n] what each block is)."""
    rng = np.random.default_rng(seed)
    blocks, kinds = [], []

    def add(kind, x, n=None):
        x = np.asarray(x, np.float64).reshape(-1, QK_K)
        blocks.append(x.astype(np.float32))
        kinds.extend([kind] * x.shape[0])

    def normal(n, s=1.0):
        return rng.standard_normal((n, QK_K)) * s

    # random normal at several scales (0.02 ~ a transformer weight)
    add("normal", normal(48))
    for s in (0.02, 1e-3, 30.0):
        add(f"normal*{s:g}", normal(8, s))
    add("normal+3", normal(6) + 3.0)                       # all positive: the min clamps to 0
    add("uniform[-1,1]", rng.uniform(-1, 1, (6, QK_K)))
    add("uniform[0,1]", rng.uniform(0, 1, (6, QK_K)))
    add("laplace", rng.laplace(0, 1, (6, QK_K)))
    add("student_t(2)", rng.standard_t(2, (6, QK_K)))
    # negative only
    add("-|normal|", -np.abs(normal(6)))
    add("uniform[-3,-1]", rng.uniform(-3, -1, (6, QK_K)))
    # one outlier: per 256-block, per 32-weight Q4_K sub-block, per 16-weight Q6_K group
    for per in (QK_K, 32, 16):
        x = normal(6).reshape(-1, per)
        pos = rng.integers(0, per, x.shape[0])
        x[np.arange(x.shape[0]), pos] = rng.choice([-1, 1], x.shape[0]) * rng.uniform(20, 80, x.shape[0])
        add(f"outlier/{per}", x)
    # all equal values (the whole block, or each sub-block / group its own constant)
    add("constant", np.repeat([1.0, -1.0, 0.37, -2.5e-3, 7.0, -1234.5], QK_K))
    add("constant/32", np.repeat(rng.standard_normal(4 * 8), 32))
    add("constant/16", np.repeat(rng.standard_normal(4 * 16), 16))
    add("constant/16 one sign", np.repeat(np.abs(rng.standard_normal(2 * 16)), 16))
    # zeros, sparse, zero sub-blocks among normal ones
    add("zeros", np.zeros((2, QK_K)))
    x = normal(6)
    x[rng.random(x.shape) < 0.9] = 0.0
    add("sparse 90% zero", x)
    x = normal(4).reshape(4, 8, 32)
    x[:, rng.permutation(8)[:3]] = 0.0
    add("zero sub-blocks", x)
    x = normal(4).reshape(4, 16, 16)
    x[:, rng.permutation(16)[:5]] = 0.0
    add("zero groups", x)
    # tiny magnitudes: fp16 d underflows, x² sums underflow.  (Not float32 subnormals: 15/range
    # overflows there and ggml's nearest_int asserts: outside the reference's domain.)
    for s in (1e-5, 1e-7, 1e-10, 1e-20, 1e-30, 1e-35):
        add(f"normal*{s:g}", normal(2, s))
    # huge magnitudes, the fp16 scales staying finite
    for s in (1e3, 1e4, 1e5, 1e6):
        add(f"normal*{s:g}", normal(2, s))
    # sub-block / group scales spread over many octaves: the small ones quantise to scale 0
    add("octaves/32", normal(6).reshape(6, 8, 32) * (2.0 ** -rng.integers(0, 12, (6, 8, 1))))
    add("octaves/16", normal(6).reshape(6, 16, 16) * (2.0 ** -rng.integers(0, 12, (6, 16, 1))))
    # values that tie in rounding: half-integer grids whose scale is exactly 1 in the first pass
    # (Q8_0: max |x| = 127; Q4_K: a sub-block spanning 0..15; Q6_K: a group whose extreme is -32)
    x = rng.integers(-127, 127, (4, QK_K)) + 0.5
    x.reshape(-1, 32)[:, 0] = 127.0
    add("ties q8_0", x)
    x = rng.integers(0, 15, (4, QK_K)) + 0.5
    x.reshape(-1, 32)[:, 0], x.reshape(-1, 32)[:, 1] = 0.0, 15.0
    add("ties q4_k", x)
    x = rng.integers(-32, 31, (4, QK_K)) + 0.5
    x.reshape(-1, 16)[:, 0] = -32.0
    add("ties q6_k", x)
    # ... and in the final requantisation: an anchor sub-block / group that makes the fp16 d (and
    # Q4_K's dmin) exactly 1, so the other scales are small integers and x/d lands on k + 1/2
    # (Q4_K: anchor 63·l − 63, l = 0..15 → scale 63, min −63; the rest half-integers.  Q6_K:
    # anchor ±4096 → scale ∓128; the rest odd integers, scale ≈ ±2)
    x = rng.integers(-6, 9, (4, QK_K)) + 0.5
    for b, j in enumerate(rng.integers(0, 8, 4)):
        x[b, 32 * j:32 * j + 32] = 63.0 * np.arange(16).repeat(2) - 63.0
    add("ties q4_k requant", x)
    x = (2 * rng.integers(-32, 32, (4, QK_K)) + 1).astype(np.float64)
    for b, j in enumerate(rng.integers(0, 16, 4)):
        x[b, 16 * j:16 * j + 16] = 4096.0 * (-1) ** b
    add("ties q6_k requant", x)
    # groups of one magnitude and either sign: Q6_K keeps the first largest |scale|
    add("±constant/16", np.repeat(0.75 * rng.choice([-1.0, 1.0], 4 * 16), 16))
    add("half-integers", rng.integers(-16, 16, (4, QK_K)) / 2.0)
    add("eighths", np.round(normal(6) * 8) / 8)            # few mantissa bits: many exact ties
    add("small integers", rng.integers(-3, 4, (4, QK_K)))
    return np.concatenate(blocks), np.array(kinds)


def build(ggml: str, tmp: str) -> str:
    exe = os.path.join(tmp, "gen_golden")
    cc = os.environ.get("CC", "gcc")
    cmd = [cc, "-std=gnu11", "-O2", "-ffp-contract=off",
           "-I" + os.path.join(ggml, "include"), "-I" + os.path.join(ggml, "src"),
           "-I" + os.path.join(ggml, "src", "ggml-cpu"),
           os.path.join(HERE, "gen_golden.c"), os.path.join(ggml, "src", "ggml-quants.c"),
           "-lm", "-o", exe]
    subprocess.run(cmd, check=True)
    return exe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ggml", help="ggml source tree (with include/ and src/ggml-quants.c)")
    ap.add_argument("--commit", help="the ggml commit of that tree (default: git rev-parse HEAD)")
    a = ap.parse_args()
    commit = a.commit or subprocess.run(["git", "-C", a.ggml, "rev-parse", "HEAD"], check=True,
                                        capture_output=True, text=True).stdout.strip()
    x, kinds = inputs()
    out = {"x": x, "kind": kinds, "ggml_commit": np.array(commit)}
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(a.ggml, tmp)
        for fmt, nbytes in FORMATS.items():
            raw = subprocess.run([exe, fmt], input=x.astype("<f4").tobytes(), check=True,
                                 capture_output=True).stdout
            out[fmt] = np.frombuffer(raw, np.uint8).reshape(x.shape[0], nbytes)
    np.savez_compressed(OUT, **out)
    print(f"{OUT}: {x.shape[0]} blocks of {QK_K}, ggml {commit}, {os.path.getsize(OUT)} bytes",
          file=sys.stderr)


if __name__ == "__main__":
    main()

"""stdlib_kernels.quant against bytes made by ggml's own C reference quantisers.

tests/data/gguf_golden/golden.npz holds 234 blocks of 256 float32 weights (random normal at several
scales, uniform, heavy-tailed, negative-only, all-equal blocks and sub-blocks, zeros, sparse, tiny
and huge magnitudes, one outlier per block / sub-block / group, sub-block scales octaves apart,
values that tie in rounding in the scale search and in the final requantisation) and what ggml's
`quantize_row_q4_K_ref`, `quantize_row_q6_K_ref` and `quantize_row_q8_0_ref` make of them, built
by tests/data/gguf_golden/make_golden.py from gen_golden.c compiled against an unmodified ggml
(docs/stdlib.md, "Golden bytes from ggml's C reference", says how to regenerate).  A plain min/max
grid in place of the Q4_K or Q6_K scale search fails here (tests/test_mutants.py).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from stdlib_kernels import quant as Q

GOLDEN = os.path.join(os.path.dirname(__file__), "data", "gguf_golden", "golden.npz")
BYTES = {"q4_k": 144, "q6_k": 210, "q8_0": 8 * 34}          # per 256 weights


@pytest.fixture(scope="module")
def golden():
    with np.load(GOLDEN, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _mismatch_report(got, want, kinds) -> str:
    bad = np.nonzero((got != want).any(axis=1))[0]
    first = bad[0]
    col = np.nonzero(got[first] != want[first])[0]
    return (f"{len(bad)} of {len(want)} blocks differ from ggml; kinds "
            f"{sorted(set(kinds[bad].tolist()))}; block {first} ({kinds[first]}) bytes "
            f"{col[:8].tolist()}: got {got[first, col[:8]].tolist()} want "
            f"{want[first, col[:8]].tolist()}")


def test_golden_data_is_what_it_says(golden):
    x = golden["x"]
    assert x.dtype == np.float32 and x.ndim == 2 and x.shape[1] == 256 and x.shape[0] >= 200
    assert np.isfinite(x).all()
    assert golden["kind"].shape == (x.shape[0],)
    assert len(str(golden["ggml_commit"])) == 40
    for fmt, nbytes in BYTES.items():
        assert golden[fmt].dtype == np.uint8 and golden[fmt].shape == (x.shape[0], nbytes)


@pytest.mark.parametrize("fmt", BYTES)
def test_quantize_matches_ggml_reference_bytes(golden, fmt):
    got = Q.quantize(golden["x"], fmt)
    want = golden[fmt]
    assert got.dtype == np.uint8 and got.shape == want.shape
    assert np.array_equal(got, want), _mismatch_report(got, want, golden["kind"])


@pytest.mark.parametrize("fmt", BYTES)
def test_quantize_one_long_row_matches_ggml(golden, fmt):
    """All blocks as one row (how a GGUF tensor row is quantised): the same bytes, back to back."""
    x = golden["x"]
    got = Q.quantize(x.reshape(1, -1), fmt)
    assert np.array_equal(got.reshape(x.shape[0], -1), golden[fmt])

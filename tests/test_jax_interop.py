"""JAX arrays through the stdlib's array layer: JAX in → JAX out, and JAX arrays (immutable) are
never written — as out= or as an in-place target, refused by name.

Run in a child interpreter: JAX starts threads when imported, and other tests fork the test
process (os.fork() beside JAX's threads can deadlock), so JAX never enters this one."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="JAX is not installed (pip install -e '.[jax]')")

CHILD = r'''
import numpy as np, jax.numpy as jnp
import stdlib_kernels as sk
x = jnp.asarray(np.random.default_rng(3).standard_normal((4, 40)).astype(np.float32))
y = sk.softmax(x)
assert type(y).__module__.split(".")[0] in ("jax", "jaxlib"), type(y)
np.testing.assert_array_equal(np.asarray(y), sk.softmax(np.asarray(x)))
b = x[:2, :32].astype(jnp.bfloat16).reshape(1, 2, 32)
r = sk.flash_attention(b, b, b)
assert r.dtype == jnp.bfloat16 and type(r).__module__.split(".")[0] in ("jax", "jaxlib")
for call, msg in ((lambda: sk.softmax(x, out=jnp.zeros((4, 40), jnp.float32)),
                   "softmax: out is an immutable jax"),
                  (lambda: sk.kv_scatter(np.zeros(32, np.float32),
                                         jnp.zeros((2, 8, 16), jnp.float32), 3),
                   "kv_scatter: cache is an immutable jax")):
    try:
        call()
    except TypeError as e:
        assert msg in str(e), e
    else:
        raise AssertionError("not refused: " + msg)
print("ok")
'''


def test_jax_in_jax_out_and_immutable_arrays_refused():
    env = {**os.environ, "PYPTX_DEVICE": "cpu", "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         env=env, timeout=600)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stdout + res.stderr

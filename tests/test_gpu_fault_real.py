"""On a real GPU: a kernel's out-of-bounds write ends in a DeviceError that names the kernel,
says the context is lost and points at the CPU executor (pyptx/runtime/gpu_faults.py).

In a subprocess: the fault poisons the process's CUDA context for good.  Skipped without a GPU
(the fake driver's version of this is tests/test_fake_gpu_exec.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import gpu_present

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = r'''
import numpy as np, pyptx
from pyptx import f32, i32

@pyptx.kernel
def poke(out: f32[:], at: i32):
    if pyptx.thread_idx.x == 0:
        out[at] = 1.0

out = pyptx.to_device(np.zeros(8, np.float32))
poke[1, 32](out, 3)                   # in bounds: fine
out.copy_to_host()
poke[1, 32](out, 2**31 - 1)           # 8 GiB past it: nothing is mapped there
try:
    out.copy_to_host()
    print("NO ERROR")
except pyptx.DeviceError as e:
    print("NAME", e.error_name)
    print("MSG", e)
'''


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_present(), reason="needs a CUDA GPU")
def test_an_out_of_bounds_write_on_the_gpu_is_explained(tmp_path):
    script = tmp_path / "poke.py"              # a file: kernels need their source (inspect)
    script.write_text(SCRIPT)
    env = dict(os.environ, PYPTX_DEVICE="gpu",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert "NAME CUDA_ERROR_ILLEGAL_ADDRESS" in r.stdout, (r.stdout, r.stderr)
    assert "kernel 'poke' (the last one launched" in r.stdout
    assert "restart the process" in r.stdout and "PYPTX_DEVICE=cpu" in r.stdout

"""Every script in examples/ runs to completion (each asserts its own results), in a fresh
interpreter as a user would run it: on the CPU executor, and on the GPU path with the fake driver
(tests/run_on_fake_gpu.py installs it; its launches run the PTX on the CPU executor)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

#: examples that need an optional extra: skipped (with the reason) where it is not installed
NEEDS = {"torch_block.py": "torch"}
#: examples that run on the CPU executor whatever pyptx.device() says (torch CPU tensors)
HOST_ONLY = {"sanitize_profile.py", "torch_block.py"}

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def test_there_are_examples():
    names = {p.name for p in EXAMPLES}
    assert {"sanitize_profile.py", "quickstart.py", "reduction.py", "bias_gelu.py",
            "stdlib_from_numpy.py"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path):
    needs(path)
    env = dict(os.environ, PYPTX_DEVICE="cpu",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("PYPTX_SANITIZE", None)
    res = subprocess.run([sys.executable, str(path)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, f"{path.name} failed:\n{res.stdout}\n{res.stderr}"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs_on_the_fake_gpu(path):
    needs(path)
    env = dict(os.environ, PYPTX_DEVICE="gpu",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("PYPTX_SANITIZE", None)
    res = subprocess.run([sys.executable, str(ROOT / "tests" / "run_on_fake_gpu.py"), str(path)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"{path.name} failed on the fake GPU:\n{res.stdout}\n{res.stderr}"
    assert "on the gpu" in res.stdout.lower() or path.name in HOST_ONLY, res.stdout


def needs(path) -> None:
    if path.name in NEEDS:
        pytest.importorskip(NEEDS[path.name], reason=f"{path.name} needs {NEEDS[path.name]}")

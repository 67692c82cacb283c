"""examples/llama_decode.py end to end on the CPU executor: GGUF file → paged KV cache → one
launch graph per step, 16 greedy tokens checked against a float64 numpy forward pass."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_llama_decode_example_passes():
    env = dict(os.environ, PYPTX_DEVICE="cpu",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, str(ROOT / "examples" / "llama_decode.py")],
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[-1] == "PASS (on the cpu)", res.stdout
    generated = lines[0].split("generated ")[1]
    assert len(generated.strip("[]").split(",")) == 16
    assert "launches per step in one graph" in res.stdout

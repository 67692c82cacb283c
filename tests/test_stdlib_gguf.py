"""stdlib_kernels.gguf.matmul on tensors of a real GGUF file, and examples/gguf_matmul.py."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, GGUFWriter

import qmatmul_reference as R
from stdlib_kernels import gguf as sg
from stdlib_kernels import qmatmul, quant as Q

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    rng = np.random.default_rng(3)
    path = str(tmp_path_factory.mktemp("gguf") / "m.gguf")
    w = GGUFWriter(path, "llama")
    dense = rng.standard_normal((19, 256)).astype(np.float32)
    w.add_tensor("q4", Q.quantize_q4_k(dense), raw_dtype=T.Q4_K)
    w.add_tensor("q6", Q.quantize_q6_k(dense), raw_dtype=T.Q6_K)
    w.add_tensor("q8", Q.quantize_q8_0(dense), raw_dtype=T.Q8_0)
    w.add_tensor("f16", dense.astype(np.float16))
    w.add_tensor("f32", dense)
    w.add_tensor("q5", gq_quantize(dense, T.Q5_0), raw_dtype=T.Q5_0)
    w.add_tensor("norm", dense[0])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = GGUFReader(path)
    yield {t.name: t for t in r.tensors}
    del r


def gq_quantize(a, qtype):
    from gguf import quants
    return quants.quantize(a, qtype)


def test_tensor_conventions(reader):
    """GGUF stores dims fastest-first: our [19, 256] weight reads back as shape [256, 19]."""
    t = reader["q4"]
    assert [int(d) for d in t.shape] == [256, 19] and t.data.shape == (19, 144)


@pytest.mark.parametrize("name", ["q4", "q6", "q8", "f16", "f32"])
@pytest.mark.parametrize("m", [1, 3])
def test_matmul_dispatches(reader, name, m, monkeypatch):
    monkeypatch.setattr(qmatmul, "_alloc", lambda shape, dtype=np.float32: np.full(
        shape, np.nan if np.dtype(dtype).kind == "f" else 0x55, dtype))
    t = reader[name]
    kind = t.tensor_type.name
    x = np.random.default_rng(m).standard_normal((m, 256)).astype(np.float32)
    got = sg.matmul(x, t)
    assert got.shape == (m, 19)
    if kind in ("F16", "F32"):          # gemm "tiled": plain f32 accumulation (qmatmul_reference)
        dense = np.asarray(t.data, np.float64)
        want = R.product(x, dense)
        bound = R.C_TILED * np.sqrt(256) * R.U * (np.abs(x) @ np.abs(dense).T)
        assert (np.abs(got - want) <= bound).all()
    else:                               # m ≤ 8: the dp4a path
        R.check_result(got, x, np.asarray(t.data), kind.lower(), "dp4a")
    flat = sg.matmul(x[0], t)
    assert flat.shape == (19,) and np.allclose(flat, got[0], rtol=1e-4, atol=1e-4)


def test_quantised_bytes_are_not_copied(reader, monkeypatch):
    """The memory-mapped bytes reach the kernel as a view (no host copy before the launch)."""
    seen = []
    real = qmatmul.run
    monkeypatch.setattr(qmatmul, "run", lambda fmt, x2, w, n, path, *out: seen.append(w) or
                        real(fmt, x2, w, n, path, *out))
    t = reader["q4"]
    sg.matmul(np.ones(256, np.float32), t)
    assert np.shares_memory(seen[0], t.data)


def test_errors(reader):
    x = np.ones((2, 256), np.float32)
    with pytest.raises(ValueError, match="Q5_0"):
        sg.matmul(x, reader["q5"])
    with pytest.raises(ValueError, match="2-d"):
        sg.matmul(x, reader["norm"])
    with pytest.raises(ValueError, match="x's last dimension must be 256"):
        sg.matmul(np.ones((2, 512), np.float32), reader["q6"])
    with pytest.raises(ValueError, match="x's last dimension must be 256"):
        sg.matmul(np.ones((2, 512), np.float32), reader["f32"])
    with pytest.raises(TypeError, match="tensor"):
        sg.matmul(x, np.zeros((19, 144), np.uint8))
    with pytest.raises(ValueError, match="path"):
        sg.matmul(x, reader["f16"], path="dp4a")


def test_example_runs():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "gguf_matmul.py")],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PASS" in p.stdout and "FAIL" not in p.stdout

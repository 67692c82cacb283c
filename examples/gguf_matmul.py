"""GGUF end to end: write a small model file with gguf.GGUFWriter, read it back with GGUFReader,
run the fused quantised matmuls on its tensors and compare with numpy.

    python examples/gguf_matmul.py        # prints one line per tensor, then PASS
"""
import os
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter

import pyptx
from stdlib_kernels import gguf as sk_gguf
from stdlib_kernels import quant

N, K, M = 37, 512, 3          # an [N, K] weight (odd N), M activation rows


def write_model(path: str, weights: dict) -> None:
    """One tensor per (name → (float weight, GGUF type)), quantised with stdlib_kernels.quant."""
    w = GGUFWriter(path, "llama")
    for name, (dense, qtype) in weights.items():
        if qtype == GGMLQuantizationType.F32:
            w.add_tensor(name, dense)
        elif qtype == GGMLQuantizationType.F16:
            w.add_tensor(name, dense.astype(np.float16))
        else:
            w.add_tensor(name, quant.quantize(dense, qtype.name.lower()), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def reference(tensor) -> np.ndarray:
    """The tensor's [n, k] float32 values, decoded by numpy."""
    name = tensor.tensor_type.name
    if name in ("F32", "F16"):
        return np.asarray(tensor.data, np.float32)
    return quant.dequantize(np.asarray(tensor.data), name.lower())


def main() -> int:
    rng = np.random.default_rng(0)
    types = [GGMLQuantizationType.Q4_K, GGMLQuantizationType.Q6_K, GGMLQuantizationType.Q8_0,
             GGMLQuantizationType.F16, GGMLQuantizationType.F32]
    weights = {f"blk.0.{t.name.lower()}.weight": (rng.standard_normal((N, K)).astype(np.float32)
                                                  * 0.02, t) for t in types}
    x = rng.standard_normal((M, K)).astype(np.float32)
    ok = True
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "tiny.gguf")
        write_model(path, weights)
        reader = GGUFReader(path)
        for tensor in reader.tensors:
            got = sk_gguf.matmul(x, tensor)
            want = x.astype(np.float64) @ reference(tensor).astype(np.float64).T
            err = np.linalg.norm(got - want) / np.linalg.norm(want)
            good = got.shape == (M, N) and err < 2e-3
            ok &= good
            dims = [int(s) for s in tensor.shape]
            print(f"{tensor.name:24s} {tensor.tensor_type.name:5s} shape {dims} -> {got.shape}"
                  f"  rel. error {err:.2e}  {'ok' if good else 'FAIL'}")
        del reader                       # release the memory map before the directory goes
    print(f"{'PASS' if ok else 'FAIL'} (on the {pyptx.device()})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

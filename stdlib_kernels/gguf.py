"""`matmul(x, tensor)`: x @ Wᵀ for a weight tensor of a `gguf.GGUFReader`, by its type.

GGUF lists a tensor's dimensions fastest-first (ggml's `ne`): an `[n, k]` nn.Linear weight has
`tensor.shape == [k, n]`, and the reader's `tensor.data` is the memory-mapped `[n, row_bytes]`
uint8 array (quantised types) or `[n, k]` float16/float32.  Quantised bytes go to the fused
kernels as they are (a view of the map; the one copy is the launch's upload); F16/F32 weights are
transposed into one contiguous float32 `[k, n]` copy for the tiled float32 GEMM.
"""
from __future__ import annotations

import numpy as np

from . import _validate as V
from .gemm import gemm
from .qmatmul import check_weight, check_x, q4k_matmul, q6k_matmul, q8_0_matmul

#: GGMLQuantizationType names this module dispatches on → function
_QUANT = {"Q4_K": q4k_matmul, "Q6_K": q6k_matmul, "Q8_0": q8_0_matmul}
_FLOAT = ("F32", "F16")
SUPPORTED = (*_QUANT, *_FLOAT)


def _type_name(tensor) -> str:
    try:
        return tensor.tensor_type.name
    except AttributeError:
        raise TypeError(f"matmul: tensor must be a gguf.GGUFReader tensor (with .tensor_type, "
                        f".shape and .data), got {type(tensor).__name__}") from None


def matmul(x: np.ndarray, tensor, path: str = "auto") -> np.ndarray:
    """x @ Wᵀ for a 2-d GGUF weight tensor W `[n, k]` (`tensor.shape == [k, n]`).

    `x` is float32 `[m, k]` or `[k]`; returns `[m, n]` (or `[n]`).  Q4_K, Q6_K and Q8_0 run the
    fused kernels (`path` as in q4k_matmul); F16 and F32 run `gemm(..., "tiled")` (`path` must
    then be "auto").  Other types are a ValueError naming the type.
    """
    kind = _type_name(tensor)
    if kind not in SUPPORTED:
        raise ValueError(f"matmul: tensor {getattr(tensor, 'name', '')!r} has type {kind}; "
                         f"supported: {', '.join(SUPPORTED)}")
    dims = [int(d) for d in np.asarray(tensor.shape).reshape(-1)]
    if len(dims) != 2:
        raise ValueError(f"matmul: tensor must be 2-d (a [n, k] weight), got GGUF shape {dims}")
    k, n = dims
    data = tensor.data
    if kind in _QUANT:
        x2, _ = check_x("matmul", x, kind.lower())
        if x2.shape[1] != k:
            raise ValueError(f"matmul: x's last dimension must be {k} (the tensor's k), got "
                             f"{x2.shape[1]}")
        return _QUANT[kind](x, check_weight("matmul", "tensor.data", data, n, k, kind.lower()),
                            n, path)
    V.choice("matmul", "path", path, ("auto",))
    x_in = V.float32_array("matmul", "x", x, (1, 2))
    x2 = x_in.reshape(1, -1) if x_in.ndim == 1 else x_in
    if x2.shape[1] != k:
        raise ValueError(f"matmul: x's last dimension must be {k} (the tensor's k), got "
                         f"{x2.shape[1]}")
    w = np.asarray(data).reshape(n, k)
    wt = np.ascontiguousarray(w.T, dtype=np.float32)           # the one copy
    out = gemm(x2, wt, "tiled")
    return out.reshape(n) if x_in.ndim == 1 else out

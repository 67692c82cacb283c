"""`matmul(x, tensor)`: x @ Wᵀ for a weight tensor of a `gguf.GGUFReader`, by its type.

GGUF lists a tensor's dimensions fastest-first (ggml's `ne`): an `[n, k]` nn.Linear weight has
`tensor.shape == [k, n]`, and the reader's `tensor.data` is the memory-mapped `[n, row_bytes]`
uint8 array (quantised types) or `[n, k]` float16/float32.  Quantised bytes go to the fused
kernels as they are (a view of the map; the one copy is the launch's upload); F16/F32 weights are
transposed into one contiguous float32 `[k, n]` copy for the tiled float32 GEMM.

For a device-resident `x` (a DeviceArray, a CUDA tensor) the weight goes to that device once per
`tensor.data` object and stays there until that object is garbage-collected (`_resident`), so
later calls — inside `pyptx.graph()` too — upload nothing.
"""
from __future__ import annotations

import weakref

import numpy as np

import pyptx

from . import _validate as V
from ._args import result, stdlib_function
from .gemm import TILE_M, TILE_N, TILED_THREADS, gemm_tiled_kernel, tiled_vec
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


#: device copies of GGUF weights: id(tensor.data) -> {owner: DeviceArray} (owner: the driver
#: context it was uploaded to, "cpu" on the CPU executor); an entry goes when its tensor.data
#: object is garbage-collected (weakref.finalize)
_resident: dict = {}


def _on_device(data, like, make):
    """`make()` (the kernels' host form of the weight `data`) where the DeviceArray `like`
    lives: uploaded once per `data` object and device (outside any capture's recording) and
    kept while `data` lives."""
    from pyptx.runtime import driver
    from pyptx.runtime.graph import outside_capture
    per = _resident.get(id(data))
    if per is None:
        per = _resident[id(data)] = {}
        weakref.finalize(data, _resident.pop, id(data), None)
    owner = driver.context() if like.on_gpu else "cpu"
    dev = per.get(owner)
    if dev is None:
        for gone in [c for c in per if not getattr(c, "alive", True)]:
            del per[gone]                       # contexts of a driver.reset()
        with outside_capture():
            dev = per[owner] = pyptx.to_device(make())
    return dev


@stdlib_function
def matmul(x, tensor, path: str = "auto", *, out=None):
    """x @ Wᵀ for a 2-d GGUF weight tensor W `[n, k]` (`tensor.shape == [k, n]`).

    `x` is float32 `[m, k]` or `[k]`; returns `[m, n]` (or `[n]`), or fills `out`.  `tensor` is
    a `gguf.GGUFReader` tensor (not an array: it is never converted); for a device-resident x its
    weight is kept on the device (module docstring).  Q4_K, Q6_K and Q8_0 run the
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
        w = check_weight("matmul", "tensor.data", data, n, k, kind.lower())
        if V.is_device(x2):
            w = _on_device(data, x2, lambda: w)
        return _QUANT[kind](x, w, n, path, out=out)
    V.choice("matmul", "path", path, ("auto",))
    x_in = V.float32_array("matmul", "x", x, (1, 2))
    x2 = x_in.reshape(1, -1) if x_in.ndim == 1 else x_in
    if x2.shape[1] != k:
        raise ValueError(f"matmul: x's last dimension must be {k} (the tensor's k), got "
                         f"{x2.shape[1]}")

    def transposed():                                          # the one copy
        return np.ascontiguousarray(np.asarray(data).reshape(n, k).T, dtype=np.float32)

    wt = _on_device(data, x2, transposed) if V.is_device(x2) else transposed()
    m = x2.shape[0]
    res = result("matmul", out, (n,) if x_in.ndim == 1 else (m, n), np.float32, x_in)
    if m and n:                                # gemm(x2, wt, "tiled"), written into res
        gemm_tiled_kernel[(V.ceil_div(n, TILE_N), V.ceil_div(m, TILE_M)), TILED_THREADS](
            res.reshape(m, n), x2, wt, tiled_vec(k, n))
    return res

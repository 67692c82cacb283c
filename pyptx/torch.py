"""`import pyptx.torch`: every public stdlib function as a PyTorch operator, `torch.ops.pyptx.NAME`.

Each operator is a `torch.library.custom_op("pyptx::NAME")` with a fake (meta) implementation
that computes the result's shape and dtype, so the operators run eagerly and inside
`torch.compile(fullgraph=True)` (the graph keeps them as opaque calls; inductor compiles what is
around them).  One table below, `OPS`, declares them all: per operator its schema (argument
names as in the stdlib function, torch schema types), the arguments it updates in place, and how
its result is shaped.

The real implementation calls the stdlib function; its array layer (stdlib_kernels/_args.py)
reads the tensors without copying.  The result is a fresh tensor allocated here with the fake's
shape and dtype on the inputs' device and passed as `out=` (custom_op results must be new
tensors that alias no input); the in-place operators (`kv_scatter`, `paged_kv_scatter`) declare
`mutates_args` and return nothing.

Where they run:

* CPU tensors always on the CPU PTX executor (`launch_scope(cpu=True)`), whatever
  `pyptx.device()` says — torch placed the data in host memory, so that is where the work goes;
* CUDA tensors on the GPU, on torch's current stream (`torch.cuda.current_stream()`), with no
  synchronisation (the layer launches there; the result is allocated by torch's caching
  allocator on that stream).

`stdlib_kernels.gguf.matmul` is not an operator: it takes a `gguf.GGUFReader` tensor, which has no
torch schema type (call `q4k_matmul` / `q6k_matmul` / `q8_0_matmul` with the reader tensor's
bytes as a uint8 tensor instead).  Every other public function is: `OPS` must list each of
`stdlib_kernels.__all__`'s functions (tests/test_torch_ops.py checks it).
"""
from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass
from typing import Callable

import torch

import stdlib_kernels as _stdlib
from stdlib_kernels._args import IN_PLACE
from pyptx.runtime.launch import launch_scope

__all__ = ["OPS", "Op", "ops"]

_F32 = torch.float32


@dataclass(frozen=True)
class Op:
    """One `torch.ops.pyptx` operator.

    `args`: the schema's argument list (names as in the stdlib function, in its order);
    `mutates`: the arguments updated in place (the op then returns nothing);
    `result`: bound arguments -> (shape, dtype, tensor whose device the result takes) — the fake
    implementation, and the `out=` the real one allocates (None for in-place ops)."""
    name: str
    args: str
    mutates: tuple = ()
    result: Callable | None = None

    @property
    def schema(self) -> str:
        return f"({self.args}) -> ()" if self.mutates else f"({self.args}) -> Tensor"


# ---- result shapes ----------------------------------------------------------------------------

def _like(name: str, keep_dtype: bool = False):
    """The result has argument `name`'s shape (float32, or its dtype with keep_dtype)."""
    def shape(a):
        t = a[name]
        return tuple(t.shape), (t.dtype if keep_dtype else _F32), t
    return shape


def _rows_of(n: Callable):
    """x `[..., k]` -> `[..., n(args)]` float32 (the matmuls: 1-d x gives `[n]`)."""
    def shape(a):
        x = a["x"]
        return tuple(x.shape[:-1]) + (n(a),), _F32, x
    return shape


def _gemm(a):
    return (a["a"].shape[0], a["b"].shape[1]), _F32, a["a"]


#: every public stdlib function (but gguf.matmul) as an operator
OPS = (
    Op("softmax", "Tensor x, int axis=-1", result=_like("x")),
    Op("rmsnorm", "Tensor x, Tensor weight, float eps=1e-06", result=_like("x")),
    Op("layernorm", "Tensor x, Tensor? gamma=None, Tensor? beta=None, float eps=1e-05",
       result=_like("x")),
    Op("add", "Tensor a, Tensor b", result=_like("a")),
    Op("gemm", "Tensor a, Tensor b, str variant=\"tiled\"", result=_gemm),
    Op("swiglu", "Tensor gate, Tensor up", result=_like("gate")),
    Op("gate_up_swiglu", "Tensor x, Tensor w_gate, Tensor w_up",
       result=_rows_of(lambda a: a["w_gate"].shape[0])),
    Op("rope", "Tensor x, Tensor positions, float theta=10000.0, str layout=\"neox\"",
       result=_like("x")),
    Op("flash_attention", "Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None, "
       "int? window=None, float? softcap=None, str variant=\"tensor_core\"",
       result=_like("q", keep_dtype=True)),
    Op("decode_attention",
       "Tensor q, Tensor k_cache, Tensor v_cache, int seq_len, int? num_splits=None, "
       "int? window=None, float? softcap=None",
       result=_like("q")),
    Op("kv_scatter", "Tensor src, Tensor(a!) cache, int pos", mutates=IN_PLACE["kv_scatter"]),
    Op("paged_attention", "Tensor q, Tensor k_pages, Tensor v_pages, Tensor block_table, "
       "Tensor seq_lens, float? scale=None, int? max_seq_len=None, int? window=None, "
       "float? softcap=None", result=_like("q")),
    Op("paged_kv_scatter", "Tensor k, Tensor v, Tensor(a!) k_pages, Tensor(b!) v_pages, "
       "Tensor slots", mutates=IN_PLACE["paged_kv_scatter"]),
    Op("q4k_matmul", "Tensor x, Tensor w, int n, str path=\"auto\"",
       result=_rows_of(lambda a: a["n"])),
    Op("q6k_matmul", "Tensor x, Tensor w, int n, str path=\"auto\"",
       result=_rows_of(lambda a: a["n"])),
    Op("q8_0_matmul", "Tensor x, Tensor w, int n, str path=\"auto\"",
       result=_rows_of(lambda a: a["n"])),
    Op("q4k_gate_up_swiglu", "Tensor x, Tensor w_gate, Tensor w_up, int n",
       result=_rows_of(lambda a: a["n"])),
)


# ---- registration -------------------------------------------------------------------------------

def _register(op: Op):
    fn = getattr(_stdlib, op.name)
    sig = inspect.signature(fn)

    def bind(args, kwargs) -> dict:
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    def impl(*args, **kwargs):
        a = bind(args, kwargs)
        for k, v in a.items():
            if isinstance(v, torch.Tensor):
                a[k] = v.detach()        # DLPack refuses tensors that require grad
        out = None
        if op.result is not None:
            try:
                shape, dtype, like = op.result(a)
            except Exception:  # noqa: BLE001 - malformed arguments: the stdlib's own message
                with _where(a):
                    fn(**a)
                raise
            out = torch.empty(shape, dtype=dtype, device=like.device)
            a["out"] = out
        with _where(a):
            res = fn(**a)
        if out is not None and res is not out:     # a path that returned its own array
            out.copy_(res)
        return out

    def fake(*args, **kwargs):
        if op.result is None:
            return None
        shape, dtype, like = op.result(bind(args, kwargs))
        return like.new_empty(shape, dtype=dtype)

    custom = torch.library.custom_op(f"pyptx::{op.name}", impl, mutates_args=op.mutates,
                                     schema=op.schema)
    custom.register_fake(fake)
    return custom


def _where(bound: dict):
    """CPU tensors only: the CPU executor; a CUDA tensor: the layer's own scope (torch's
    current stream)."""
    for v in bound.values():
        if isinstance(v, torch.Tensor) and v.device.type != "cpu":
            return contextlib.nullcontext()
    return launch_scope(cpu=True)


#: name -> the registered custom op (also reachable as torch.ops.pyptx.NAME)
ops = {op.name: _register(op) for op in OPS}

"""The user-facing DSL objects: `thread_idx`, `syncthreads`, `shfl_xor`, `shared`, ...

They are inert markers.  The frontend recognises them (by their `intrinsic` name) when it
evaluates a kernel's names at compile time and lowers each call through its intrinsic registry
(`pyptx/frontend/intrinsics.py`).  Calling one from ordinary Python raises a clear error.
"""
from __future__ import annotations


class Intrinsic:
    """A DSL function that only means something inside a kernel."""
    __slots__ = ("intrinsic",)

    def __init__(self, name: str):
        self.intrinsic = name

    def __call__(self, *args, **kwargs):
        raise TypeError(f"pyptx.{self.intrinsic}() can only be used inside a "
                        f"@pyptx.kernel or @pyptx.func; call it from kernel code and launch the "
                        f"kernel with k[grid, block](...)")

    def __repr__(self):
        return f"<pyptx intrinsic {self.intrinsic}>"


class SpecialRegister:
    """`thread_idx.x` and friends: one PTX special register (an i32 inside a kernel)."""
    __slots__ = ("sreg",)

    def __init__(self, sreg: str):
        self.sreg = sreg

    def __repr__(self):
        return f"<pyptx special register %{self.sreg}>"


class Dim3:
    """`thread_idx`, `block_idx`, `block_dim`, `grid_dim`: `.x`, `.y`, `.z`."""
    __slots__ = ("x", "y", "z", "_name")

    def __init__(self, name: str, prefix: str):
        self._name = name
        self.x, self.y, self.z = (SpecialRegister(f"{prefix}.{d}") for d in "xyz")

    def __repr__(self):
        return f"<pyptx {self._name}>"


class MemorySpace:
    """`pyptx.shared` / `pyptx.local`: `.array(shape, dtype)` (and `shared.dynamic(dtype)`)."""

    def __init__(self, space: str, *members: str):
        self._space = space
        for m in members:
            setattr(self, m, Intrinsic(f"{space}.{m}"))

    def __repr__(self):
        return f"<pyptx.{self._space}>"


thread_idx = Dim3("thread_idx", "tid")
block_idx = Dim3("block_idx", "ctaid")
block_dim = Dim3("block_dim", "ntid")
grid_dim = Dim3("grid_dim", "nctaid")
WARP_SIZE = 32

shared = MemorySpace("shared", "array", "dynamic")
local = MemorySpace("local", "array")

#: Every DSL function, one name each: the frontend's registry (pyptx/frontend/intrinsics.py)
#: holds the lowering of each.  Adding an intrinsic: docs/architecture.md, "Adding an intrinsic"
#: (tests/test_op_coherence.py checks that every name here has its lowering).
_FUNCTIONS = ("grid lane_id syncthreads syncwarp threadfence shfl_xor shfl_down shfl_up "
              "shfl_idx vote_any vote_all ballot atomic_add atomic_min atomic_max atomic_exch "
              "atomic_and atomic_or atomic_xor atomic_cas popc clz brev dp4a bitcast "
              "static_range").split()
_FUNCTIONS += ["vload", "vstore"]          # vector memory (pyptx/frontend/vector.py)
_FUNCTIONS += "mma_sync ldmatrix pack2 unpack2 cp_async cp_async_wait".split()
_FUNCTIONS += ("gridsize activemask lanemask_lt vote_uni match_any match_all syncthreads_count "
               "syncthreads_and syncthreads_or atomic_sub atomic_inc atomic_dec atomic_nanmin "
               "atomic_nanmax ffs").split()       # Numba-CUDA parity (frontend/parity.py)
_FUNCTIONS += ["const_array"]              # constant memory (pyptx/frontend/constmem.py)
_FUNCTIONS += ("reduce_add reduce_min reduce_max reduce_and reduce_or "
               "reduce_xor").split()      # warp reductions, redux.sync (frontend/parity.py)
_FUNCTIONS += ("wgmma_desc wgmma wgmma_fence wgmma_commit wgmma_wait "
               "fence_proxy_async").split()   # Hopper warpgroup MMA (frontend/wgmma.py)
_FUNCTIONS += ("elect_one setmaxnreg launch_bounds"
               .split())                      # warp specialisation (frontend/specialize.py)
_FUNCTIONS += ("mbarrier_init mbarrier_arrive mbarrier_arrive_expect_tx mbarrier_expect_tx "
               "mbarrier_try_wait mbarrier_wait fence_mbarrier_init "
               "tma_load tma_store tma_store_wait").split()   # mbarriers and TMA, sm_90
                                                              # (frontend/tma.py)
globals().update({name: Intrinsic(name) for name in _FUNCTIONS})

__all__ = ["thread_idx", "block_idx", "block_dim", "grid_dim", "WARP_SIZE", "shared", "local",
           *_FUNCTIONS]

#: `for i in pyptx.range(start, stop, step=1, unroll=N)`: reachable as `pyptx.range` only.  It
#: is kept out of `__all__`, so `from pyptx import *` never shadows Python's builtin `range`.
QUALIFIED_ONLY = ("range",)
globals().update({name: Intrinsic(name) for name in QUALIFIED_ONLY})

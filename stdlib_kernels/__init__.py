"""The pyptx standard kernel library: inference kernels written in the pyptx DSL, called from numpy.

Each public function validates its arguments (ValueError/TypeError naming the argument) before any
launch, picks the launch geometry from the shapes and runs wherever `pyptx.device()` says.  The DSL
kernels are module attributes (`stdlib_kernels.softmax_block_kernel`, ...) so `pyptx.compile` works
on them; `stdlib_kernels.catalog.SPECIALISATIONS` lists them with the constexprs used.
"""
from __future__ import annotations

from .activations import gate_up_swiglu, gate_up_swiglu_kernel, swiglu, swiglu_kernel
from .attention import (decode_attention, decode_attention_kernel, decode_merge_kernel,
                        kv_scatter, kv_scatter_kernel)
from .elementwise import add, add_kernel
from .gemm import gemm, gemm_naive_kernel, gemm_tiled_kernel
from .gemm_tc import gemm_tc_kernel
from .gemm_wgmma import gemm_wgmma_kernel
from ._later import NotYetImplementedError  # noqa: F401
from .flash_attention import (flash_attention, flash_attention_f32_kernel,
                              flash_attention_tc_kernel)
from .flash_attention_wide import flash_attention_tc_wide_kernel
from .flash_attention_wgmma import flash_attention_wgmma_kernel
from .norms import layernorm, layernorm_kernel, rmsnorm, rmsnorm_kernel
from .paged import (paged_attention, paged_attention_kernel, paged_kv_scatter,
                    paged_kv_scatter_kernel, paged_merge_kernel)
from .rope import rope, rope_kernel
from .softmax import softmax, softmax_block_kernel, softmax_warp_kernel
from .qmatmul import q4k_gate_up_swiglu, q4k_matmul, q6k_matmul, q8_0_matmul
from .qgemv import (act_q8_kernel, act_sums_kernel, q4k_dp4a_kernel, q4k_gate_up_kernel,
                    q4k_gemv_kernel, q6k_dp4a_kernel, q6k_gemv_kernel, q8_0_dp4a_kernel,
                    q8_0_gemv_kernel)
from .qtiled import qmatmul_tiled_kernel

__all__ = [
    "softmax", "rmsnorm", "layernorm", "gemm", "kv_scatter", "decode_attention", "rope",
    "swiglu", "gate_up_swiglu",
    "softmax_warp_kernel", "softmax_block_kernel", "rmsnorm_kernel", "layernorm_kernel",
    "gemm_naive_kernel", "gemm_tiled_kernel", "kv_scatter_kernel", "decode_attention_kernel",
    "decode_merge_kernel", "rope_kernel", "swiglu_kernel", "gate_up_swiglu_kernel",
    "gemm_tc_kernel", "gemm_wgmma_kernel", "flash_attention", "flash_attention_tc_kernel",
    "flash_attention_f32_kernel", "flash_attention_tc_wide_kernel",
    "flash_attention_wgmma_kernel",
    "q4k_matmul", "q6k_matmul", "q8_0_matmul", "q4k_gate_up_swiglu",
    "act_sums_kernel", "act_q8_kernel", "q4k_gemv_kernel", "q4k_dp4a_kernel",
    "q4k_gate_up_kernel", "q6k_gemv_kernel", "q6k_dp4a_kernel", "q8_0_gemv_kernel",
    "q8_0_dp4a_kernel", "qmatmul_tiled_kernel",
    "paged_attention", "paged_kv_scatter", "paged_attention_kernel", "paged_kv_scatter_kernel",
    "paged_merge_kernel", "add", "add_kernel",
]

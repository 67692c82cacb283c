"""Every DSL kernel of the library with the constexpr values its wrappers launch it with, and the
Llama-style preset shapes used by the tests and the benchmark.

Tests iterate `SPECIALISATIONS` to check that ptxas accepts each one (sm_80, sm_90) without
spills; the benchmark prints their `ptxas -v` resources when no GPU is present.
`ARCH_SPECIFIC` holds the kernels pinned to one arch-specific target (`@pyptx.kernel(arch=
"sm_90a")`, which compiles for no other arch): the same check runs them for their own arch.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pyptx

from .activations import gate_up_swiglu_kernel, swiglu_kernel
from .attention import (decode_attention_kernel, decode_merge_kernel, kv_kernel,
                        kv_scatter_kernel)
from .elementwise import add_kernel, copy_kernel
from .gemm import TILED_THREADS, gemm_naive_kernel, gemm_tiled_kernel
from .gemm_tc import gemm_tc_kernel
from . import gemm_wgmma
from .flash_attention import flash_attention_f32_kernel, flash_attention_tc_kernel
from .flash_attention_wide import flash_attention_tc_wide_kernel, passes as wide_passes
from .norms import layernorm_kernel, rmsnorm_kernel
from .paged import paged_attention_kernel, paged_kv_scatter_kernel, paged_merge_kernel
from ._rows import row_config
from .rope import ROPE_THREADS, rope_kernel
from .softmax import plan as softmax_plan, softmax_block_kernel, softmax_warp_kernel
from . import qgemv, qmma, qtiled
from .llama import kernels as _movers

#: Llama-2/3-7B/8B-like shapes
LLAMA = dict(hidden=4096, n_heads=32, n_kv_heads=8, head_dim=128, ffn=11008, max_seq=4096,
             vocab=32000)


@dataclass(frozen=True)
class Specialisation:
    label: str
    kernel: object                      # a pyptx.Kernel
    constexprs: dict = field(default_factory=dict)
    threads: int = 0                    # threads per block the wrapper launches (0: not fixed)


#: the model options' values of the specialisations below: Mistral's sliding window, Gemma 2's
#: attention logit cap (both compile-time constants of the kernels)
WINDOW, SOFTCAP = 4096, 50.0


def _kv16(kernel, *names):
    """The float16-KV-cache instance of `kernel` (its K/V parameters retyped; KV16=True)."""
    return kv_kernel(kernel, names)


#: row lengths whose launch plans (block, chunk width, chunks in registers or streamed) cover
#: every path of the row kernels: short/odd rows, register-resident rows, streamed rows (32001:
#: streamed rows that are not 16-byte aligned)
_ROW_LENGTHS = (7, 1000, 4096, 4097, 11008, 32000, 32001)


def _row_spec(name, kernel, cfg, warp=False) -> Specialisation:
    cx = {"VEC": cfg.vec, "CHUNKS": cfg.chunks}
    if not warp:
        cx = {"BLOCK": cfg.block, **cx}
    label = f"{name}[{','.join(f'{k}={v}' for k, v in cx.items())}]"
    return Specialisation(label, kernel, cx, 256 if warp else cfg.block)


def _row_specs() -> tuple[Specialisation, ...]:
    specs = {}
    for kernel_name in ("softmax", "rmsnorm", "layernorm"):
        for n in _ROW_LENGTHS:
            if kernel_name == "softmax":
                kind, cfg = softmax_plan(n)
                spec = (_row_spec("softmax_warp", softmax_warp_kernel, cfg, warp=True)
                        if kind == "warp" else
                        _row_spec("softmax_block", softmax_block_kernel, cfg))
            else:
                spec = _row_spec(kernel_name, rmsnorm_kernel if kernel_name == "rmsnorm"
                                 else layernorm_kernel, row_config(n))
            specs.setdefault(spec.label, spec)
    return tuple(specs.values())


def _mover_specs() -> tuple[Specialisation, ...]:
    """copy_words' four access widths; swap01 / gather_heads (f32 and f16 pages) at the preset's
    head_dim and a non-power-of-two one, the default page size, and their per-element fallbacks
    (typed here: the wrapper types gather_heads_kernel's pages at the launch)."""
    C, T, M = pyptx.constexpr, _movers.THREADS, _movers
    d = LLAMA["head_dim"]
    fallback = [Specialisation(f"gather_heads[{n}]", M.typed(
        M.gather_heads_kernel, "_" + n, (pyptx.f32[:, :, :], t[:, :, :, :], C)), {"PS": 16}, T)
        for n, t in (("f32", pyptx.f32), ("f16", pyptx.f16))]
    return (*(Specialisation(f"copy[VEC={v}]", copy_kernel, {"VEC": v}, 256) for v in (1, 2, 4, 8)),
            *(Specialisation(f"swap01_vec[D={dd}]", M.swap01_vec_kernel, {"D": dd}, T)
              for dd in (d, 96)),
            Specialisation("swap01", M.swap01_kernel, {}, T),
            *(Specialisation(f"gather_heads_vec[{n},D={dd}]", k, {"PS": 16, "D": dd, "VEC": v}, T)
              for n, k, v in (("f32", M.gather_heads_vec_kernel, 4),
                              ("f16", M.gather_heads_f16_kernel(), 8)) for dd in (d, 96)),
            *fallback)


SPECIALISATIONS: tuple[Specialisation, ...] = (
    *_row_specs(),
    Specialisation("gemm_naive", gemm_naive_kernel),
    *(Specialisation(f"gemm_tiled[VEC={v}]", gemm_tiled_kernel, {"VEC": v}, TILED_THREADS)
      for v in (4, 1)),
    Specialisation("kv_scatter", kv_scatter_kernel),
    *(Specialisation(f"decode_attention[DPL={d},SPLIT={s}]", decode_attention_kernel,
                     {"DPL": d, "TILE": 32, "GROUP": 4, "VEC": True, "SPLIT": s})
      for d in (2, 4) for s in (False, True)),
    *(Specialisation(f"decode_attention[DPL={d},SPLIT={s},kv16]",
                     _kv16(decode_attention_kernel, "k_cache", "v_cache"),
                     {"DPL": d, "TILE": 32, "GROUP": 4, "VEC": True, "SPLIT": s, "KV16": True})
      for d in (2, 4) for s in (False, True)),
    Specialisation(f"decode_attention[DPL=4,SPLIT=True,WINDOW={WINDOW},SOFTCAP={SOFTCAP}]",
                   decode_attention_kernel, {"DPL": 4, "TILE": 32, "GROUP": 4, "VEC": True,
                                             "SPLIT": True, "WINDOW": WINDOW,
                                             "SOFTCAP": SOFTCAP}),
    Specialisation("kv_scatter[kv16]", _kv16(kv_scatter_kernel, "cache")),
    Specialisation("decode_merge", decode_merge_kernel),
    *(Specialisation(f"rope[{'neox' if neox else 'gptj'},VEC={vec}]", rope_kernel,
                     {"NEOX": neox, "VEC": vec}, ROPE_THREADS)
      for neox, vec in ((True, 4), (True, 1), (False, 2), (False, 1))),
    Specialisation("swiglu", swiglu_kernel),
    *(Specialisation(f"gate_up_swiglu[VEC={v}]", gate_up_swiglu_kernel, {"VEC": v})
      for v in (4, 1)),
    *(Specialisation(f"gemm_tc[{'bf16' if bf else 'f16'}]", gemm_tc_kernel,
                     {"bf": bf, "a_vec": True, "b_vec": True}) for bf in (False, True)),
    *(Specialisation(f"flash_attention_tc[D={d},causal={c},{'bf16' if bf else 'f16'}]",
                     flash_attention_tc_kernel, {"D": d, "causal": c, "bf": bf})
      for d in (64, 128) for c in (False, True) for bf in (False, True)),
    *(Specialisation(f"flash_attention_tc[D=128,causal=True,f16,{opt}]",
                     flash_attention_tc_kernel, {"D": 128, "causal": True, "bf": False, **cx})
      for opt, cx in ((f"WINDOW={WINDOW}", {"WINDOW": WINDOW}),
                      (f"SOFTCAP={SOFTCAP}", {"SOFTCAP": SOFTCAP}))),
    *(Specialisation(f"flash_attention_tc_wide[D={d},C0={c0},DV={dv},causal={c},"
                     f"{'bf16' if bf else 'f16'}]", flash_attention_tc_wide_kernel,
                     {"D": d, "C0": c0, "DV": dv, "causal": c, "bf": bf})
      for d in (144, 192, 240, 256) for c0, dv in wide_passes(d) for c in (False, True)
      for bf in ((False, True) if d == 256 else (False,))),
    *(Specialisation(f"flash_attention_tc_wide[D=256,C0={c0},DV=128,causal=True,bf16,"
                     f"WINDOW={WINDOW},SOFTCAP={SOFTCAP}]", flash_attention_tc_wide_kernel,
                     {"D": 256, "C0": c0, "DV": 128, "causal": True, "bf": True,
                      "WINDOW": WINDOW, "SOFTCAP": SOFTCAP})
      for c0 in (0, 128)),
    *(Specialisation(f"flash_attention_f32[DPL={dpl},causal={c}]", flash_attention_f32_kernel,
                     {"DPL": dpl, "KT": 32 if dpl <= 4 else 16, "causal": c, "VEC": True})
      for dpl in (2, 4) for c in (False, True)),
    Specialisation(f"flash_attention_f32[DPL=4,causal=True,WINDOW={WINDOW},SOFTCAP={SOFTCAP}]",
                   flash_attention_f32_kernel, {"DPL": 4, "KT": 32, "causal": True, "VEC": True,
                                                "WINDOW": WINDOW, "SOFTCAP": SOFTCAP}),
    Specialisation("act_sums", qgemv.act_sums_kernel),
    Specialisation("act_q8", qgemv.act_q8_kernel),
    *(Specialisation(f"{kern.name}[M={m}]", kern, {"M": m})
      for kern in (qgemv.q4k_gemv_kernel, qgemv.q4k_dp4a_kernel, qgemv.q4k_gate_up_kernel,
                   qgemv.q6k_gemv_kernel, qgemv.q6k_dp4a_kernel, qgemv.q8_0_gemv_kernel,
                   qgemv.q8_0_dp4a_kernel)
      for m in (1, qgemv.GEMV_MAX_M)),
    *(Specialisation(f"qmatmul_tiled[{fmt}]", qtiled.qmatmul_tiled_kernel, {"FMT": code})
      for fmt, code in (("q4_k", qtiled.Q4_K), ("q6_k", qtiled.Q6_K), ("q8_0", qtiled.Q8_0))),
    *(Specialisation(f"qmma[{fmt}]", qmma.qmma_kernel, {"FMT": code}, qmma.THREADS)
      for fmt, code in (("q4_k", qmma.Q4_K), ("q6_k", qmma.Q6_K), ("q8_0", qmma.Q8_0))),
    *(Specialisation(f"paged_attention[DPL={d},SPLIT={s}]", paged_attention_kernel,
                     {"DPL": d, "TILE": 32, "GROUP": 4, "VEC": True, "SPLIT": s})
      for d in (2, 4) for s in (False, True)),
    *(Specialisation(f"paged_attention[DPL={d},SPLIT={s},kv16]",
                     _kv16(paged_attention_kernel, "k_pages", "v_pages"),
                     {"DPL": d, "TILE": 32, "GROUP": 4, "VEC": True, "SPLIT": s, "KV16": True})
      for d in (2, 4) for s in (False, True)),
    Specialisation(f"paged_attention[DPL=4,SPLIT=True,kv16,WINDOW={WINDOW},SOFTCAP={SOFTCAP}]",
                   _kv16(paged_attention_kernel, "k_pages", "v_pages"),
                   {"DPL": 4, "TILE": 32, "GROUP": 4, "VEC": True, "SPLIT": True, "KV16": True,
                    "WINDOW": WINDOW, "SOFTCAP": SOFTCAP}),
    Specialisation("paged_merge", paged_merge_kernel),
    Specialisation("paged_kv_scatter", paged_kv_scatter_kernel),
    Specialisation("paged_kv_scatter[kv16]", _kv16(paged_kv_scatter_kernel, "k_pages",
                                                   "v_pages")),
    *(Specialisation(f"add[VEC={v}]", add_kernel, {"VEC": v}) for v in (False, True)),
    *_mover_specs(),
)


#: kernels pinned to an arch-specific target (`kernel.arch`), checked by ptxas for that arch only
ARCH_SPECIFIC: tuple[Specialisation, ...] = tuple(
    Specialisation(f"gemm_wgmma[{'bf16' if bf else 'f16'},STAGES={st}]",
                   gemm_wgmma.gemm_wgmma_kernel, {"BF": bf, "STAGES": st}, gemm_wgmma.THREADS)
    for bf in (False, True) for st in (gemm_wgmma.CPU_STAGES, gemm_wgmma.GPU_STAGES))


def _fa_wgmma() -> tuple[Specialisation, ...]:
    """The Hopper FlashAttention's GPU configurations (head_dim 64 / 128, f16 and bf16, causal
    and not) and a Mistral/Gemma-option instance."""
    from . import flash_attention_wgmma as fw
    specs = []
    for d in fw.HEAD_DIMS:
        nwg, bkv, st = fw.config(d, True)
        for bf, causal in ((False, False), (False, True), (True, True)):
            specs.append(Specialisation(
                f"flash_attention_wgmma[d={d},{'bf16' if bf else 'f16'},"
                f"{'causal' if causal else 'full'}]",
                kv_kernel(fw.flash_attention_wgmma_kernel, REGS=fw.regs(d, True)),
                {"D": d, "NWG": nwg, "BKV": bkv, "STAGES": st, "causal": causal, "bf": bf},
                fw.threads(nwg, fw.regs(d, True))))
    nwg, bkv, st = fw.config(128, True)
    specs.append(Specialisation(
        "flash_attention_wgmma[d=128,f16,window,softcap]",
        kv_kernel(fw.flash_attention_wgmma_kernel, WINDOW=WINDOW, SOFTCAP=SOFTCAP,
                  REGS=fw.regs(128, True)),
        {"D": 128, "NWG": nwg, "BKV": bkv, "STAGES": st, "causal": True, "bf": False},
        fw.threads(nwg, fw.regs(128, True))))
    return tuple(specs)


ARCH_SPECIFIC += _fa_wgmma()

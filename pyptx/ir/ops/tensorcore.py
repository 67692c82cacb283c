"""Tensor cores and async copies (sm_80+; docs/tensor-cores.md has the fragment layouts).

`mma` and `ldmatrix` produce several registers: their result is a VecType value taken apart by
`lane`, as for `vload`.
"""
from __future__ import annotations

from ...types import PtrType, VecType, f32, i32, u32
from .record import family

op = family("tensorcore")

_CP_ASYNC = ("cp.async", 70, 80)


_MMA_ACC = {"f16": f32, "bf16": f32, "s8": i32, "u8": i32}


def _check_mma(c, ins, T, a):
    atype = ins.attrs.get("atype")
    c.need(atype in _MMA_ACC, "mma atype must be f16 or bf16 (f32 C/D), or s8 or u8 (i32 C/D)")
    acc = _MMA_ACC.get(atype, f32)
    ab = 3 if len(a) == 7 and atype in ("s8", "u8") else 6     # int8 m16n8k16: 2 A, 1 B
    c.need(len(a) == ab + 4 and T == VecType(acc, 4) and a[:ab] == [u32] * ab
           and a[ab:] == [acc] * 4,
           "mma: six u32 A/B registers (three for the int8 m16n8k16 form), four C registers "
           "and a VecType(·, 4) result of the accumulator type (f32 for f16/bf16, i32 for "
           "s8/u8)")


def _check_ldmatrix(c, ins, T, a):
    count = ins.attrs.get("count")
    c.need(count in (1, 2, 4) and isinstance(ins.attrs.get("trans", False), bool),
           "ldmatrix: count 1, 2 or 4, trans a bool")
    c.need(isinstance(a[0], PtrType) and a[0].space == "shared" and T == VecType(u32, count),
           "ldmatrix: a shared pointer, VecType(u32, count) result")


def _check_pack2(c, ins, T, a):
    c.need(T == u32 and a == [f32, f32] and ins.attrs.get("dtype") in ("f16", "bf16"),
           "pack2: two f32, dtype f16/bf16, u32 result")


def _check_cp_async(c, ins, T, a):
    c.need(len(a) in (2, 3) and ins.attrs.get("nbytes") in (4, 8, 16),
           "cp_async: dst, src[, src_bytes] and nbytes 4, 8 or 16")
    c.need(isinstance(a[0], PtrType) and a[0].space == "shared" and isinstance(a[1], PtrType)
           and a[1].space == "global" and all(t == u32 for t in a[2:]),
           "cp_async: shared dst, global src, u32 src_bytes")


def _check_cp_async_wait(c, ins, T, a):
    n = ins.attrs.get("n")
    c.need(type(n) is int and n >= 0, "cp_async_wait: n a non-negative int")


OPS = [
    op("mma", "a0..a3, b0, b1, c0..c3 | a0, a1, b0, c0..c3",
       "warp-collective PTX mma.sync.aligned: atype f16/bf16 is m16n8k16.row.col.f32.<atype>."
       "<atype>.f32 (a*, b* u32 of two packed halves, c* f32, T VecType(f32, 4)); atype s8/u8 "
       "is m16n8k32.row.col.s32.<atype>.<atype>.s32 (a*, b* u32 of four packed bytes, c* i32, "
       "T VecType(i32, 4), sums wrap modulo 2**32), or with 7 operands (a0, a1, b0, c0..c3) "
       "m16n8k16.row.col.s32.<atype>.<atype>.s32.  D's four registers are read with `lane`.  "
       "attrs atype in {'f16','bf16','s8','u8'}",
       nargs=None, pure=False, check=_check_mma, gate=("mma", 70, 80), ptx=("mma",)),
    op("ldmatrix", "p",
       "warp-collective PTX ldmatrix.sync.aligned.m8n8.x<count>[.trans].shared.b16: p is a "
       "ptr.shared (this lane's row address, plus attrs.get('offset', 0) bytes).  "
       "T VecType(u32, count), read with `lane`.  attrs count in {1,2,4}, trans (bool)",
       pure=False, check=_check_ldmatrix, addresses=((0, "offset"),),
       gate=("ldmatrix", 70, 80), ptx=("ldmatrix",)),
    op("pack2", "lo, hi",
       "T u32: f32 lo and hi rounded to nearest-even f16/bf16 (attrs dtype), lo in bits "
       "0..15 (PTX cvt.rn.{f16x2,bf16x2}.f32 d, hi, lo on sm_80+).  Pure (CSE, DCE and LICM "
       "treat it like any value) but never constant-folded (the rounding is left to the "
       "hardware)",
       check=_check_pack2, features=(("cvt.f16x2.f32", 70, 80),),
       ptx=("cvt", "mov", "shl", "or")),
    op("cp_async", "dst, src[, src_bytes]",
       "PTX cp.async: copy attrs nbytes (4, 8, 16) from src (ptr.global, plus attrs "
       "src_offset bytes) to dst (ptr.shared, plus attrs offset bytes), asynchronously: the "
       "copy belongs to the next committed group.  With src_bytes (u32, 0..nbytes) only that "
       "many bytes are read and the rest of dst is written as zeros",
       pure=False, result=False, check=_check_cp_async,
       addresses=((0, "offset"), (1, "src_offset")), gate=_CP_ASYNC, ptx=("cp",)),
    op("cp_async_wait", "",
       "PTX cp.async.commit_group then cp.async.wait_group attrs n: commit this thread's "
       "copies issued since the last commit as one group, then wait until at most n groups "
       "are pending",
       pure=False, result=False, check=_check_cp_async_wait, gate=_CP_ASYNC, ptx=("cp",)),
]

"""Warp-collective ops (PTX `.sync` forms: every one needs shfl.sync-era PTX, ISA 6.0)."""
from __future__ import annotations

from ...types import bool_, u32
from .record import family, is_float, is_i32ish, is_int, rule

op = family("warp")

SHFL_MODES = ("bfly", "down", "up", "idx")
#: shfl.sync, vote.sync, bar.warp.sync, activemask
SYNC_WARP = ("sync.warp", 60, 30)


def _check_shfl(c, ins, T, a):
    c.need(T == a[0] and (is_int(T, (32, 64)) or is_float(T) and T.bits >= 32),
           "shfl: 32/64-bit int/float value of the result type")
    c.need(is_i32ish(a[1]) and a[2] == u32, "shfl: i32/u32 lane, u32 mask")
    c.need(ins.attrs.get("mode") in SHFL_MODES, f"shfl mode must be one of {SHFL_MODES}")


def _check_vote(c, ins, T, a):
    mode = ins.attrs.get("mode")
    c.need(mode in ("any", "all", "uni", "ballot"), "vote mode must be any/all/uni/ballot")
    c.need(a[0] == bool_ and a[1] == u32, "vote: bool_ predicate, u32 mask")
    c.need(T == (u32 if mode == "ballot" else bool_), "vote result: bool_ (ballot: u32)")


#: redux.sync's operations: add/min/max on u32 or s32, and/or/xor on b32
REDUX_OPS = ("add", "min", "max", "and", "or", "xor")


def _check_redux(c, ins, T, a):
    c.need(ins.attrs.get("mode") in REDUX_OPS, f"redux mode must be one of {REDUX_OPS}")
    c.need(is_i32ish(T) and a[0] == T and a[1] == u32,
           "redux: a 32-bit int value of the result type, u32 mask")


def _check_match(c, ins, T, a):
    c.need(T == u32 and ins.attrs.get("mode") in ("any", "all") and a[1] == u32,
           "match: mode any/all, u32 mask, u32 result")


OPS = [
    op("shfl", "v, lane, mask",
       "T = type of v (32- or 64-bit int/float).  attrs mode in {'bfly','down','up','idx'}; "
       "lane (u32/i32) is the lane mask/delta/source lane; mask (u32) the member mask.  "
       "Out-of-range source lanes return the thread's own v (PTX shfl.sync, c = 0x1f).",
       pure=False, check=_check_shfl, gate=SYNC_WARP,
       ptx=("shfl", "mov", "selp", "cvt", "setp")),
    op("activemask", "",
       "T u32: the mask of the lanes of the warp executing this instruction together "
       "(PTX activemask.b32); not pure: it depends on where control flow has diverged",
       pure=False, check=rule(lambda T, a: T == u32, "activemask result is u32"),
       gate=SYNC_WARP, ptx=("activemask",)),
    op("vote", "p, mask", "attrs mode in {'any','all','uni'} -> T bool_; mode 'ballot' -> T u32",
       pure=False, check=_check_vote, gate=SYNC_WARP, ptx=("vote",)),
    op("match", "v, mask",
       "T u32; v a 32/64-bit int or float (compared as bits).  attrs mode 'any': the lanes "
       "of mask holding the same value (PTX match.any.sync); 'all': mask if every lane of "
       "mask holds the same value, else 0 (match.all.sync)",
       pure=False, check=_check_match, gate=("match.sync", 60, 70), ptx=("match",)),
    op("redux", "v, mask",
       "T = type of v (i32 or u32).  attrs mode in {'add','min','max','and','or','xor'}: "
       "the reduction of v over the lanes of mask, the same value in each (PTX redux.sync; "
       "add wraps mod 2^32, min/max signed for i32 and unsigned for u32)",
       pure=False, check=_check_redux, gate=("redux.sync", 70, 80), ptx=("redux",)),
]

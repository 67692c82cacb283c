"""Warp-level instructions over the 32-lane structure (lane = linear tid % 32 in the block).

Min-PC scheduling runs the lanes of a warp that reached the same instruction together, so
"active lanes" here are exactly the lanes in `sel`.  Semantics follow the PTX ISA pseudo-code:
shfl computes a source lane j and a validity bit from the mode, the clamp value c[4:0] and the
segment mask c[12:8]; an invalid source (or one past the end of a partial warp) reads the lane's
own value.
"""
from __future__ import annotations

import numpy as np

from .opkinds import WARPSYNC, Op, builds
from .operands import reader, types_of, writer, writer_pair


def _all(st, sel):
    return st.tidx if sel is None else sel


@builds("shfl", kind=WARPSYNC, cls="warp")
def build_shfl(ctx, ins, parts):
    mode = next(p for p in parts if p in ("up", "down", "bfly", "idx"))
    typ = types_of(parts)[-1]
    ops = ins.operands
    d, dp = writer_pair(ctx, ops[0], typ)
    a_slot_reader = reader(ctx, ops[1], typ)
    b = reader(ctx, ops[2], "u32")
    c = reader(ctx, ops[3], "u32")

    def run(st, sel):
        t = _all(st, sel)
        lane = st.lane[t]
        bval = np.asarray(b(st, sel)).astype(np.int64) & 31
        cv = np.asarray(c(st, sel)).astype(np.int64)
        cval = cv & 31
        seg = (cv >> 8) & 31
        max_lane = (lane & seg) | (cval & ~seg)
        min_lane = lane & seg
        if mode == "up":
            j = lane - bval
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bval
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bval
            ok = j <= max_lane
        else:
            j = min_lane | (bval & ~seg)
            ok = j <= max_lane
        src_lane = np.where(ok, j, lane)
        src = t - lane + src_lane
        # a source past the end of a partial last warp is unpredictable: take our own value
        src = np.where(src_lane < st.warp_len[t], src, t)
        full = a_slot_reader(st, None)
        val = full[src] if np.ndim(full) else full
        d(st, sel, val)
        if dp is not None:
            dp(st, sel, ok)
    return Op(run, WARPSYNC, mask=reader(ctx, ops[4], "b32"))


def _ballot_bits(st, t, pred):
    """Per active lane: the ballot of its warp over active lanes (u32), and the active mask."""
    bits = np.left_shift(np.uint64(1), st.lane[t].astype(np.uint64))
    w = st.warp_id[t]
    nw = st.n_warps
    ballot = np.bincount(w, weights=np.where(pred, bits, 0).astype(np.float64), minlength=nw)
    active = np.bincount(w, weights=bits.astype(np.float64), minlength=nw)
    return ballot.astype(np.uint64)[w].astype(np.uint32), active.astype(np.uint64)[w].astype(np.uint32)


@builds("vote", kind=WARPSYNC, cls="warp")
def build_vote(ctx, ins, parts):
    mode = next(p for p in parts if p in ("any", "all", "uni", "ballot"))
    ops = ins.operands
    d = writer(ctx, ops[0], "b32" if mode == "ballot" else "pred")
    p = reader(ctx, ops[1], "pred")
    m = reader(ctx, ops[2], "b32") if len(ops) > 2 else (lambda st, sel: np.uint32(0xFFFFFFFF))

    def run(st, sel):
        t = _all(st, sel)
        pv = np.broadcast_to(p(st, sel), t.shape)
        ballot, active = _ballot_bits(st, t, pv)
        mask = np.asarray(m(st, sel)).astype(np.uint32)
        members = active & mask
        if mode == "ballot":
            d(st, sel, ballot & mask)
        elif mode == "any":
            d(st, sel, (ballot & members) != 0)
        elif mode == "all":
            d(st, sel, (ballot & members) == members)
        else:
            got = ballot & members
            d(st, sel, (got == 0) | (got == members))
    return Op(run, WARPSYNC, mask=m)


_REDUX = {"min": (np.minimum, 1 << 62), "max": (np.maximum, -(1 << 62)),
          "and": (np.bitwise_and, -1), "or": (np.bitwise_or, 0), "xor": (np.bitwise_xor, 0),
          "add": (np.add, 0)}


@builds("redux", kind=WARPSYNC, cls="warp")
def build_redux(ctx, ins, parts):
    """redux.sync.{add,min,max}.{u32,s32} / .{and,or,xor}.b32 d, a, membermask: every lane of
    the mask that runs it together gets the reduction of their a (add wraps mod 2^32)."""
    mode = next(p for p in parts if p in _REDUX)
    typ = types_of(parts)[-1]
    ufunc, init = _REDUX[mode]
    d = writer(ctx, ins.operands[0], typ)
    a = reader(ctx, ins.operands[1], typ)
    m = reader(ctx, ins.operands[2], "b32")

    def run(st, sel):
        t = _all(st, sel)
        v = np.broadcast_to(np.asarray(a(st, sel)), t.shape).astype(np.int64)
        mask = np.broadcast_to(np.asarray(m(st, sel)).astype(np.uint32), t.shape)
        member = ((mask >> st.lane[t].astype(np.uint32)) & 1).astype(bool)
        w = st.warp_id[t]
        acc = np.full(st.n_warps, init, np.int64)
        ufunc.at(acc, w[member], v[member])
        out = (acc[w] & 0xFFFFFFFF).astype(np.uint32)
        d(st, sel, out.view(np.int32) if typ == "s32" else out)
    return Op(run, WARPSYNC, mask=m)


@builds("activemask", cls="warp")
def build_activemask(ctx, ins, parts):
    d = writer(ctx, ins.operands[0], "b32")

    def run(st, sel):
        t = _all(st, sel)
        _, active = _ballot_bits(st, t, np.ones(t.shape, bool))
        d(st, sel, active)
    return run


@builds("match", kind=WARPSYNC, cls="warp")
def build_match(ctx, ins, parts):
    """match.{any,all}.sync.b32/b64 d[|p], a, membermask over the lanes that run it together."""
    mode = next(p for p in parts if p in ("any", "all"))
    typ = types_of(parts)[-1]
    ops = ins.operands
    d, dp = writer_pair(ctx, ops[0], "b32")
    a = reader(ctx, ops[1], typ)
    m = reader(ctx, ops[2], "b32")

    def run(st, sel):
        t = _all(st, sel)
        v = np.broadcast_to(np.asarray(a(st, sel)), t.shape)
        mask = np.broadcast_to(np.asarray(m(st, sel)).astype(np.uint32), t.shape)
        bits = (np.uint64(1) << st.lane[t].astype(np.uint64)).astype(np.float64)
        w = st.warp_id[t]
        _, group = np.unique(np.stack([w.astype(np.uint64), v.astype(np.uint64)]), axis=1,
                             return_inverse=True)
        group = group.reshape(-1)
        same = np.bincount(group, weights=bits).astype(np.uint64)[group].astype(np.uint32)
        out = same & mask
        if mode == "all":
            _, active = _ballot_bits(st, t, np.ones(t.shape, bool))
            members = active & mask        # lanes of the mask that are executing it
            ok = out == members
            out = np.where(ok, members, np.uint32(0)).astype(np.uint32)
            if dp is not None:
                dp(st, sel, ok)
        d(st, sel, out)
    return Op(run, WARPSYNC, mask=m)

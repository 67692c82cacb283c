"""CPU builders of the warp-specialisation instructions: `elect.sync` and `setmaxnreg`.

elect.sync d|p, membermask: the ISA promises one deterministic leader among the executing
lanes of the mask; the executor elects the lowest one (as the hardware does), writes its lane id
to d in every lane and sets p in the leader only.

setmaxnreg changes no value, so it runs as a check of what the ISA requires of it: the count
is a multiple of 8 in 24..256, the warp executes it converged (it is .sync.aligned), and every
warp of a warpgroup executes the same sequence of setmaxnreg instructions (same action and
count, the k-th of one warp against the k-th of the others: warps may reach it at different
times under the executor's scheduling, so the check compares sequences, not instants).
"""
from __future__ import annotations

import numpy as np

from ...errors import LaunchError
from .opkinds import WARPSYNC, Op, builds
from .operands import reader, writer_pair


def _all(st, sel):
    return st.tidx if sel is None else sel


@builds("elect", kind=WARPSYNC, cls="warp")
def build_elect(ctx, ins, parts):
    d, p = writer_pair(ctx, ins.operands[0], "b32")
    m = reader(ctx, ins.operands[1], "b32")
    line = ins.line

    def run(st, sel):
        t = _all(st, sel)
        lane = st.lane[t].astype(np.int64)
        mask = np.broadcast_to(np.asarray(m(st, sel)).astype(np.uint32), t.shape)
        if not (((mask >> lane.astype(np.uint32)) & 1) == 1).all():
            raise LaunchError(f"CPU executor: elect.sync at PTX line {line}: a thread whose "
                              f"lane is not in the member mask executes it (undefined)")
        w = st.warp_id[t]
        leader = np.full(st.n_warps, 32, np.int64)
        np.minimum.at(leader, w, lane)
        lead = leader[w]
        d(st, sel, lead.astype(np.uint32))
        if p is not None:
            p(st, sel, lane == lead)
    return Op(run, WARPSYNC, mask=m)


_FULL = np.uint32(0xFFFFFFFF)


class _Log:
    """Per launch: the setmaxnreg sequence each warp has executed, (action, count) per step."""

    def __init__(self, st):
        self.heap = st.heap
        self.seq: dict[tuple, list] = {}     # (block, warp in block) -> steps


def _log(st) -> _Log:
    q = st.__dict__.get("_setmaxnreg")
    if q is None or q.heap is not st.heap:           # a new launch on a reused state
        q = st._setmaxnreg = _Log(st)
    return q


@builds("setmaxnreg", kind=WARPSYNC, cls="sync")
def build_setmaxnreg(ctx, ins, parts):
    ops = ins.operands
    if len(ops) != 1 or ops[0][0] != "imm" or "inc" not in parts and "dec" not in parts:
        ctx.error("setmaxnreg takes .inc or .dec and an immediate register count")
    n = int(ops[0][1][1])
    if n % 8 or not 24 <= n <= 256:
        ctx.error(f"setmaxnreg count {n}: must be a multiple of 8 in 24..256")
    step = ("inc" if "inc" in parts else "dec", n)
    line = ins.line

    def run(st, sel):
        t = _all(st, sel)
        w = st.warp_id[t]
        warps, first, counts = np.unique(w, return_index=True, return_counts=True)
        if (counts != st.warp_len[t[first]]).any():
            raise LaunchError(f"CPU executor: setmaxnreg at PTX line {line} needs every thread "
                              f"of the warp, converged (it is .sync.aligned)")
        log = _log(st)
        wpb = (st.tpb + 31) // 32
        for i in first.tolist():
            blk = int(st.blk[t[i]]) + st.b0          # the block's index in the whole launch
            local = int(st.tid_lin[t[i]]) >> 5
            seq = log.seq.setdefault((blk, local), [])
            k = len(seq)
            seq.append(step)
            for other in range(local - local % 4, min(local - local % 4 + 4, wpb)):
                mate = log.seq.get((blk, other))
                if mate is not None and len(mate) > k and mate[k] != step:
                    raise LaunchError(
                        f"CPU executor: setmaxnreg at PTX line {line}: warp {local} of a "
                        f"warpgroup runs setmaxnreg.{step[0]} {step[1]} where warp {other} of "
                        f"the same warpgroup ran setmaxnreg.{mate[k][0]} {mate[k][1]}; every "
                        f"warp of a warpgroup must execute the same setmaxnreg")
    return Op(run, WARPSYNC, mask=lambda st, sel: _FULL)

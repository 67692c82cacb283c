"""Warpgroup convergence for the scheduler: where a WGSYNC op (wgmma.fence, wgmma.mma_async,
wgmma.commit_group, wgmma.wait_group) may run, and what to say when it never can.

Why: these are `.sync.aligned` warpgroup instructions.  On a GPU all 128 threads of a warpgroup
(4 consecutive warps, the first one's index within its block a multiple of 4) must execute the
same instruction, but they may *arrive* at different times: the instruction waits for the
warpgroup as bar.sync waits for the block.  So a warp-dependent branch before a wgmma (`x if c
else y` lowers to one) is legal, and the executor's divergent loop parks the lanes that reach a
WGSYNC op (key WAITING, barpc = its pc, the bar.sync machinery at warpgroup scope) until all
128 lanes of their warpgroup are parked at that same pc; the op then runs once for the
warpgroup.  What a GPU leaves undefined is a LaunchError naming the PTX lines: partners parked
at a different warpgroup instruction, or partners that exited.

Warpgroups exist only when the block size is a multiple of 128 (else the op's own check,
wgmma._warpgroups, reports the geometry); then the lanes of warpgroup g of a batch are
exactly 128*g .. 128*g + 127 (tidx = block * tpb + linear tid), so a warpgroup's state is a
(groups, 128) gather of the scheduler's arrays, with no pass over the whole batch.
"""
from __future__ import annotations

import numpy as np

from ...errors import LaunchError
from .opkinds import WGSYNC

_L128 = np.arange(128, dtype=np.int64)


def whole(st, live) -> bool:
    """The uniform loop's check (all live lanes at one WGSYNC op): every warpgroup with a live
    lane is complete, so the op may run inline.  False sends the lanes to the divergent loop,
    whose `release` names the exited partners."""
    if st.tpb & 127:
        return True             # no warpgroups at all: the op itself reports the geometry
    return not (np.bincount(live >> 7) & 127).any()


def release(st, ops, op, m: int, key, barpc, act, waiting, exited) -> int:
    """The lanes `act` have just been parked at the WGSYNC op at pc `m` (key == `waiting`,
    barpc == m).  Run it for every warpgroup of theirs that is now parked there whole; returns
    how many lanes were released.  LaunchError when a partner of theirs is parked at another
    warpgroup instruction or has exited (`exited`): that warpgroup can never converge."""
    if st.tpb & 127:
        op.run(st, act)         # raises: the block is not made of warpgroups
        key[act] = m + 1
        return int(act.size)
    lanes = (np.unique(act >> 7)[:, None] << 7) + _L128
    k, p = key[lanes], barpc[lanes]
    parked = k == waiting
    done = (parked & (p == m)).all(axis=1)
    released = 0
    if done.any():
        rel = lanes[done].reshape(-1)
        op.run(st, rel)
        key[rel] = m + 1
        released = int(rel.size)
    if not done.all():
        rest = ~done
        at_wg = _is_wgsync(st, ops)[p[rest]]
        bad = ((k[rest] == exited) | (parked[rest] & (p[rest] != m) & at_wg)).any(axis=1)
        if bad.any():           # partners elsewhere (bar.sync, mbarrier, running) may come
            raise LaunchError(_stuck_message(st, ops, m, key, barpc, lanes[rest][bad][0],
                                             waiting, exited))
    return released


def stuck(st, ops, key, barpc, waiting, exited) -> str | None:
    """Nothing can run any more: the message for the first warpgroup parked at a WGSYNC op
    (its partners exited, or wait elsewhere for ever), or None when no lane waits at one."""
    lanes = np.flatnonzero(key == waiting)
    at = lanes[_is_wgsync(st, ops)[barpc[lanes]]]
    if at.size == 0:
        return None
    t = int(at[0])             # parked lanes imply whole warpgroups (release)
    group = ((t >> 7) << 7) + _L128
    return _stuck_message(st, ops, int(barpc[t]), key, barpc, group, waiting, exited)


def _is_wgsync(st, ops) -> np.ndarray:
    """pc -> whether the op there is a WGSYNC op (cached per decoded program)."""
    c = st.__dict__.get("_wgsync_pcs")
    if c is None or c[0] is not ops:
        c = st._wgsync_pcs = (ops, np.array([o.kind == WGSYNC for o in ops], bool))
    return c[1]


def _stuck_message(st, ops, m, key, barpc, group, waiting, exited) -> str:
    """Where the 128 lanes `group` of a warpgroup stuck at pc `m` are, by warp and PTX line."""
    k, p = key[group], barpc[group]
    here = (k == waiting) & (p == m)
    blk, _ = st.where(int(group[0]))
    warp0 = int(st.tid_lin[group[0]]) >> 5
    ins = ops[m].instr
    parts = []
    for w in range(0, group.size, 32):
        hw, kw, pw = here[w:w + 32], k[w:w + 32], p[w:w + 32]
        warp = warp0 + w // 32
        if hw.all():
            parts.append(f"warp {warp} waits there")
            continue
        what = []
        if hw.any():
            what.append(f"{int(hw.sum())} lanes wait there")
        if (kw == exited).any():
            what.append(f"{int((kw == exited).sum())} lanes exited")
        for q in np.unique(pw[(kw == waiting) & ~hw]).tolist():
            o = ops[q]
            what.append(f"{int(((kw == waiting) & (pw == q)).sum())} lanes wait at "
                        f"'{o.instr.opcode}' (PTX line {o.instr.line})")
        running = int(((kw != waiting) & (kw != exited)).sum())
        if running:
            what.append(f"{running} lanes are elsewhere")
        parts.append(f"warp {warp}: " + ", ".join(what))
    where = f"PTX line {ins.line}"
    if ins.py_line is not None:
        where += f" (Python line {ins.py_line})"
    return (f"warpgroup of block {blk} (warps {warp0}-{warp0 + 3}) in kernel '{st.code.name}' "
            f"can never converge at '{ins.opcode}' ({where}): " + "; ".join(parts)
            + ".  A wgmma instruction is .sync.aligned over the warpgroup: all 128 threads must "
            "reach the same one (they may arrive at different times), none may exit first")

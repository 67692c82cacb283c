"""Run an entry over every thread of a launch as numpy lanes, with SIMT min-PC scheduling.

Two modes.  *Uniform*: every live thread is at one scalar pc, so an instruction runs on all of
them (sel None, or the fixed array of not-exited lanes) with no masking work at all.
*Divergent*: per-thread pcs in `key`; each step runs the instruction at the minimum pc for
exactly the lanes there, and the scheduler drops back to uniform as soon as they reconverge.
`bar.sync` parks lanes until their whole block has arrived; a block that can never complete
its barrier is a LaunchError.  `mbarrier.try_wait` (MBARWAIT) parks the lanes whose phase has
not completed; they are polled again whenever no other lane can run (`_poll_mbarriers`), so a
consumer spinning on an mbarrier lets the producer that completes it run, and a wait that no
thread can ever complete is a LaunchError too.  The warpgroup instructions (wgmma.*, WGSYNC)
run inline when every live warpgroup is there whole; in the divergent loop their lanes park
like bar.sync lanes, per warpgroup instead of per block (wgsync.py).
"""
from __future__ import annotations

import numpy as np

from ...errors import LaunchError, MemoryFault
from .opkinds import BARRIER, BRANCH, EXIT, MBARWAIT, NORMAL, WARPSYNC, WGSYNC
from .memory import Fault, RowSpace
from .operands import DTYPES, storage_dtype
from .progress import BEAT
from . import printf, wgsync

EXITED = np.int64(1 << 62)
WAITING = np.int64((1 << 62) - 1)
BATCH_THREADS = 1 << 18
BATCH_BYTES = 1 << 29
STATE_CACHE_BYTES = 1 << 25     # keep batch states up to this size for the next launch


class State:
    """Registers, memories and thread geometry of one batch of blocks."""

    def __init__(self, code, heap, params, grid, block, b0, nb, shared_mem):
        self.code, self.heap, self.params = code, heap, params
        self.grid, self.block, self.b0, self.nb = grid, block, b0, nb
        tpb = block[0] * block[1] * block[2]
        self.tpb = tpb
        T = self.T = nb * tpb
        self.tidx = np.arange(T, dtype=np.int64)
        self.blk = self.tidx // tpb
        tl = self.tidx - self.blk * tpb
        self.tid_lin = tl
        self.lane = tl & 31
        wpb = (tpb + 31) // 32
        self.warp_id = self.blk * wpb + (tl >> 5)
        self.n_warps = nb * wpb
        self.warp_len = np.minimum(32, tpb - (tl >> 5) * 32)
        storage = {}
        for reg, _dt in code.slots:
            if reg not in storage:
                storage[reg] = np.zeros(T, storage_dtype(code.reg_types[reg]))
        self.V = [storage[reg].view(dt) for reg, dt in code.slots]
        self._storage = list(storage.values())
        self.nbytes = sum(a.nbytes for a in self._storage) + self.tidx.nbytes * 6
        self.shared = RowSpace("shared", nb, code.shared_static + shared_mem, code.shared_layout,
                               shared_mem)
        self.local = RowSpace("local", T, code.local_bytes, code.local_layout)
        self._special = {}
        self.clock = 0
        self.monitor = None     # instrument.Monitor during a checked launch's batch
        self.retired = 0        # warp instructions retired by this batch (progress.py)
        self.beat = None        # progress callback(retired), every BEAT instructions or so

    def reuse(self, heap, params):
        """Start another launch of the same geometry on this state: fresh memories and
        registers, without paying for new (page-faulting) allocations."""
        self.heap, self.params = heap, params
        self.retired = 0
        for a in self._storage:
            a.fill(0)
        self.shared.buf.fill(0)
        self.local.buf.fill(0)
        return self

    def special(self, name):
        v = self._special.get(name)
        if v is not None:
            return v
        base, _, comp = name.partition(".")
        k = "xyz".index(comp) if comp else 0
        bx, by, _bz = self.block
        gx, gy, _gz = self.grid
        tl = self.tid_lin
        if base == "%tid":
            v = (tl % bx, (tl // bx) % by, tl // (bx * by))[k]
        elif base == "%ntid":
            v = np.full(self.T, self.block[k])
        elif base == "%nctaid":
            v = np.full(self.T, self.grid[k])
        elif base == "%ctaid":
            lb = self.blk + self.b0
            v = (lb % gx, (lb // gx) % gy, lb // (gx * gy))[k]
        elif base == "%laneid":
            v = self.lane
        elif base == "%warpid":
            v = tl >> 5
        elif base == "%nwarpid":
            v = np.full(self.T, (self.tpb + 31) // 32)
        elif base.startswith("%lanemask"):
            one = np.uint64(1)
            lane = self.lane.astype(np.uint64)
            eq = one << lane
            v = {"%lanemask_eq": eq, "%lanemask_lt": eq - one, "%lanemask_le": (eq << one) - one,
                 "%lanemask_gt": ~((eq << one) - one), "%lanemask_ge": ~(eq - one)}[base]
            v = (v & np.uint64(0xFFFFFFFF))
        elif base in ("%clock", "%clock64", "%globaltimer"):
            self.clock += 1000
            return np.full(self.T, self.clock, np.uint64 if base != "%clock" else np.uint32)
        else:   # %smid, %nsmid, %gridid
            v = np.zeros(self.T)
        v = np.asarray(v).astype(np.uint32)
        self._special[name] = v
        return v

    def param_as(self, name, dt):
        v = self.params[name]
        if v.dtype == dt:
            return v
        if v.dtype.itemsize == dt.itemsize:
            return np.array(v).view(dt)[()]
        u = np.array(v).view(f"u{v.dtype.itemsize}")
        return u.astype(f"u{dt.itemsize}").view(dt)[()]

    def flush_print(self, text):
        printf.emit(text)

    def where(self, lane_t):
        """Batch lane -> ((bx, by, bz), (tx, ty, tz))."""
        b = int(self.blk[lane_t]) + self.b0
        gx, gy, _ = self.grid
        tl = int(self.tid_lin[lane_t])
        bx, by, _ = self.block
        return (b % gx, (b // gx) % gy, b // (gx * gy)), (tl % bx, (tl // bx) % by, tl // (bx * by))


def _guard(st, op, sel):
    g = st.V[op.gslot] if sel is None else st.V[op.gslot][sel]
    if op.gneg:
        g = ~g
    if sel is None:
        return None if g.all() else np.flatnonzero(g)
    return sel[g]


def run(st: State):
    """Run one batch to completion (raises MemoryFault / LaunchError).  `st.retired` counts the
    warp instructions (an instruction of the uniform loop counts every warp of the batch); at
    branches, every ~BEAT instructions, `st.beat(st.retired)` reports progress."""
    ops = st.code.ops
    op, sel = None, None
    n = 0                  # uniform-mode instructions not yet added to st.retired
    try:
        pc, live = 0, None
        while True:
            # ---- uniform mode -----------------------------------------------------------------
            while True:
                op = ops[pc]
                n += 1
                sel = live
                if op.gslot is not None:
                    sel = _guard(st, op, live)
                kind = op.kind
                if kind <= NORMAL:               # NORMAL, or WARPSYNC on a converged warp
                    if sel is None or sel.size:
                        op.run(st, sel)
                    pc += 1
                    continue
                partial = sel is not live and (sel is None or live is None or
                                               sel.size != live.size)
                if op.probe is not None and not (partial and (kind == BARRIER or (
                        kind == BRANCH and sel.size))):      # else the divergent loop probes
                    op.probe(st, live, sel)
                if kind == BRANCH:
                    if n >= BEAT:
                        st.retired += n * st.n_warps
                        n = 0
                        if st.beat is not None:
                            st.beat(st.retired)
                    if not partial:
                        pc = op.target
                    elif sel.size == 0:
                        pc += 1
                    else:
                        break                      # some lanes branch: diverge
                elif kind == EXIT:
                    if not partial:
                        st.retired += n * st.n_warps
                        return
                    if sel.size:
                        base = st.tidx if live is None else live
                        live = np.setdiff1d(base, sel, assume_unique=True)
                    pc += 1
                elif kind == MBARWAIT:
                    if partial or not op.run(st, sel).all():
                        break                      # some lanes must wait: the divergent loop
                    pc += 1
                elif kind == BARRIER:
                    if partial and sel.size:
                        break
                    if live is not None and not partial:
                        _check_uniform_barrier(st, live, op)
                    if op.run is not None:       # bar.red: the block's reduction
                        op.run(st, sel)
                    pc += 1
                elif kind == WGSYNC:
                    if partial and sel.size or live is not None and not wgsync.whole(st, live):
                        break                      # a warpgroup is not all here
                    if not partial:
                        op.run(st, sel)
                    pc += 1
            # ---- divergent mode ---------------------------------------------------------------
            st.retired += n * st.n_warps
            n = 0
            key = np.full(st.T, EXITED, np.int64)
            key[st.tidx if live is None else live] = pc
            res = _divergent(st, ops, key)
            if res is None:
                return
            pc, live = res
    except Fault as f:
        raise _memory_fault(st, op, sel, f) from None


def _divergent(st, ops, key):
    """Per-thread pcs until all threads exit (None) or reconverge ((pc, live))."""
    T = st.T
    n_exited = int((key == EXITED).sum())
    n_wait = 0
    barpc = np.zeros(T, np.int64)
    wmask = np.zeros(st.n_warps, np.uint64)     # member mask of the warp-sync op being waited on
    first = True        # the uniform loop handed over this very instruction: run it
    due = st.retired + BEAT * 32
    while True:
        m = key.min()
        if m >= WAITING:
            if n_wait:
                released = _poll_mbarriers(st, ops, key, barpc)
                if released:
                    n_wait -= released
                    continue
            if n_wait and _force_warp_sync(st, ops, key, barpc):
                n_wait = int((key == WAITING).sum())
                continue
            if n_wait:
                _deadlock(st, key, barpc, ops)
            return None
        sel = np.flatnonzero(key == m)
        if n_wait == 0 and sel.size + n_exited == T and not first:
            return int(m), (None if sel.size == T else sel)
        first = False
        op = ops[m]
        act = sel if op.gslot is None else _guard(st, op, sel)
        kind = op.kind
        st.retired += (sel.size + 31) >> 5     # the warps (at most) that issue it
        if kind == BRANCH and st.retired >= due:
            due = st.retired + BEAT * 32
            if st.beat is not None:
                st.beat(st.retired)
        try:
            if kind == NORMAL:
                if act.size:
                    op.run(st, act)
                key[sel] = m + 1
            elif kind == BRANCH:
                if op.probe is not None:
                    op.probe(st, sel, act)
                key[sel] = m + 1
                key[act] = op.target
            elif kind == WARPSYNC:
                key[sel] = m + 1
                if act.size:
                    key[act] = WAITING
                    barpc[act] = m
                    n_wait += act.size
                    mv = np.broadcast_to(np.asarray(op.mask(st, act)).astype(np.uint64), act.shape)
                    wmask[st.warp_id[act]] = mv
                    n_wait -= _release_warps(st, op, key, barpc, wmask, m, np.unique(st.warp_id[act]))
            elif kind == EXIT:
                if op.probe is not None:
                    op.probe(st, sel, act)
                key[sel] = m + 1
                key[act] = EXITED
                n_exited += act.size
            elif kind == WGSYNC:
                key[sel] = m + 1
                if act.size:
                    key[act] = WAITING
                    barpc[act] = m
                    n_wait += act.size - wgsync.release(st, ops, op, m, key, barpc, act,
                                                        WAITING, EXITED)
            elif kind == MBARWAIT:
                key[sel] = m + 1
                if act.size:
                    wait = act[~op.run(st, act)]
                    if wait.size:
                        key[wait] = WAITING
                        barpc[wait] = m
                        n_wait += wait.size
            else:
                key[sel] = m + 1
                if act.size:
                    key[act] = WAITING
                    barpc[act] = m
                    n_wait += act.size
                    at = (key == WAITING) & (barpc == m)
                    cnt = np.bincount(st.blk[at], minlength=st.nb)
                    done = np.flatnonzero(cnt == st.tpb)
                    if done.size:
                        rel = at & np.isin(st.blk, done)
                        if op.probe is not None:
                            op.probe(st, np.flatnonzero(rel), None)
                        if op.run is not None:   # bar.red: the block's reduction
                            op.run(st, np.flatnonzero(rel))
                        key[rel] = m + 1
                        n_wait -= int(rel.sum())
        except Fault as f:
            raise _memory_fault(st, op, act, f) from None


def _lane_bits(st, lanes, weights_mask=None):
    bits = (np.uint64(1) << st.lane[lanes].astype(np.uint64)).astype(np.float64)
    return np.bincount(st.warp_id[lanes], weights=bits, minlength=st.n_warps).astype(np.uint64)


def _release_warps(st, op, key, barpc, wmask, m, warps, force=False):
    """Run a warp-sync op for the warps among `warps` whose not-exited member lanes have all
    arrived at pc m; returns how many lanes were released."""
    at = np.flatnonzero((key == WAITING) & (barpc == m))
    here = _lane_bits(st, at)
    alive = _lane_bits(st, np.flatnonzero(key != EXITED))
    if force:                   # wmask is None: run with whoever is there
        ready = warps
    else:
        need = alive & wmask
        ready = warps[(need[warps] & ~here[warps]) == 0]
    if ready.size == 0:
        return 0
    lanes = at[np.isin(st.warp_id[at], ready)]
    if lanes.size:
        op.run(st, lanes)
        key[lanes] = m + 1
    return int(lanes.size)


def _force_warp_sync(st, ops, key, barpc) -> bool:
    """Nothing can run but lanes wait at a warp-sync op whose mask names lanes that will never
    come: run it with the lanes that are there (the GPU leaves this undefined)."""
    waiting = np.flatnonzero(key == WAITING)
    for pc in np.unique(barpc[waiting]):
        op = ops[int(pc)]
        if op.kind == WARPSYNC:
            lanes = waiting[barpc[waiting] == pc]
            _release_warps(st, op, key, barpc, None, int(pc), np.unique(st.warp_id[lanes]), True)
            return True
    return False


def _poll_mbarriers(st, ops, key, barpc) -> int:
    """Nothing else can run: poll the lanes parked at mbarrier.try_wait again (in-flight
    copies land on the barriers they poll); returns how many saw their phase complete."""
    waiting = np.flatnonzero(key == WAITING)
    released = 0
    for pc in np.unique(barpc[waiting]).tolist():
        op = ops[pc]
        if op.kind != MBARWAIT:
            continue
        lanes = waiting[barpc[waiting] == pc]
        done = lanes[op.run(st, lanes)]
        key[done] = pc + 1
        released += done.size
    return released


def _check_uniform_barrier(st, live, op):
    """All live lanes are at this barrier; blocks with some exited lanes can never finish."""
    alive = np.bincount(st.blk[live], minlength=st.nb)
    bad = np.flatnonzero((alive > 0) & (alive < st.tpb))
    if bad.size:
        b = int(bad[0])
        lane = int(np.flatnonzero(st.blk == b)[0])
        blk, _ = st.where(lane)
        raise LaunchError(
            f"bar.sync reached by only part of block {blk} in kernel '{st.code.name}' at PTX "
            f"line {op.instr.line}: {int(alive[b])} of {st.tpb} threads arrived, the other "
            f"{st.tpb - int(alive[b])} exited")


def _deadlock(st, key, barpc, ops):
    msg = wgsync.stuck(st, ops, key, barpc, WAITING, EXITED)
    if msg is not None:
        raise LaunchError(msg)
    waiting = key == WAITING
    lanes = np.flatnonzero(waiting)
    at_mbar = np.array([ops[int(p)].kind == MBARWAIT for p in barpc[lanes]], bool)
    if at_mbar.any():
        from .mbarrier import describe_waiters
        raise LaunchError(f"mbarrier deadlock in kernel '{st.code.name}': "
                          + describe_waiters(st, ops, lanes[at_mbar], barpc[lanes[at_mbar]])
                          + (f"; {int((~at_mbar).sum())} other thread(s) wait at bar.sync"
                             if (~at_mbar).any() else ""))
    b = int(st.blk[np.flatnonzero(waiting)[0]])
    inb = st.blk == b
    arrived = int((waiting & inb).sum())
    exited = int(((key == EXITED) & inb).sum())
    lines = sorted({ops[int(p)].instr.line for p in np.unique(barpc[waiting & inb])})
    lane = int(np.flatnonzero(inb)[0])
    blk, _ = st.where(lane)
    raise LaunchError(
        f"bar.sync reached by only part of block {blk} in kernel '{st.code.name}' "
        f"(PTX line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}): "
        f"{arrived} of {st.tpb} threads wait, {exited} exited"
        + (", threads wait at different barriers" if len(lines) > 1 else ""))


def _memory_fault(st, op, sel, f: Fault) -> MemoryFault:
    t = f.lane if sel is None else int(sel[f.lane])
    blk, thr = st.where(t)
    ins = op.instr
    where = f"PTX line {ins.line}"
    if ins.py_line is not None:
        where += f" (Python line {ins.py_line})"
    if f.space == "trap":
        msg = (f"{f.nearest} (kernel '{st.code.name}' at {where}, block {blk} thread {thr}): "
               f"a run-time check failed and the kernel executed 'trap' (on a GPU the launch "
               f"fails and the CUDA context is lost)")
        return MemoryFault(msg, kernel=st.code.name, ptx_line=ins.line, source_line=ins.py_line,
                           block=blk, thread=thr, nearest=f.nearest)
    addr = f"0x{f.address:x}" if f.space == "global" else str(f.address)
    msg = (f"out-of-bounds {f.space} access in kernel '{st.code.name}' at {where}: "
           f"'{ins.opcode}' by block {blk} thread {thr} at address {addr}: {f.nearest}")
    return MemoryFault(msg, kernel=st.code.name, ptx_line=ins.line, source_line=ins.py_line,
                       block=blk, thread=thr, address=f.address, space=f.space,
                       nearest=f.nearest)


def batch_blocks(code, tpb: int, n_blocks: int, shared_mem: int) -> int:
    """Blocks per batch: at most BATCH_THREADS lanes and ~BATCH_BYTES of state."""
    per_thread = code.__dict__.get("thread_bytes")
    if per_thread is None:
        per_thread = sum(max(DTYPES[t].itemsize, 2) if t != "pred" else 1
                         for t in code.reg_types.values()) + code.local_bytes + 64
        code.thread_bytes = per_thread
    per_block = per_thread * tpb + code.shared_static + shared_mem
    by_threads = max(1, BATCH_THREADS // tpb)
    by_bytes = max(1, BATCH_BYTES // max(per_block, 1))
    return max(1, min(n_blocks, by_threads, by_bytes))

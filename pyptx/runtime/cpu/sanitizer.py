"""The sanitizer of a checked launch: shadow memory for data races and uninitialised reads.

Every access arrives from the memory layer's choke point (`instrument.track_access`) as the
active lanes and the byte indices they touch.  Per byte the shadow keeps the last write and two
reads (the first read that no later read is ordered after, and the newest read).

Ordering (what makes two accesses *not* a race):
* shared memory: a completed `bar.sync` or `bar.red` (syncthreads_count/and/or: a full barrier
  plus a reduction) of the block clears that block's shadow (everything before it is ordered
  before everything after).  Inside a barrier interval, threads of one
  warp are ordered only through warp-synchronising ops (bar.warp.sync, shfl.sync, vote.sync):
  each thread carries a vector clock over the lanes of its warp, merged at every such op.
  Threads of different warps are never ordered without a barrier.
* global memory: only accesses of *different blocks* are checked; nothing orders them inside
  one launch.
* two atomics never race.

Limits: two reads per byte are remembered, so a race with a third, older reader can go
unreported; the shadow costs ~40 bytes per byte of global memory (sanitize small problems).
`init`: a read (ld or atomic) of a shared or local byte that no thread wrote in this launch.
"""
from __future__ import annotations

import re

import numpy as np

from ...errors import SanitizerError
from .memory import GLOBAL_BASE, _describe

_LINE = re.compile(r"//\s*line\s+(\d+):\s?(.*)")


class _Rec:
    """One access record per byte: who (lane or global thread id), when, where (site)."""

    def __init__(self, n, who_dtype):
        self.who = np.full(n, -1, who_dtype)
        self.time = np.zeros(n, np.int32)
        self.site = np.zeros(n, np.int32)
        self.atom = np.zeros(n, np.bool_)

    def clear(self, lo, hi):
        self.who[lo:hi] = -1


def _bytes(idx, lanes, nbytes):
    if nbytes == 1:
        return idx, lanes
    return (idx[:, None] + np.arange(nbytes)).ravel(), np.repeat(lanes, nbytes)


def _dim3(lin, dims):
    x, y, _ = dims
    return (lin % x, (lin // x) % y, lin // (x * y))


class Sanitizer:
    def __init__(self, code, heap, race, init, ptx_text, grid, block):
        self.code, self.heap, self.race, self.init = code, heap, race, init
        self.grid, self.block = grid, block
        self.tpb = block[0] * block[1] * block[2]
        src = code.__dict__.get("py_source")
        if src is None:
            src = code.py_source = {int(m.group(1)): m.group(2).strip()
                                    for m in _LINE.finditer(ptx_text)}
        self.py_source = src
        if race:
            n = heap.buf.size
            self.g = [_Rec(n, np.int64) for _ in range(3)]        # write, sticky read, newest read

    # ---- per batch ---------------------------------------------------------------------------

    def start_batch(self, st) -> None:
        n = st.shared.buf.size
        self.inflight = None        # shared bytes an async copy (TMA) is still writing: its line
        if self.race:
            self.s = [_Rec(n, np.int32) for _ in range(3)]
            self.vc = np.zeros((st.T, 32), np.int32)             # vector clock over warp lanes
            self.vc[st.tidx, st.lane] = 1
        if self.init:
            self.s_written = np.zeros(n, np.bool_)
            self.l_written = np.zeros(st.local.buf.size, np.bool_)

    def barrier(self, st, lanes) -> None:
        if not self.race:
            return
        blocks = np.arange(st.nb) if lanes is None else np.unique(st.blk[lanes])
        stride = st.shared.stride
        if blocks.size == st.nb:                     # the whole batch passed the barrier
            for rec in self.s:
                rec.who.fill(-1)
            return
        for b in blocks:
            for rec in self.s:
                rec.clear(int(b) * stride, (int(b) + 1) * stride)

    def warp_sync(self, st, sel) -> None:
        """The lanes in `sel` executed a warp-synchronising op together: merge their clocks per
        warp, then tick each one's own entry."""
        if not self.race:
            return
        lanes = st.tidx if sel is None else sel
        if lanes.size == 0:
            return
        w = st.warp_id[lanes]
        starts = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])
        merged = np.maximum.reduceat(self.vc[lanes], starts, axis=0)
        group = np.cumsum(np.r_[False, w[1:] != w[:-1]])
        self.vc[lanes] = merged[group]
        self.vc[lanes, st.lane[lanes]] += 1

    # ---- accesses ----------------------------------------------------------------------------

    def access(self, st, space, sel, idx, nbytes, access, site) -> None:
        lanes = st.tidx if sel is None else sel
        if lanes.size == 0:
            return
        if space == "global":
            if self.race:
                self._global(st, *_bytes(idx, lanes, nbytes), access, site)
            return
        b, ln = _bytes(idx, lanes, nbytes)
        if space == "shared" and self.inflight is not None and self.race:
            hit = np.flatnonzero(self.inflight[b])
            if hit.size:
                self._async_race(st, int(b[hit[0]]), int(ln[hit[0]]), site, access,
                                 int(self.inflight[b[hit[0]]]))
        written = None
        if self.init:
            written = self.s_written if space == "shared" else self.l_written
        if self.init and access != "write":
            unw = np.flatnonzero(~written[b])
            if unw.size:
                k = unw[0]
                self._uninitialized(st, space, int(b[k]), int(ln[k]), site)
        if space == "shared" and self.race:
            self._shared(st, b, ln, access, site)
        if self.init and access != "read":
            written[b] = True

    def _ordered(self, st, a, a_time, b):
        """Is the access of lane a (at a_time) ordered before lane b's current point?"""
        same_warp = st.warp_id[a] == st.warp_id[b]
        return same_warp & (self.vc[b, st.lane[a]] >= a_time)

    def _conflict(self, st, rec, b, ln, atomic):
        other = rec.who[b]
        c = (other >= 0) & (other != ln)
        if atomic:
            c &= ~rec.atom[b]
        k = np.flatnonzero(c)
        if k.size:
            k = k[~self._ordered(st, other[k], rec.time[b[k]], ln[k])]
        return int(k[0]) if k.size else None

    def _shared(self, st, b, ln, access, site):
        w, r1, r2 = self.s
        atomic = access == "atomic"
        checks = [(w, "write")] + ([(r1, "read"), (r2, "read")] if access != "read" else [])
        for rec, what in checks:
            k = self._conflict(st, rec, b, ln, atomic)
            if k is not None:
                what = "atomic" if what == "write" and rec.atom[b[k]] else what
                self._race(st, "shared", int(b[k]), int(ln[k]), site, access,
                           int(rec.who[b[k]]), int(rec.site[b[k]]), what)
        if access == "write":
            self._same_instruction(st, "shared", b, ln, ln, site)
        now = self.vc[ln, st.lane[ln]]
        if access != "read":
            w.who[b], w.time[b], w.site[b], w.atom[b] = ln, now, site, atomic
            r1.who[b] = -1
            r2.who[b] = -1
            return
        r2.who[b], r2.time[b], r2.site[b] = ln, now, site         # newest (highest lane) read
        old = r1.who[b]
        keep = (old >= 0) & (old != ln)
        k = np.flatnonzero(keep)
        if k.size:
            keep[k] = ~self._ordered(st, old[k], r1.time[b[k]], ln[k])
        put = np.flatnonzero(~keep)[::-1]                          # lowest lane wins
        r1.who[b[put]], r1.time[b[put]], r1.site[b[put]] = ln[put], now[put], site

    def _global(self, st, b, ln, access, site):
        w, r1, r2 = self.g
        blk = st.blk[ln] + st.b0
        gid = blk * self.tpb + st.tid_lin[ln]
        atomic = access == "atomic"
        checks = [(w, "write")] + ([(r1, "read"), (r2, "read")] if access != "read" else [])
        for rec, what in checks:
            other = rec.who[b]
            c = (other >= 0) & (other // self.tpb != blk)
            if atomic:
                c &= ~rec.atom[b]
            k = np.flatnonzero(c)
            if k.size:
                k = int(k[0])
                what = "atomic" if what == "write" and rec.atom[b[k]] else what
                self._race(st, "global", int(b[k]), int(ln[k]), site, access,
                           int(other[k]), int(rec.site[b[k]]), what, other_is_gid=True)
        if access == "write":
            self._same_instruction(st, "global", b, ln, blk, site)
        if access != "read":
            w.who[b], w.site[b], w.atom[b] = gid, site, atomic
            r1.who[b] = -1
            r2.who[b] = -1
            return
        r2.who[b], r2.site[b] = gid, site
        old = r1.who[b]
        put = np.flatnonzero((old < 0) | (old // self.tpb == blk))[::-1]
        r1.who[b[put]], r1.site[b[put]] = gid[put], site

    def _same_instruction(self, st, space, b, ln, owner, site):
        """Two threads (of different owners: lanes, or blocks for global) writing one byte in
        the same instruction."""
        if b.size < 2:
            return
        o = np.argsort(b, kind="stable")
        bs, own = b[o], owner[o]
        d = np.flatnonzero((bs[1:] == bs[:-1]) & (own[1:] != own[:-1]))
        if d.size:
            i, j = o[d[0] + 1], o[d[0]]
            other = int(ln[j])
            if space == "global":
                other = int((st.blk[other] + st.b0) * self.tpb + st.tid_lin[other])
            self._race(st, space, int(b[i]), int(ln[i]), site, "write", other, site, "write",
                       other_is_gid=space == "global")

    # ---- asynchronous copies (TMA, runtime/cpu/tma.py) -----------------------------------------

    def async_issued(self, st, dst, line: int) -> None:
        """A bulk tensor copy will write shared bytes `dst` (buffer indices) when its mbarrier
        phase completes: until then any access of them is a race."""
        if self.inflight is None:
            self.inflight = np.zeros(st.shared.buf.size, np.int32)
        self.inflight[dst] = line

    def async_landed(self, st, dst) -> None:
        """Its bytes landed because a thread waited on its mbarrier: they are written, and the
        wait orders them before that thread's (and, through the phase, everyone's) reads."""
        if self.inflight is not None:
            self.inflight[dst] = 0
        if self.init:
            self.s_written[dst] = True
        if self.race:
            for rec in self.s:
                rec.who[dst] = -1

    # ---- reports -----------------------------------------------------------------------------

    def _async_race(self, st, byte, lane, site, access, copy_line):
        blk, thr = st.where(lane)
        ins, here = self._where(site)
        address, what = self._describe(st, "shared", byte)
        msg = (f"data race on shared memory in kernel '{self.code.name}' ({what}): "
               f"{access} by block {blk} thread {thr} at {here} of bytes that the bulk tensor "
               f"copy (TMA) issued at PTX line {copy_line} is still writing; wait for its "
               f"mbarrier phase first (pyptx.mbarrier_wait(bars, i, parity))")
        raise SanitizerError(
            msg, kind="race", kernel=self.code.name, ptx_line=ins.line,
            source_line=ins.py_line, block=blk, thread=thr, address=address, space="shared",
            nearest=what, other_block=blk, other_thread=None, other_ptx_line=copy_line,
            other_source_line=None)

    def _where(self, site):
        ins = self.code.sites[site]
        text = f"PTX line {ins.line} ({ins.opcode})"
        if ins.py_line is not None:
            src = self.py_source.get(ins.py_line)
            text += f", Python line {ins.py_line}" + (f": {src}" if src else "")
        return ins, text

    def _describe(self, st, space, byte):
        if space == "global":
            return byte + GLOBAL_BASE, _describe(byte + GLOBAL_BASE, self.heap.regions,
                                                 "parameter")
        rows = st.shared if space == "shared" else st.local
        off = byte % rows.stride
        syms = list(rows.symbols)
        if not any(o <= off < o + s for o, s, _ in syms):
            start = max([o + s for o, s, _ in syms], default=0)
            syms.append((start, rows.row - start, "dynamic shared memory" if space == "shared"
                         else "local memory"))
        return off, _describe(off, syms, f"{space} array")

    def _race(self, st, space, byte, lane, site, access, other, other_site, other_access,
              other_is_gid=False):
        blk, thr = st.where(lane)
        if other_is_gid:
            ob, ot = divmod(other, self.tpb)
            oblk, othr = _dim3(ob, self.grid), _dim3(ot, self.block)
        else:
            oblk, othr = st.where(other)
        ins, here = self._where(site)
        oins, there = self._where(other_site)
        address, what = self._describe(st, space, byte)
        verb = {"read": "read", "write": "write", "atomic": "atomic"}
        if space == "global":
            hint = ("threads of different blocks are never ordered inside one launch: use "
                    "atomics, give each block its own output, or split the work into two "
                    "launches")
        elif st.warp_id[lane] == st.warp_id[other]:
            hint = ("threads of one warp are not ordered by running in lockstep: put "
                    "pyptx.syncwarp() (or pyptx.syncthreads()) between the two accesses")
        else:
            hint = "put pyptx.syncthreads() between the two accesses"
        msg = (f"data race on {space} memory in kernel '{self.code.name}' ({what}): "
               f"{verb[access]} by block {blk} thread {thr} at {here}; conflicts with "
               f"{verb[other_access]} by block {oblk} thread {othr} at {there}, with nothing "
               f"ordering them; {hint}")
        raise SanitizerError(
            msg, kind="race", kernel=self.code.name, ptx_line=ins.line,
            source_line=ins.py_line, block=blk, thread=thr, address=address, space=space,
            nearest=what, other_block=oblk, other_thread=othr, other_ptx_line=oins.line,
            other_source_line=oins.py_line)

    def _uninitialized(self, st, space, byte, lane, site):
        blk, thr = st.where(lane)
        ins, here = self._where(site)
        address, what = self._describe(st, space, byte)
        msg = (f"read of uninitialized {space} memory in kernel '{self.code.name}' ({what}): "
               f"block {blk} thread {thr} at {here} reads a byte that no thread wrote in this "
               f"launch; write it first" + (" and put pyptx.syncthreads() between the write "
                                            "and the read" if space == "shared" else ""))
        raise SanitizerError(
            msg, kind="uninitialized", kernel=self.code.name, ptx_line=ins.line,
            source_line=ins.py_line, block=blk, thread=thr, address=address, space=space,
            nearest=what)

"""Tensor-core and async-copy instructions on the CPU executor: `mma.sync` (m16n8k16, f16/bf16
inputs, f32 accumulators), `ldmatrix` (m8n8 b16, x1/x2/x4, optional .trans), `cp.async`
(+ commit_group / wait_group) and the bf16 <-> f32 conversions.

Fragment layouts are the PTX ISA's (docs/tensor-cores.md draws them).  With groupID g = lane >> 2
and t = lane & 3:

    A 16x16 (row):  a{k} holds A[g + 8*(k & 1), 2t + 8*(k >> 1) + {0, 1}]   (k = 0..3)
    B 16x8  (col):  b{k} holds B[2t + 8k + {0, 1}, g]                        (k = 0..1)
    C/D 16x8 f32:   c{k} is    C[g + 8*(k >> 1), 2t + (k & 1)]               (k = 0..3)

`mma` accumulates exactly as documented there: every product of two f16/bf16 values is exact
in float64, and `c + p0 + p1 + ... + p15` (k ascending) is summed in float64 and rounded once to
f32.  A GPU's internal order is not specified, so GPU results may differ in the last bits.

Both warp-collective instructions need all 32 lanes of a warp, converged (`.sync.aligned`);
otherwise they are a LaunchError.  `cp.async` copies are deferred, as on the GPU: addresses are
checked when the instruction issues, bytes move when a `cp.async.wait_group` retires the group
(so a kernel that reads the tile before waiting sees stale shared memory here too).  With a
src-size operand only that many source bytes are checked and read; the rest of the destination
is written as zeros.
"""
from __future__ import annotations

import numpy as np

from ...bfloat16 import from_bf16 as bf16_to_f32, to_bf16 as f32_to_bf16
from ...errors import LaunchError
from .memory import Fault
from .memops import address, locate
from .opkinds import WARPSYNC, Op, builds
from .tma import build_bulk
from .operands import reader, writer

_FULL = np.uint32(0xFFFFFFFF)
_LANE = np.arange(32)
_G, _T = _LANE >> 2, _LANE & 3


# ---- bf16 -------------------------------------------------------------------------------------

def build_cvt_bf16(ctx, ins, dst: str, src: str, rnd):
    """cvt.rn.bf16.f32 and cvt.f32.bf16 (the only bf16 conversions the backend emits)."""
    d = writer(ctx, ins.operands[0], dst)
    if (dst, src) == ("bf16", "f32"):
        if rnd not in (None, "rn"):
            ctx.error("only round-to-nearest conversions to bf16 are supported")
        a = reader(ctx, ins.operands[1], "f32")
        return lambda st, sel: d(st, sel, f32_to_bf16(a(st, sel)))
    if (dst, src) == ("f32", "bf16"):
        a = reader(ctx, ins.operands[1], "bf16")
        return lambda st, sel: d(st, sel, bf16_to_f32(a(st, sel)))
    ctx.error(f"cvt between {src} and {dst} is not supported")


def build_cvt_x2(ctx, ins, parts):
    """cvt.rn.{f16x2,bf16x2}.f32 d, a, b: a rounded into the high half of d, b into the low."""
    if "rn" not in parts or parts[-1] != "f32" or len(ins.operands) != 3:
        ctx.error("only cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32 d, a, b are supported")
    bf = "bf16x2" in parts
    d = writer(ctx, ins.operands[0], "b32")
    a, b = (reader(ctx, op, "f32") for op in ins.operands[1:])

    def half(x):
        x = np.asarray(x, np.float32)
        if bf:
            return f32_to_bf16(x).astype(np.uint32)
        with np.errstate(over="ignore"):
            return x.astype(np.float16).view(np.uint16).astype(np.uint32)

    def run(st, sel):
        hi, lo = np.broadcast_arrays(half(a(st, sel)), half(b(st, sel)))
        d(st, sel, lo | (hi << np.uint32(16)))
    return run


# ---- warps ------------------------------------------------------------------------------------

def _warp_lanes(st, sel, what: str, line: int) -> np.ndarray:
    """The executing lanes as a (warps, 32) array in lane order; LaunchError unless every warp
    involved is complete and converged."""
    t = st.tidx if sel is None else np.asarray(sel)
    if t.size % 32 == 0:
        tw = t.reshape(-1, 32)
        wid = st.warp_id[tw]
        if (st.lane[tw] == _LANE).all() and (wid == wid[:, :1]).all():
            return tw
    raise LaunchError(f"CPU executor: {what} at PTX line {line} needs all 32 lanes of a warp, "
                      f"converged (it is a .sync.aligned warp-collective instruction); the block "
                      f"size must be a multiple of 32 and no lane may have exited or branched "
                      f"away")


def _regs(ctx, vec, typ):
    if vec[0] != "vec":
        ctx.error("expected a {...} register list")
    return [reader(ctx, ("reg", r), typ) for r in vec[1]]


def _halves(words, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """u32 words -> (low, high) 16-bit halves as float64 values of f16 or bf16."""
    w = np.asarray(words, np.uint32)
    lo, hi = (w & 0xFFFF).astype(np.uint16), (w >> 16).astype(np.uint16)
    if kind == "bf16":
        return bf16_to_f32(lo).astype(np.float64), bf16_to_f32(hi).astype(np.float64)
    return lo.view(np.float16).astype(np.float64), hi.view(np.float16).astype(np.float64)


def _mma_class(parts) -> tuple:
    """Tensor-core op; m16n8k16 is 2*m*n*k flops per warp, counted as spread over 32 lanes."""
    shape = next((p for p in parts if p.startswith("m") and "n" in p and "k" in p), "")
    m, _, rest = shape[1:].partition("n")
    n, _, k = rest.partition("k")
    return "tensor", (2 * int(m) * int(n) * int(k) // 32 if m and n and k else 0)


@builds("mma", kind=WARPSYNC, cls=_mma_class)
def build_mma(ctx, ins, parts):
    if "m16n8k16" not in parts or parts[-4:] not in (["f32", "f16", "f16", "f32"],
                                                      ["f32", "bf16", "bf16", "f32"]):
        ctx.error("only mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 is "
                  "supported")
    if "row" not in parts or "col" not in parts:
        ctx.error("mma m16n8k16 needs the .row.col layout")
    kind = parts[-3]
    dvec, avec, bvec, cvec = ins.operands
    if dvec[0] != "vec" or len(dvec[1]) != 4:
        ctx.error("mma needs four destination registers")
    ds = [writer(ctx, ("reg", r), "f32") for r in dvec[1]]
    ar, br, cr = _regs(ctx, avec, "b32"), _regs(ctx, bvec, "b32"), _regs(ctx, cvec, "f32")
    if (len(ar), len(br), len(cr)) != (4, 2, 4):
        ctx.error("mma m16n8k16 takes 4 A, 2 B and 4 C registers")
    line = ins.line

    def run(st, sel):
        tw = _warp_lanes(st, sel, "mma.sync", line)
        nw = tw.shape[0]
        A = np.empty((nw, 16, 16))
        B = np.empty((nw, 16, 8))
        C = np.empty((nw, 16, 8))
        for k in range(4):
            lo, hi = _halves(np.broadcast_to(ar[k](st, sel), (tw.size,)).reshape(nw, 32), kind)
            row, col = _G + 8 * (k & 1), 2 * _T + 8 * (k >> 1)
            A[:, row, col], A[:, row, col + 1] = lo, hi
            cv = np.broadcast_to(cr[k](st, sel), (tw.size,)).reshape(nw, 32)
            C[:, _G + 8 * (k >> 1), 2 * _T + (k & 1)] = cv
        for k in range(2):
            lo, hi = _halves(np.broadcast_to(br[k](st, sel), (tw.size,)).reshape(nw, 32), kind)
            B[:, 2 * _T + 8 * k, _G], B[:, 2 * _T + 8 * k + 1, _G] = lo, hi
        acc = C
        with np.errstate(all="ignore"):
            for kk in range(16):
                acc = acc + A[:, :, kk, None] * B[:, None, kk, :]
        D = acc.astype(np.float32)
        for k in range(4):
            ds[k](st, sel, D[:, _G + 8 * (k >> 1), 2 * _T + (k & 1)].reshape(-1))
    return Op(run, WARPSYNC, mask=lambda st, sel: _FULL)


@builds("ldmatrix", kind=WARPSYNC, cls="ld.shared")
def build_ldmatrix(ctx, ins, parts):
    count = next((int(p[1]) for p in parts if p in ("x1", "x2", "x4")), 0)
    if not count or "m8n8" not in parts or "b16" not in parts or "shared" not in parts:
        ctx.error("only ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared.b16 is supported")
    trans = "trans" in parts
    dvec, src = ins.operands
    if dvec[0] != "vec" or len(dvec[1]) != count:
        ctx.error(f"ldmatrix .x{count} needs {count} destination registers")
    ds = [writer(ctx, ("reg", r), "b32") for r in dvec[1]]
    addr = address(ctx, src)
    loc = locate(ctx, "shared")
    line = ins.line
    used = 8 * count

    def run(st, sel):
        tw = _warp_lanes(st, sel, "ldmatrix", line)
        nw = tw.shape[0]
        a = np.broadcast_to(np.asarray(addr(st, sel), np.int64), (tw.size,)).reshape(nw, 32)
        rows_sel = tw[:, :used].reshape(-1)
        try:
            views, idx = loc(st, rows_sel, a[:, :used].reshape(-1), 16)
        except Fault as f:            # report the lane's position within `sel`
            w, l = divmod(f.lane, used)
            raise Fault(w * 32 + l, f.address, f.space, f.nearest) from None
        # (warps, matrices, rows, 8 elements) of raw 16-bit values
        m = views[2][(idx >> 1)[:, None] + np.arange(8)].reshape(nw, count, 8, 8)
        if trans:
            m = m.transpose(0, 1, 3, 2)
        r, c = _G, 2 * _T
        for i in range(count):
            lo = m[:, i, r, c].astype(np.uint32)
            hi = m[:, i, r, c + 1].astype(np.uint32)
            ds[i](st, sel, (lo | (hi << np.uint32(16))).reshape(-1))
    return Op(run, WARPSYNC, mask=lambda st, sel: _FULL)


# ---- cp.async ---------------------------------------------------------------------------------

class _AsyncCopies:
    """The copies each thread has issued and not yet retired, in issue order.  Entry:
    [lanes, group number per lane, shared byte offsets, global byte offsets, nbytes, bytes read
    per lane (None: all nbytes; the zero-fill form writes the rest as zeros)]."""

    def __init__(self, st):
        self.heap = st.heap
        self.committed = np.zeros(st.T, np.int64)     # groups committed so far, per thread
        self.pending: list = []


def _copies(st) -> _AsyncCopies:
    q = st.__dict__.get("_cp_async")
    if q is None or q.heap is not st.heap:           # a new launch on a reused state
        q = st._cp_async = _AsyncCopies(st)
    return q


@builds("cp", cls="cp.async")
def build_cp(ctx, ins, parts):
    if parts[:2] != ["cp", "async"]:
        ctx.error("only cp.async is supported")
    if "bulk" in parts:                     # TMA (tma.py)
        return build_bulk(ctx, ins, parts)
    if "commit_group" in parts:
        def commit(st, sel):
            q = _copies(st)
            q.committed[st.tidx if sel is None else sel] += 1
        return commit
    if "wait_group" in parts or "wait_all" in parts:
        nv = reader(ctx, ins.operands[0], "u32") if ins.operands else (lambda st, sel: 0)

        def wait(st, sel):
            q = _copies(st)
            t = st.tidx if sel is None else sel
            limit = np.zeros(st.T, np.int64)
            limit[t] = q.committed[t] - int(nv(st, sel)) if "wait_group" in parts \
                else q.committed[t] + 1
            member = np.zeros(st.T, bool)
            member[t] = True
            keep = []
            for e in q.pending:
                lanes, grp, dsti, srci, n, size = e
                due = member[lanes] & (grp < limit[lanes])
                if due.any():
                    k = np.arange(n)
                    dst = dsti[due][:, None] + k
                    if size is None:
                        st.shared.buf[dst] = q.heap.buf[srci[due][:, None] + k]
                    else:               # zero-fill: bytes past src-size were never read
                        take = k < size[due][:, None]
                        src = np.where(take, srci[due][:, None] + k, 0)
                        st.shared.buf[dst] = np.where(take, q.heap.buf[src], 0)
                    if due.all():
                        continue
                    e = [lanes[~due], grp[~due], dsti[~due], srci[~due], n,
                         None if size is None else size[~due]]
                keep.append(e)
            q.pending = keep
        return wait
    if "shared" not in parts or "global" not in parts:
        ctx.error("cp.async copies from .global to .shared")
    ops = ins.operands
    if len(ops) not in (3, 4) or ops[2][0] != "imm":
        ctx.error("cp.async takes [dst], [src], cp-size[, src-size] (no ignore-src or "
                  "cache-policy operand)")
    n = int(ops[2][1][1])
    if n not in (4, 8, 16) or ("cg" in parts and n != 16):
        ctx.error("cp.async copies 4, 8 or 16 bytes (.cg: 16)")
    dst_addr, src_addr = address(ctx, ops[0]), address(ctx, ops[1])
    dloc, sloc = locate(ctx, "shared", "write"), locate(ctx, "global")
    fill = reader(ctx, ops[3], "u32") if len(ops) == 4 else None
    line = ins.line

    def issue(st, sel):
        t = st.tidx if sel is None else sel
        _, didx = dloc(st, sel, dst_addr(st, sel), n)
        if fill is None:
            size = None
            _, sidx = sloc(st, sel, src_addr(st, sel), n)
        else:
            size = np.broadcast_to(np.asarray(fill(st, sel), np.int64), t.shape).copy()
            if (size > n).any():
                raise LaunchError(f"CPU executor: cp.async at PTX line {line}: src-size "
                                  f"{int(size[size > n][0])} is larger than cp-size {n} "
                                  f"(undefined on the GPU); pass 0..{n}")
            a = np.broadcast_to(np.asarray(src_addr(st, sel), np.int64), t.shape)
            sidx = _read_prefix(st, t, a, size, n, sloc)
        q = _copies(st)
        didx = np.broadcast_to(didx, t.shape).copy()
        q.pending.append([np.array(t), q.committed[t].copy(), didx, np.array(sidx), n, size])
    return issue


def _read_prefix(st, t, a, size, n, sloc) -> np.ndarray:
    """Check the zero-fill form's reads: lane i reads bytes [a_i, a_i + size_i) only (nothing
    when size_i is 0), so a source past the end of its array is no fault when it is not read.
    Returns each lane's global byte offset (0 for lanes that read nothing)."""
    sidx = np.zeros(t.shape, np.int64)
    for s in np.unique(size[size > 0]).tolist():
        pos = np.flatnonzero(size == s)
        bad = np.flatnonzero(a[pos] % n)
        if bad.size:
            raise Fault(int(pos[bad[0]]), int(a[pos[bad[0]]]), "global",
                        f"misaligned cp.async source (cp-size {n} needs a {n}-byte aligned "
                        f"address)")
        off = 0
        for piece in (16, 8, 4, 2, 1):      # aligned power-of-two pieces covering [0, s)
            if s - off < piece:
                continue
            try:
                _, idx = sloc(st, t[pos], a[pos] + off, piece)
            except Fault as f:              # report the lane's position within `t`
                raise Fault(int(pos[f.lane]), f.address, f.space, f.nearest) from None
            if off == 0:
                sidx[pos] = idx
            off += piece
    return sidx

"""Hopper warpgroup MMA on the CPU executor: `wgmma.mma_async` (m64nNk16, f16/bf16 -> f32, A from
a shared-memory descriptor or from registers, B from a descriptor), `wgmma.fence`,
`wgmma.commit_group`, `wgmma.wait_group` (docs/hopper.md, "Warpgroup MMA").

Layouts are the PTX ISA's.  A warpgroup is 4 consecutive warps, the first one's index within its
block a multiple of 4; warp w of it owns rows 16w..16w+15 of the 64-row tile.  With g = lane >> 2
and t = lane & 3:

    D (64xN f32):   d{j} is D[16w + g + 8*((j >> 1) & 1), 8*(j >> 2) + 2t + (j & 1)]
    A regs (64x16): a{k} holds A[16w + g + 8*(k & 1), 2t + 8*(k >> 1) + {0, 1}]

A shared-memory operand is read through its matrix descriptor (start address, leading- and
stride-dimension byte offsets, swizzle mode; bits in docs/hopper.md) in the ISA's canonical
layouts, in 8-row x 16-byte core matrices; the swizzle is applied to the byte address itself by
`swizzle.py` (the one definition shared with TMA), so a descriptor advanced inside a swizzle
atom (start + 32 bytes for the next k16 slice) reads what the GPU reads.

Arithmetic as `mma`: products of two f16/bf16 values are exact in float64, `c + p0 + ... + p15`
(k ascending; c = 0 when scale-d is false) is summed in float64 and rounded once to f32.

Asynchrony (docs/decisions.md, "wgmma"): a wgmma captures its registers
(A words, C, scale-d) when it issues, and is carried out when a `wgmma.wait_group` retires its
group: only then are A and B read from shared memory and D written to its registers.  Until
then the D registers hold NaN, so a kernel that reads its accumulator before the wait reads
NaN here, and one that overwrites a tile before the wgmma reading it has retired gets the new
data (the GPU leaves both undefined; a checked launch sees the shared reads at the wait).  A
wgmma whose C registers are a pending one's D registers (the chained `acc = wgmma(..., acc)`
without a wait in between, which the ISA allows) takes that one's result as C.
"""
from __future__ import annotations

import numpy as np

from ...bfloat16 import from_bf16
from ...errors import LaunchError
from .memops import locate
from .opkinds import WGSYNC, Op, builds
from .operands import reader, writer
from .swizzle import swizzle

_L128 = np.arange(128)
_W, _G, _T = _L128 >> 5, (_L128 & 31) >> 2, _L128 & 3
#: descriptor bits 62-63 -> swizzle size in bytes
_MODES = {0: 0, 1: 128, 2: 64, 3: 32}


# ---- warpgroups ---------------------------------------------------------------------------------

def _warpgroups(st, sel, what: str, line: int) -> np.ndarray:
    """The executing threads as a (warpgroups, 128) array; LaunchError unless each warpgroup is
    complete and starts at a warp index (within its block) that is a multiple of 4.  The
    scheduler (wgsync.py) only runs these ops for whole warpgroups parked at one instruction,
    so what is left to fail here is a block whose size is not a multiple of 128."""
    t = st.tidx if sel is None else np.asarray(sel)
    if t.size and t.size % 128 == 0:
        tw = t.reshape(-1, 128)
        first = st.tid_lin[tw[:, 0]]
        if ((first & 127) == 0).all() and (st.tid_lin[tw] == first[:, None] + _L128).all() \
                and (st.blk[tw] == st.blk[tw[:, :1]]).all():
            return tw
    raise LaunchError(f"CPU executor: {what} at PTX line {line} needs all 128 threads of a "
                      f"warpgroup (4 consecutive warps starting at a warp index that is a "
                      f"multiple of 4; it is a .sync.aligned warpgroup instruction): launch "
                      f"blocks whose size is a multiple of 128 threads")


class _Pending:
    """Per-launch wgmma bookkeeping: groups committed so far per thread, whether a thread has
    executed wgmma.fence, and the issued-but-unretired wgmmas (`_Issued`) in issue order."""

    def __init__(self, st):
        self.heap = st.heap
        self.committed = np.zeros(st.T, np.int64)
        self.fenced = np.zeros(st.T, bool)
        self.entries: list = []


def _pending(st) -> _Pending:
    q = st.__dict__.get("_wgmma")
    if q is None or q.heap is not st.heap:           # a new launch on a reused state
        q = st._wgmma = _Pending(st)
    return q


def _uniform(vals, tw, what: str, line: int) -> np.ndarray:
    """One u64 per warpgroup (descriptors must be the same in all its threads)."""
    v = np.broadcast_to(np.asarray(vals, np.uint64), (tw.size,)).reshape(tw.shape)
    if (v != v[:, :1]).any():
        raise LaunchError(f"CPU executor: wgmma at PTX line {line}: the {what} descriptor "
                          f"differs between the threads of a warpgroup; every thread must "
                          f"pass the same descriptor")
    return v[:, 0]


# ---- descriptors and canonical layouts ----------------------------------------------------------

def decode_descriptor(desc: int) -> tuple[int, int, int, int]:
    """u64 descriptor -> (start byte address, LBO bytes, SBO bytes, swizzle bytes)."""
    d = int(desc)
    return ((d & 0x3FFF) << 4, ((d >> 16) & 0x3FFF) << 4, ((d >> 32) & 0x3FFF) << 4,
            _MODES[(d >> 62) & 3])


def canonical_offsets(mn: int, mn_major: bool, lbo: int, sbo: int, mode: int) -> np.ndarray:
    """(mn, 16) byte offsets (before the swizzle) of the 16-bit elements X[i, k] of an operand
    with `mn` rows (M of A, N of B) and K = 16, in the ISA's canonical layout.

    K-major (k contiguous), core matrix = 8 rows x 16 bytes:
        none:   (i % 8)*16 + (k % 8)*2 + (i // 8)*SBO + (k // 8)*LBO
        W-byte swizzle: (i % 8)*W + k*2 + (i // 8)*SBO          (LBO unused: K fits in a row)
    MN-major (i contiguous):
        none:   (i % 8)*2 + (i // 8)*SBO + (k % 8)*16 + (k // 8)*LBO
        W-byte swizzle: (i % (W/2))*2 + (i // (W/2))*LBO + (k % 8)*W + (k // 8)*SBO
    """
    i = np.arange(mn)[:, None]
    k = np.arange(16)[None, :]
    if not mn_major:
        if mode == 0:
            return (i % 8) * 16 + (k % 8) * 2 + (i // 8) * sbo + (k // 8) * lbo
        return (i % 8) * mode + k * 2 + (i // 8) * sbo
    if mode == 0:
        return (i % 8) * 2 + (i // 8) * sbo + (k % 8) * 16 + (k // 8) * lbo
    per = mode // 2
    return (i % per) * 2 + (i // per) * lbo + (k % 8) * mode + (k // 8) * sbo


def _halves(raw: np.ndarray, kind: str) -> np.ndarray:
    raw = np.asarray(raw, np.uint16)
    if kind == "bf16":
        return from_bf16(raw).astype(np.float64)
    return raw.view(np.float16).astype(np.float64)


def _read_operand(st, loc, row_thread: int, desc: int, mn: int, mn_major: bool,
                  kind: str) -> np.ndarray:
    """The (mn, 16) operand a descriptor names, as float64, from shared memory."""
    start, lbo, sbo, mode = decode_descriptor(desc)
    logical = start + canonical_offsets(mn, mn_major, lbo, sbo, mode)
    addr = swizzle(logical.reshape(-1).astype(np.int64), mode)
    sel = np.full(addr.shape, row_thread, np.int64)
    views, idx = loc(st, sel, addr, 2)
    return _halves(views[2][idx >> 1], kind).reshape(mn, 16)


# ---- the instructions ---------------------------------------------------------------------------

def _class(parts) -> tuple:
    """Tensor-core op: 2*64*N*16 flops per warpgroup, counted as spread over its 128 threads."""
    shape = next((p for p in parts if p.startswith("m64n")), "")
    if not shape:
        return "tensor", 0
    n = int(shape[4:].partition("k")[0])
    return "tensor", 2 * 64 * n * 16 // 128


@builds("wgmma", kind=WGSYNC, cls=_class)
def build_wgmma(ctx, ins, parts):
    if "fence" in parts:
        return Op(_fence(ins.line), WGSYNC)
    if "commit_group" in parts:
        return Op(_commit(ins.line), WGSYNC)
    if "wait_group" in parts:
        if not ins.operands or ins.operands[0][0] != "imm":
            ctx.error("wgmma.wait_group takes an immediate group count")
        return Op(_wait(int(ins.operands[0][1][1]), ins.line), WGSYNC)
    return Op(_mma(ctx, ins, parts), WGSYNC)


def _fence(line):
    def run(st, sel):
        tw = _warpgroups(st, sel, "wgmma.fence", line)
        _pending(st).fenced[tw.reshape(-1)] = True
    return run


def _commit(line):
    def run(st, sel):
        tw = _warpgroups(st, sel, "wgmma.commit_group", line)
        _pending(st).committed[tw.reshape(-1)] += 1
    return run


class _Issued:
    """One warpgroup's wgmma between issue and retire: what it captured at issue (its 128
    threads, its group number, A as a descriptor or register words, the B descriptor, C, the
    chained C columns taken from earlier pending wgmmas, scale-d) and, once carried out, D."""
    __slots__ = ("threads", "group", "cols", "spec", "a", "b", "c", "chain", "scale", "d")

    def __init__(self, threads, group, cols, spec, a, b, c, chain, scale):
        self.threads, self.group, self.cols, self.spec = threads, group, cols, spec
        self.a, self.b, self.c, self.chain, self.scale = a, b, c, chain, scale
        self.d = None

    def result(self, st) -> np.ndarray:
        """D (128 threads x N/2 registers, f32): computed on first use, reading shared memory
        now."""
        if self.d is None:
            c = self.c.copy()
            for prev, col, k in self.chain:
                c[:, col] = prev.result(st)[:, k]
            self.d = self.spec.compute(st, self, np.where(self.scale[:, None], c, 0.0))
        return self.d


def _wait(n: int, line: int):
    def run(st, sel):
        tw = _warpgroups(st, sel, "wgmma.wait_group", line)
        q = _pending(st)
        member = np.zeros(st.T, bool)
        member[tw.reshape(-1)] = True
        keep = []
        for e in q.entries:         # issue order: a chained wgmma's source is carried out first
            t0 = e.threads[0]
            if member[t0] and e.group < q.committed[t0] - n:
                d = e.result(st)
                for w, col in zip(e.spec.writers, range(d.shape[1])):
                    w(st, e.threads, d[:, col])
            else:
                keep.append(e)
        q.entries = keep
    return run


class _Spec:
    """What one wgmma instruction is (from its PTX text): shape, types, operand readers."""

    def __init__(self, n, kind, regs_a, trans_a, trans_b, sign, writers, loc):
        self.n, self.kind, self.regs_a = n, kind, regs_a
        self.trans_a, self.trans_b, self.sign = trans_a, trans_b, sign
        self.writers, self.loc = writers, loc
        j = np.arange(n // 2)
        # D fragment: (128 threads, N/2 registers) -> (row, col) of the 64xN tile
        self.d_row = (16 * _W + _G)[:, None] + 8 * ((j >> 1) & 1)[None, :]
        self.d_col = (2 * _T)[:, None] + (8 * (j >> 2) + (j & 1))[None, :]

    def compute(self, st, e: _Issued, c: np.ndarray) -> np.ndarray:
        t0 = int(e.threads[0])
        if self.regs_a:
            A = np.empty((64, 16))
            for k in range(4):
                w = e.a[:, k]
                r, col = 16 * _W + _G + 8 * (k & 1), 2 * _T + 8 * (k >> 1)
                A[r, col] = _halves((w & 0xFFFF).astype(np.uint16), self.kind)
                A[r, col + 1] = _halves((w >> 16).astype(np.uint16), self.kind)
        else:
            A = _read_operand(st, self.loc, t0, e.a, 64, self.trans_a, self.kind)
        B = _read_operand(st, self.loc, t0, e.b, self.n, self.trans_b, self.kind)   # (N, 16)
        acc = np.zeros((64, self.n))
        with np.errstate(all="ignore"):
            acc[self.d_row, self.d_col] = c
            for kk in range(16):
                acc = acc + self.sign * (A[:, kk, None] * B[None, :, kk])
            return acc.astype(np.float32)[self.d_row, self.d_col]


def _mma(ctx, ins, parts):
    shape = next((p for p in parts if p.startswith("m64n") and p.endswith("k16")), None)
    types = parts[-3:]
    if parts[:4] != ["wgmma", "mma_async", "sync", "aligned"] or shape is None \
            or types not in (["f32", "f16", "f16"], ["f32", "bf16", "bf16"]):
        ctx.error("only wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16} is "
                  "supported")
    n = int(shape[4:-3])
    if n % 8 or not 8 <= n <= 256:
        ctx.error(f"wgmma m64nNk16 needs N = 8..256 in steps of 8, got {n}")
    kind = types[1]
    ops = ins.operands
    dvec, a_op = ops[0], ops[1]
    regs_a = a_op[0] == "vec"
    imms = ops[4:]
    if dvec[0] != "vec" or len(dvec[1]) != n // 2:
        ctx.error(f"wgmma m64n{n}k16 needs {n // 2} f32 accumulator registers")
    if any(o[0] != "imm" for o in imms) or len(imms) != (3 if regs_a else 4):
        ctx.error("wgmma takes d, a, b-desc, scale-d, imm-scale-a, imm-scale-b"
                  + ("" if regs_a else ", imm-trans-a") + ", imm-trans-b")
    scale_a, scale_b = (int(o[1][1]) for o in imms[:2])
    trans_a = 0 if regs_a else int(imms[2][1][1])
    trans_b = int(imms[-1][1][1])
    if scale_a not in (1, -1) or scale_b not in (1, -1) or trans_a not in (0, 1) \
            or trans_b not in (0, 1):
        ctx.error("wgmma: imm-scale-a/b must be 1 or -1, imm-trans-a/b 0 or 1")
    names = dvec[1]
    if None in names or len(set(names)) != len(names):
        ctx.error("wgmma: the accumulator registers must be distinct registers")
    c_read = [reader(ctx, ("reg", r), "f32") for r in names]
    d_write = [writer(ctx, ("reg", r), "f32") for r in names]
    if regs_a:
        if len(a_op[1]) != 4:
            ctx.error("wgmma with A in registers takes four .b32 A registers")
        a_read = [reader(ctx, ("reg", r), "b32") for r in a_op[1]]
    else:
        a_read = reader(ctx, a_op, "u64")
    b_read = reader(ctx, ops[2], "u64")
    p_read = reader(ctx, ops[3], "pred")
    loc = locate(ctx, "shared")
    line = ins.line
    spec = _Spec(n, kind, regs_a, bool(trans_a), bool(trans_b), float(scale_a * scale_b),
                 d_write, loc)
    cols = {r: c for c, r in enumerate(names)}
    nan = np.float32(np.nan)

    def run(st, sel):
        tw = _warpgroups(st, sel, "wgmma.mma_async", line)
        q = _pending(st)
        flat = tw.reshape(-1)
        if not q.fenced[flat].all():
            raise LaunchError(f"CPU executor: wgmma.mma_async at PTX line {line} runs before "
                              f"any wgmma.fence of its warpgroup; the ISA requires a "
                              f"wgmma.fence before the first wgmma (pyptx.wgmma_fence())")
        ng = tw.shape[0]
        bdesc = _uniform(b_read(st, sel), tw, "B", line)
        if regs_a:
            words = np.stack([np.broadcast_to(np.asarray(a_read[k](st, sel), np.uint32),
                                              (flat.size,)) for k in range(4)], axis=1)
            a_of = words.reshape(ng, 128, 4)
        else:
            a_of = _uniform(a_read(st, sel), tw, "A", line)
        C = np.stack([np.broadcast_to(rd(st, sel), (flat.size,)) for rd in c_read],
                     axis=1).astype(np.float64).reshape(ng, 128, n // 2)
        scale = np.broadcast_to(np.asarray(p_read(st, sel), bool), (flat.size,)) \
            .reshape(ng, 128)
        for g in range(ng):
            t0 = int(tw[g, 0])
            chain = {}
            for e in q.entries:             # the latest pending D of each C register wins
                if int(e.threads[0]) == t0:
                    for col, r in enumerate(names):
                        k = e.cols.get(r)
                        if k is not None:
                            chain[col] = (e, col, k)
            q.entries.append(_Issued(tw[g].copy(), int(q.committed[t0]), cols, spec,
                                     a_of[g], bdesc[g], C[g].copy(), list(chain.values()),
                                     scale[g].copy()))
        for w in d_write:                   # undefined until the wait: NaN here
            w(st, sel, nan)
    return run

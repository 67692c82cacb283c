"""TMA on the CPU executor: loads (`cp.async.bulk.tensor.<n>d.shared::cluster.global.tile.
mbarrier::complete_tx::bytes [dst], [tmap, {c0, ...}], [mbar]`), stores (`cp.async.bulk.tensor.
<n>d.global.shared::cta.tile.bulk_group [tmap, {c0, ...}], [src]` with `cp.async.bulk.
commit_group` / `wait_group[.read]`), and the CPU's tensor map.

A copy issues in one thread: the tensor map (a `.param .b8[128]` parameter, addressed
through `mov` + `cvta.param`) is decoded, the box at the innermost-first element coordinates
c0.. is read from global memory (elements outside the tensor read as zeros, as the ISA's tile
mode with OOB fill NONE says), laid out densely in the box's row-major order and placed at the
shared address dst + offset swizzled by the map's mode (`swizzle.swizzle`, the one definition
shared with wgmma's descriptors).  dst must be 128-byte aligned, and for a swizzled map
aligned to the swizzle's repeat (256/512/1024 bytes), so the pattern starts where the
reader's does.

Stores read their source tile (in the map's swizzled layout) and write the box's in-bounds
elements when a `cp.async.bulk.wait_group` retires their group, or when the batch ends.

The bytes of a load land later: the copy is kept in flight (`mbarrier.Barriers.inflight`) until a
thread polls its mbarrier (`mbarrier.try_wait`), which writes them and completes their
transactions (the tx-count drops by the box's bytes).  A kernel that reads the tile without
waiting therefore sees stale shared memory here, as it may on a GPU; under pyptx.sanitize such a
read is reported.

The CPU's tensor map encoding (ours to define: a driver's CUtensorMap is opaque), 128 bytes,
little-endian, made by `encode` (pyptx.TensorMap on the CPU) and read by `decode`:

    offset  size  field
         0     4  magic b"PYTM"
         4     1  rank (1..5)
         5     1  data type (CUtensorMapDataType: UINT8 0, UINT16 1, UINT32 2, INT32 3,
                  UINT64 4, INT64 5, FLOAT16 6, FLOAT32 7, FLOAT64 8, BFLOAT16 9)
         6     1  swizzle (CUtensorMapSwizzle: NONE 0, 32B 1, 64B 2, 128B 3)
         7     1  interleave (0: NONE)
         8     1  L2 promotion (0..3; no effect here)
         9     1  OOB fill (0: zeros)
        10     1  element size in bytes
        11     5  reserved (0)
        16     8  global address
        24    40  global dims, u64 x 5, innermost first
        64    32  global strides in bytes of dims 1.., u64 x 4 (dim 0's is the element size)
        96    10  box dims, u16 x 5, innermost first
       106     5  element strides, u8 x 5 (1: every element)
       111    17  reserved (0)
"""
from __future__ import annotations

import struct
import numpy as np

from ...errors import LaunchError
from .memory import PARAM_SLOT, PARAM_WINDOW, Fault
from .memops import address
from .mbarrier import Inflight, barriers
from .operands import reader
from .swizzle import repeat_bytes, swizzle

MAGIC = b"PYTM"
NBYTES = 128
ELEMENT_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2}
#: CUtensorMapSwizzle value -> swizzle span in bytes
SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}
_HEAD = struct.Struct("<4sBBBBBBB5xQ")


def encode(dtype_code: int, address: int, dims, strides, box, element_strides,
           swizzle_code: int, interleave: int = 0, l2: int = 0, oob_fill: int = 0) -> bytes:
    """The 128 bytes of a CPU tensor map (dims, box, element strides innermost first; byte
    strides of dims 1..rank-1)."""
    rank = len(dims)
    out = bytearray(NBYTES)
    _HEAD.pack_into(out, 0, MAGIC, rank, dtype_code, swizzle_code, interleave, l2, oob_fill,
                    ELEMENT_BYTES[dtype_code], int(address))
    struct.pack_into(f"<{rank}Q", out, 24, *map(int, dims))
    if rank > 1:
        struct.pack_into(f"<{rank - 1}Q", out, 64, *map(int, strides))
    struct.pack_into(f"<{rank}H", out, 96, *map(int, box))
    struct.pack_into(f"<{rank}B", out, 106, *map(int, element_strides))
    return bytes(out)


def decode(raw) -> dict | None:
    """The fields of an `encode`d map (dims, byte strides incl. dim 0, box innermost first),
    or None when the bytes are not one."""
    raw = bytes(raw)
    if len(raw) != NBYTES or raw[:4] != MAGIC:
        return None
    _, rank, dt, sw, il, l2, oob, esize, addr = _HEAD.unpack_from(raw, 0)
    if not 1 <= rank <= 5 or sw not in SWIZZLE_BYTES:
        return None
    return dict(rank=rank, dtype=dt, swizzle=SWIZZLE_BYTES[sw], interleave=il, l2=l2,
                oob_fill=oob, elem_bytes=esize, address=addr,
                dims=struct.unpack_from(f"<{rank}Q", raw, 24),
                strides=(esize,) + struct.unpack_from(f"<{rank - 1}Q", raw, 64),
                box=struct.unpack_from(f"<{rank}H", raw, 96),
                element_strides=struct.unpack_from(f"<{rank}B", raw, 106))


def _map_of(st, ctx_params, a: int, line: int) -> dict:
    """The decoded tensor map at generic address a (a parameter's PARAM_WINDOW slot)."""
    k, rest = divmod(a - PARAM_WINDOW, PARAM_SLOT)
    if a < PARAM_WINDOW or rest or not 0 <= k < len(ctx_params):
        raise LaunchError(f"CPU executor: cp.async.bulk.tensor at PTX line {line}: the tensor "
                          f"map operand 0x{a:x} is not the address of a .param tensor map "
                          f"(mov.u64 %rd, name; cvta.param.u64 ...)")
    name = ctx_params[k]
    raw = st.params.get(name)
    m = None if raw is None or np.ndim(raw) != 1 else decode(np.asarray(raw, np.uint8))
    if m is None:
        raise LaunchError(f"CPU executor: cp.async.bulk.tensor at PTX line {line}: parameter "
                          f"'{name}' does not hold a CPU tensor map; pass a pyptx.TensorMap "
                          f"of a numpy array for it")
    if m["interleave"] or m["oob_fill"] or any(e != 1 for e in m["element_strides"][1:]):
        raise LaunchError(f"CPU executor: cp.async.bulk.tensor at PTX line {line}: parameter "
                          f"'{name}' is an interleaved, NaN-filled or element-strided tensor "
                          f"map; the executor runs plain tiled maps (as pyptx.TensorMap makes)")
    return m


def _box_elements(st, m, coords, lane: int):
    """(heap byte index of each in-bounds element of the box, the in-bounds mask) with the
    box's axes in numpy (outermost-first) order, for innermost-first coordinates."""
    rank, es = m["rank"], m["elem_bytes"]
    box = m["box"]
    # per dimension (innermost first): element indices and whether they are in bounds
    idx = [c + np.arange(b, dtype=np.int64) for c, b in zip(coords, box)]
    ok = [(i >= 0) & (i < d) for i, d in zip(idx, m["dims"])]
    off = np.zeros((), np.int64)
    inb = np.ones((), bool)
    for d in range(rank - 1, -1, -1):        # outermost first -> numpy axes
        shape = [1] * rank
        shape[rank - 1 - d] = box[d]
        off = off + (np.where(ok[d], idx[d], 0) * m["strides"][d]).reshape(shape)
        inb = inb & ok[d].reshape(shape)
    inb = np.broadcast_to(inb, off.shape)
    gi = np.zeros(0, np.int64)
    if inb.any():
        try:
            gi = st.heap.index((m["address"] + off[inb]).astype(np.int64), es, 1)
        except Fault as f:
            raise Fault(lane, f.address, "global", f"the tensor map's box lies outside its "
                        f"array: {f.nearest}") from None
    return gi, inb


def _box_bytes(st, m, coords, lane: int) -> np.ndarray:
    """The box at innermost-first coordinates as bytes in row-major (outermost-first) order;
    elements outside the tensor are zero."""
    es = m["elem_bytes"]
    gi, inb = _box_elements(st, m, coords, lane)
    out = np.zeros(inb.shape + (es,), np.uint8)
    if gi.size:
        out[inb] = st.heap.buf[gi[:, None] + np.arange(es)]
    return out.reshape(-1)


def build_bulk(ctx, ins, parts):
    """Every cp.async.bulk form pyptx emits (tensorcore.build_cp hands them over)."""
    if "commit_group" in parts:
        return _commit
    if "wait_group" in parts:
        return _wait_builder(ctx, ins, parts)
    if "tensor" not in parts:
        ctx.error("only cp.async.bulk.tensor and the bulk commit/wait groups are supported")
    if "bulk_group" in parts:
        return build_bulk_store(ctx, ins, parts)
    return build_bulk_tensor(ctx, ins, parts)


def _dims(ctx, parts) -> int:
    return next((int(p[0]) for p in parts if len(p) == 2 and p[1] == "d" and p[0].isdigit()),
                0)


def _tensor_operand(ctx, op, dims: int):
    """[tmap, {c0, ...}] -> (tensor map address reader, coordinate readers)."""
    if op[0] != "tensor_mem" or len(op[2]) != dims:
        ctx.error(f"cp.async.bulk.tensor.{dims}d needs [tmap, {{{dims} coordinates}}]")
    tmap = reader(ctx, ("reg", op[1]), "u64") if op[1].startswith("%") else \
        reader(ctx, ("sym", op[1]), "u64")
    return tmap, [reader(ctx, ("reg", r), "s32") for r in op[2]]


def _tile_at(st, k: int, d0: int, m: dict, nbytes: int, what: str) -> np.ndarray:
    """Shared byte addresses (within the block's row) of a dense box of nbytes at d0, after
    the map's swizzle; checks the alignment and the extent."""
    need = max(128, repeat_bytes(m["swizzle"]))
    if d0 % need:
        raise Fault(k, d0, "shared", f"the {what} address must be {need}-byte aligned (128 "
                    f"bytes, and the {m['swizzle']}-byte swizzle's repeat), got shared "
                    f"address {d0}")
    phys = swizzle(d0 + np.arange(nbytes, dtype=np.int64), m["swizzle"])
    if int(phys.max()) >= st.shared.row:
        raise Fault(k, int(phys.max()), "shared", f"the {nbytes}-byte box at shared address "
                    f"{d0} ends past the block's {st.shared.row} bytes of shared memory")
    return phys


def build_bulk_tensor(ctx, ins, parts):
    """cp.async.bulk.tensor (global -> shared, tile mode, mbarrier completion)."""
    dims = _dims(ctx, parts)
    if (not 1 <= dims <= 5 or "tile" not in parts or "global" not in parts
            or "shared::cluster" not in parts or "mbarrier::complete_tx::bytes" not in parts):
        ctx.error("only cp.async.bulk.tensor.<n>d.shared::cluster.global.tile."
                  "mbarrier::complete_tx::bytes is supported")
    ops = ins.operands
    if len(ops) != 3:
        ctx.error(f"cp.async.bulk.tensor.{dims}d takes [dst], [tmap, {{{dims} coordinates}}], "
                  f"[mbar] (no multicast or cache-hint operands)")
    dst_addr, bar_addr = address(ctx, ops[0]), address(ctx, ops[2])
    tmap, crs = _tensor_operand(ctx, ops[1], dims)
    names = [n for n, _ in ctx.entry.params]
    line = ins.line

    def issue(st, sel):
        t = st.tidx if sel is None else np.asarray(sel)
        if t.size == 0:
            return
        tm = np.broadcast_to(np.asarray(tmap(st, sel), np.int64), t.shape)
        da = np.broadcast_to(np.asarray(dst_addr(st, sel), np.int64), t.shape)
        ba = np.broadcast_to(np.asarray(bar_addr(st, sel), np.int64), t.shape)
        cs = [np.broadcast_to(np.asarray(c(st, sel), np.int64), t.shape) for c in crs]
        bars = barriers(st)
        st.shared.index(st.blk[t], ba, 8, 8)
        for k in range(t.size):
            lane = int(t[k])
            m = _map_of(st, names, int(tm[k]), line)
            if m["rank"] != dims:
                raise LaunchError(f"CPU executor: cp.async.bulk.tensor.{dims}d at PTX line "
                                  f"{line}: the tensor map has rank {m['rank']}")
            data = _box_bytes(st, m, [int(c[k]) for c in cs], k)
            phys = _tile_at(st, k, int(da[k]), m, data.size, "cp.async.bulk.tensor destination")
            blk = int(st.blk[lane])
            o = int(ba[k])
            a = bars.by_offset.get(o)
            if a is None or not a["init"][blk]:
                raise LaunchError(f"CPU executor: cp.async.bulk.tensor at PTX line {line} "
                                  f"completes on the mbarrier at shared offset {o}, which no "
                                  f"mbarrier.init of this launch initialised; call "
                                  f"pyptx.mbarrier_init first")
            dst = blk * st.shared.stride + phys
            bars.inflight.append(Inflight(blk, o, dst, data, line))
            mon = st.monitor
            if mon is not None and mon.sanitizer is not None:
                mon.sanitizer.async_issued(st, dst, line)
    return issue


# ---- TMA stores (shared -> global, bulk groups) ---------------------------------------------------

class _Stores:
    """Each thread's bulk stores not yet performed: entries [lane, group, shared buffer indices
    of the source bytes, decoded map, innermost-first coordinates, PTX line]; the groups each
    thread committed."""

    def __init__(self, st):
        self.heap = st.heap
        self.committed = np.zeros(st.T, np.int64)
        self.pending: list = []


def _stores(st) -> _Stores:
    q = st.__dict__.get("_bulk_stores")
    if q is None or q.heap is not st.heap:           # a new launch on a reused state
        q = st._bulk_stores = _Stores(st)
    return q


def _perform(st, e) -> None:
    """Read a store's source tile (swizzled) from shared memory and write the box's in-bounds
    elements to global memory."""
    lane, _grp, src, m, coords, _line = e
    es = m["elem_bytes"]
    data = st.shared.buf[src].reshape(-1, es)
    gi, inb = _box_elements(st, m, coords, lane)
    if gi.size:
        st.heap.buf[gi[:, None] + np.arange(es)] = data[inb.reshape(-1)]


def build_bulk_store(ctx, ins, parts):
    """cp.async.bulk.tensor.<n>d.global.shared::cta.tile.bulk_group [tmap, {c..}], [src]."""
    dims = _dims(ctx, parts)
    if not 1 <= dims <= 5 or "tile" not in parts or "global" not in parts or \
            "shared::cta" not in parts:
        ctx.error("only cp.async.bulk.tensor.<n>d.global.shared::cta.tile.bulk_group is "
                  "supported")
    ops = ins.operands
    if len(ops) != 2:
        ctx.error("cp.async.bulk.tensor (store) takes [tmap, {coordinates}], [src]")
    tmap, crs = _tensor_operand(ctx, ops[0], dims)
    src_addr = address(ctx, ops[1])
    names = [n for n, _ in ctx.entry.params]
    line = ins.line

    def issue(st, sel):
        t = st.tidx if sel is None else np.asarray(sel)
        tm = np.broadcast_to(np.asarray(tmap(st, sel), np.int64), t.shape)
        sa = np.broadcast_to(np.asarray(src_addr(st, sel), np.int64), t.shape)
        cs = [np.broadcast_to(np.asarray(c(st, sel), np.int64), t.shape) for c in crs]
        q = _stores(st)
        for k in range(t.size):
            lane = int(t[k])
            m = _map_of(st, names, int(tm[k]), line)
            if m["rank"] != dims:
                raise LaunchError(f"CPU executor: cp.async.bulk.tensor.{dims}d at PTX line "
                                  f"{line}: the tensor map has rank {m['rank']}")
            n = m["elem_bytes"] * int(np.prod(m["box"]))
            phys = _tile_at(st, k, int(sa[k]), m, n, "cp.async.bulk.tensor source")
            coords = [int(c[k]) for c in cs]
            _box_elements(st, m, coords, k)          # the box's global bytes: checked now
            q.pending.append((lane, int(q.committed[lane]),
                              int(st.blk[lane]) * st.shared.stride + phys, m, coords, line))
    return issue


def _commit(st, sel):
    q = _stores(st)
    q.committed[st.tidx if sel is None else sel] += 1


def _wait_builder(ctx, ins, parts):
    """cp.async.bulk.wait_group[.read] n: this thread's groups older than the newest n are
    performed (their source read, their global bytes written; .read promises only the
    read, and performing the whole copy is one way to keep that promise)."""
    nv = reader(ctx, ins.operands[0], "u32")

    def wait(st, sel):
        q = _stores(st)
        if not q.pending:
            return
        t = st.tidx if sel is None else np.asarray(sel)
        member = np.zeros(st.T, bool)
        member[t] = True
        limit = q.committed - int(nv(st, sel))
        keep = []
        for e in q.pending:
            if member[e[0]] and e[1] < limit[e[0]]:
                _perform(st, e)
            else:
                keep.append(e)
        q.pending = keep
    return wait


def finish_stores(st) -> None:
    """The batch ended: stores nobody waited for still complete (in issue order), as a
    kernel's outstanding bulk copies do before the grid is done."""
    q = st.__dict__.get("_bulk_stores")
    if q is not None and q.heap is st.heap:
        for e in q.pending:
            _perform(st, e)
        q.pending = []

"""ld / st / atom / red / mov / cvta builders: address computation, memcheck, state spaces.

An address operand `[base+off]` becomes `addr(st, sel) -> int64 lanes`; the state space picks
the buffer (`st.heap` global, `st.shared` per block, `st.local` per thread) whose `index()`
checks every lane before any byte moves.
"""
from __future__ import annotations

import numpy as np

from . import fpmath
from .instrument import track_access
from .memory import GLOBAL_BASE, LOCAL_WINDOW, SHARED_WINDOW
from .opkinds import builds
from .operands import DTYPES, reader, types_of, writer

SPACES = ("param", "global", "shared", "local", "const")
_UDT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
        8: np.dtype(np.uint64)}


def _space(parts):
    return next((p for p in parts[1:] if p in SPACES), "generic")


def _by_space(what: str):
    """Profiler class of a memory instruction: `what` and its state space (ld.global, st.shared,
    atom.generic ...), the split the counters report memory traffic by."""
    return lambda parts: (f"{what}.{_space(parts)}", 0)


def _vec(parts):
    for p in parts:
        if p in ("v2", "v4", "v8"):
            return int(p[1])
    return 1


def address(ctx, op):
    """('mem', base, off) -> f(st, sel) giving int64 addresses (array or scalar)."""
    _, base, off = op
    off64 = np.int64(off)
    if base is None:
        return lambda st, sel: off64
    if base.startswith("%"):
        rt = ctx.reg_type(base)
        if DTYPES[rt].itemsize != 8:        # a 32-bit address (shared memory): wraps at 2**32
            r = reader(ctx, ("reg", base), "u32")
            if off:
                mask = np.int64(0xFFFF_FFFF)
                return lambda st, sel: (r(st, sel).astype(np.int64) + off64) & mask
            return lambda st, sel: r(st, sel).astype(np.int64)
        r = reader(ctx, ("reg", base), "u64")
        if off:
            return lambda st, sel: r(st, sel).astype(np.int64) + off64
        return lambda st, sel: r(st, sel).astype(np.int64)
    sym = reader(ctx, ("sym", base), "u64")
    return lambda st, sel: np.int64(sym(st, sel)) + off64


def locate(ctx, space, access="read"):
    """space -> f(st, sel, addr, nbytes) -> (buffer views, checked byte index array).

    The one path from an address to memory: every instruction that touches global, shared or
    local memory gets its bytes here.  `access` ("read", "write" or "atomic") says what the
    instruction does with them; a checked launch (ctx.mode) wraps each state space's function
    so the sanitizer and the profiler see every access (instrument.track_access)."""
    def glob(st, sel, a, nbytes):
        if np.ndim(a) == 0:
            a = np.full(st.T if sel is None else len(sel), a, np.int64)
        return st.heap.views, st.heap.index(a, nbytes, nbytes)

    def shared(st, sel, a, nbytes):
        rows = st.blk if sel is None else st.blk[sel]
        return st.shared.views, st.shared.index(rows, a, nbytes, nbytes)

    def local(st, sel, a, nbytes):
        rows = st.tidx if sel is None else sel
        return st.local.views, st.local.index(rows, a, nbytes, nbytes)

    def generic(st, sel, a, nbytes):
        a = np.asarray(a, np.int64)
        lo = int(a.min()) if a.size else GLOBAL_BASE
        if SHARED_WINDOW <= lo < LOCAL_WINDOW:
            return shared(st, sel, a - SHARED_WINDOW, nbytes)
        if LOCAL_WINDOW <= lo < GLOBAL_BASE:
            return local(st, sel, a - LOCAL_WINDOW, nbytes)
        return glob(st, sel, a, nbytes)

    if ctx.mode is not None:
        glob, shared, local = (track_access(ctx, sp, access, f) for sp, f in
                               (("global", glob), ("shared", shared), ("local", local)))
    table = {"global": glob, "const": glob, "shared": shared, "local": local, "generic": generic}
    if space not in table:
        ctx.error(f"state space .{space} not supported here")
    return table[space]


def _param_value(ctx, name, typ):
    dt = DTYPES[typ]

    def rd(st, sel):
        return st.param_as(name, dt)
    return rd


@builds("ld", "ldu", cls=_by_space("ld"))
def build_ld(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    space = _space(parts)
    dst, src = ins.operands
    dsts = dst[1] if dst[0] == "vec" else [dst[1]]
    ws = [writer(ctx, ("reg", d) if d else None, typ) for d in dsts]
    if space == "param":
        name = src[1]
        if name in ctx.params:
            rd = _param_value(ctx, name, typ)
        else:
            rd = reader(ctx, ("reg", name), typ)
        w = ws[0]
        return lambda st, sel: w(st, sel, rd(st, sel))
    addr = address(ctx, src)
    loc = locate(ctx, space)
    size = dt.itemsize
    n = len(ws)
    shift = size.bit_length() - 1
    udt = _UDT[size]

    if n == 1:
        w = ws[0]

        def run(st, sel):
            views, idx = loc(st, sel, addr(st, sel), size)
            w(st, sel, views[size][idx >> shift].view(dt))
        return run

    def run_vec(st, sel):
        views, idx = loc(st, sel, addr(st, sel), size * n)
        e = idx >> shift
        v = views[size]
        for k in range(n):
            ws[k](st, sel, v[e + k].view(dt))
    return run_vec


@builds("st", cls=_by_space("st"))
def build_st(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    space = _space(parts)
    dst, src = ins.operands
    srcs = src[1] if src[0] == "vec" else [src]
    rs = [reader(ctx, ("reg", s) if isinstance(s, str) else s, typ) for s in srcs]
    if space == "param":
        w = writer(ctx, ("reg", dst[1]), typ)
        r0 = rs[0]
        return lambda st, sel: w(st, sel, r0(st, sel))
    addr = address(ctx, dst)
    loc = locate(ctx, space, "write")
    size = dt.itemsize
    shift = size.bit_length() - 1
    udt = _UDT[size]
    n = len(rs)

    def run(st, sel):
        views, idx = loc(st, sel, addr(st, sel), size * n)
        e = idx >> shift
        v = views[size]
        for k in range(n):
            val = np.asarray(rs[k](st, sel), dt).view(udt)
            v[e + k if k else e] = val
    return run


# ---- atomics ---------------------------------------------------------------------------------

def _atom_fn(op, dt):
    if op == "add":
        return lambda old, b, c: (old + b).astype(dt)
    if op in ("min", "max"):
        if dt.kind == "f":
            return lambda old, b, c: fpmath.fminmax(old, b, op == "max")
        return lambda old, b, c: (np.maximum if op == "max" else np.minimum)(old, b)
    if op == "exch":
        return lambda old, b, c: b
    if op in ("and", "or", "xor"):
        f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
        return lambda old, b, c: f(old, b)
    if op == "cas":
        return lambda old, b, c: np.where(old == b, c, old).astype(dt)
    if op == "inc":
        return lambda old, b, c: np.where(old >= b, dt.type(0), old + dt.type(1)).astype(dt)
    if op == "dec":
        return lambda old, b, c: np.where((old == 0) | (old > b), b, old - dt.type(1)).astype(dt)
    raise KeyError(op)


def atomic_apply(mem, e, b, c, op, fn, dt):
    """Apply an atomic to element indices `e` of typed view `mem`, serialised in lane order.
    Returns the old values per lane."""
    n = e.size
    order = np.argsort(e, kind="stable")
    es = e[order]
    starts = np.empty(n, bool)
    starts[:1] = True
    np.not_equal(es[1:], es[:-1], out=starts[1:])
    first = np.flatnonzero(starts)
    if first.size == n:       # no collisions: one vectorised step
        old = mem[e].copy()
        mem[e] = fn(old, b, c)
        return old
    b = np.broadcast_to(np.asarray(b, dt), (n,))
    c = np.broadcast_to(np.asarray(c, dt), (n,)) if c is not None else None
    grp = np.cumsum(starts) - 1
    out = np.empty(n, dt)
    if op == "add" and dt.kind in "iu":
        bs = b[order]
        cs = np.cumsum(bs, dtype=dt)
        base = (cs[first] - bs[first])[grp]
        old_s = mem[es] + (cs - bs - base)
        out[order] = old_s
        last = np.r_[first[1:] - 1, n - 1]
        mem[es[last]] = old_s[last] + bs[last]
        return out
    rank = np.arange(n) - first[grp]
    for r in range(int(rank.max()) + 1):
        lanes = order[rank == r]
        ee = e[lanes]
        old = mem[ee].copy()
        mem[ee] = fn(old, b[lanes], c[lanes] if c is not None else None)
        out[lanes] = old
    return out


@builds("atom", "red", cls=_by_space("atom"))
def build_atom(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dt = DTYPES[typ]
    space = _space(parts)
    op = next(p for p in parts[1:] if p in ("add", "min", "max", "exch", "and", "or", "xor",
                                             "cas", "inc", "dec"))
    fn = _atom_fn(op, dt)
    has_dst = parts[0] == "atom"
    ops = ins.operands
    d = writer(ctx, ops[0], typ) if has_dst else None
    rest = ops[1:] if has_dst else ops
    addr = address(ctx, rest[0])
    b = reader(ctx, rest[1], typ)
    c = reader(ctx, rest[2], typ) if len(rest) > 2 else None
    loc = locate(ctx, space, "atomic")
    size = dt.itemsize
    shift = size.bit_length() - 1

    def run(st, sel):
        views, idx = loc(st, sel, addr(st, sel), size)
        mem = views[size].view(dt)
        e = idx >> shift
        bv = np.broadcast_to(np.asarray(b(st, sel), dt), e.shape)
        cv = np.broadcast_to(np.asarray(c(st, sel), dt), e.shape) if c is not None else None
        old = atomic_apply(mem, e, bv, cv, op, fn, dt)
        if d is not None:
            d(st, sel, old)
    return run


# ---- mov / cvta ------------------------------------------------------------------------------

@builds("mov", cls="move")
def build_mov(ctx, ins, parts):
    typ = types_of(parts)[-1]
    dst, src = ins.operands
    dt = DTYPES[typ]
    if src[0] == "vec":          # pack: low element first
        n = len(src[1])
        et = {8: {2: "b32", 4: "b16"}, 4: {2: "b16"}, 2: {2: "b8"}}[dt.itemsize][n]
        rs = [reader(ctx, ("reg", r), et) for r in src[1]]
        w = writer(ctx, dst, typ)
        esz = 8 * DTYPES[et].itemsize
        udt = _UDT[dt.itemsize]

        def pack(st, sel):
            acc = None
            for k, r in enumerate(rs):
                part = np.asarray(r(st, sel)).astype(udt) << udt.type(esz * k)
                acc = part if acc is None else acc | part
            w(st, sel, acc.view(dt) if acc.ndim else acc)
        return pack
    if dst[0] == "vec":          # unpack
        n = len(dst[1])
        et = {8: {2: "b32", 4: "b16"}, 4: {2: "b16"}, 2: {2: "b8"}}[dt.itemsize][n]
        ws = [writer(ctx, ("reg", r) if r else None, et) for r in dst[1]]
        r = reader(ctx, src, typ)
        esz = 8 * DTYPES[et].itemsize
        udt = _UDT[dt.itemsize]
        edt = DTYPES[et]
        mask = (1 << esz) - 1

        def unpack(st, sel):
            v = np.asarray(r(st, sel)).view(udt) if dt.kind != "u" else np.asarray(r(st, sel))
            for k, w in enumerate(ws):
                w(st, sel, ((v >> udt.type(esz * k)) & udt.type(mask)).astype(edt))
        return unpack
    w = writer(ctx, dst, typ)
    r = reader(ctx, src, typ)
    return lambda st, sel: w(st, sel, r(st, sel))


@builds("cvta", cls="move")
def build_cvta(ctx, ins, parts):
    typ = types_of(parts)[-1]
    to = "to" in parts
    space = next(p for p in parts if p in ("global", "shared", "local", "const", "param"))
    window = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space, 0)
    dt = DTYPES[typ]
    delta = dt.type((-window if to else window) & ((1 << (8 * dt.itemsize)) - 1))
    w = writer(ctx, ins.operands[0], typ)
    r = reader(ctx, ins.operands[1], typ)
    if not window:
        return lambda st, sel: w(st, sel, r(st, sel))
    return lambda st, sel: w(st, sel, (r(st, sel) + delta).astype(dt))

"""`for v in pyptx.range(start, stop, step=1, unroll=N)`: an N-fold unrolled loop.

Shape of the lowering (exact for any bounds of any integer type, runtime or constant, either
step sign, zero trips, and `break` / `continue` / `return` in the body):

    trip   = number of iterations, computed once, in unsigned arithmetic (no overflow)
    groups = trip // N,  left = trip % N
    main:  for g in range(groups):   body(v0); body(v0 + step); ...; body(v0 + (N-1)*step)
                                     v0 += N * step
    rest:  while left: body(v0); v0 += step; left -= 1

Every copy assigns the loop variable `base + k*step` from the group's base, so the copies do not
depend on each other (address folding turns `x[v0 + k]` into one register plus an offset).
`continue` in copy k goes to copy k+1, `break` leaves both loops, `return` leaves the kernel:
the control flow of the source loop is kept, nothing is ever skipped.  The remainder loop is a
loop, not N-1 more copies; with constant bounds it has a constant trip count < N and the
optimiser's own full unrolling (passes/unroll.py) removes it.

A runtime step of 0 runs no iteration (as builtin `range` with a signed runtime step does).
"""
from __future__ import annotations

from .. import types as T
from ..ir.core import Const
from . import arith
from .values import PY_SCALARS, is_const

MAX_FACTOR = 64


def range_call_args(cx, call):
    """(start, stop, step) and the unroll factor of a `pyptx.range(...)` call."""
    from .loops import check_range_args
    known = {"step", "unroll"}
    kw = {}
    for k in call.keywords:
        if k.arg not in known:
            raise cx.err(f"pyptx.range() has no keyword '{k.arg}'; it takes start, stop, "
                         f"step=1, unroll=N", call)
        kw[k.arg] = k
    if "step" in kw and len(call.args) == 3:
        raise cx.err("pyptx.range() got step twice (positionally and as step=); write "
                     "pyptx.range(start, stop, step, unroll=N)", call)
    args = [cx.expr(a) for a in call.args]
    if "step" in kw:
        if not args:
            raise cx.err("pyptx.range() needs a stop value: pyptx.range(n, unroll=4)", call)
        args = ([0] if len(args) == 1 else []) + args + [cx.expr(kw["step"].value)]
    cx.set_loc(call)
    args = check_range_args(cx, call, args, "pyptx.range")
    factor = 1
    if "unroll" in kw:
        factor = cx.expr(kw["unroll"].value)
        if isinstance(factor, bool) or not isinstance(factor, int) or not \
                1 <= factor <= MAX_FACTOR:
            raise cx.err(f"pyptx.range(..., unroll=N) needs a compile-time int N from 1 to "
                         f"{MAX_FACTOR} (a literal or a pyptx.constexpr), got "
                         f"{arith.describe(factor)}; write e.g. unroll=4",
                         kw["unroll"].value)
    cx.set_loc(call)
    return args, factor


def _unsigned(t):
    return getattr(T, f"u{t.bits}")


def _counter_type(t):
    return T.u64 if t.bits == 64 else T.u32


def _as_counter(cx, v, t, ct):
    """The bits of `v` (type t) read as an unsigned number of counter type ct."""
    ut = _unsigned(t)
    if t != ut:
        v = arith.emit(cx, "cvt", [v], ut)
    return arith.emit(cx, "cvt", [v], ct) if ut != ct else v


def _count(cx, lo, hi, step_abs, t, ct):
    """Iterations from lo up to hi (exclusive) by the positive step `step_abs` (IR or int)."""
    d = _as_counter(cx, arith.emit(cx, "sub", [hi, lo], t), t, ct)
    if isinstance(step_abs, int) and step_abs == 1:
        n = d
    else:
        one = Const(ct, 1)
        s = Const(ct, step_abs) if isinstance(step_abs, int) else step_abs
        n = arith.emit(cx, "add", [arith.emit(cx, "floordiv",
                                              [arith.emit(cx, "sub", [d, one], ct), s], ct),
                                   one], ct)
    run = arith.emit(cx, "cmp", [lo, hi], T.bool_, pred="lt")
    return arith.emit(cx, "select", [run, n, Const(ct, 0)], ct)


def _trip_count(cx, start, stop, step, t, ct):
    """The number of iterations of range(start, stop, step) as an IR value (or a Python int)."""
    known = [v.value if isinstance(v, Const) else v for v in (start, stop, step)]
    if all(isinstance(v, int) for v in known):
        return len(range(*known))
    start, stop = (arith.convert(cx, v, t) for v in (start, stop))
    if isinstance(step, PY_SCALARS):
        if step > 0:
            return _count(cx, start, stop, step, t, ct)
        return _count(cx, stop, start, -step, t, ct)
    up = _count(cx, start, stop, _as_counter(cx, step, t, ct), t, ct)
    if not t.is_signed:
        nonzero = arith.emit(cx, "cmp", [step, Const(t, 0)], T.bool_, pred="ne")
        return arith.emit(cx, "select", [nonzero, up, Const(ct, 0)], ct)
    neg = _as_counter(cx, arith.emit(cx, "neg", [step], t), t, ct)
    down = _count(cx, stop, start, neg, t, ct)
    zero = Const(t, 0)
    pos = arith.emit(cx, "cmp", [step, zero], T.bool_, pred="gt")
    negative = arith.emit(cx, "cmp", [step, zero], T.bool_, pred="lt")
    return arith.emit(cx, "select", [pos, up, arith.emit(cx, "select", [negative, down,
                                                                        Const(ct, 0)], ct)], ct)


def lower_unrolled(cx, st, args, factor: int) -> None:
    """Lower `for st.target in pyptx.range(*args, unroll=factor)` (factor >= 2)."""
    b = cx.b
    start, stop, step = args
    if is_const(step) and step == 0:
        raise cx.err("pyptx.range() step must not be zero; use e.g. "
                     "pyptx.range(0, n, 1, unroll=4)", st.iter)
    t, weak = arith.promote_many(cx, args, "range")
    if t.is_bool:
        t = T.i32
    ct = _counter_type(t)
    cx.set_loc(st.iter)
    if isinstance(step, Const):
        step = step.value
    step_v = step if is_const(step) else arith.convert(cx, step, t)
    trip = _trip_count(cx, start, stop, step_v, t, ct)
    if isinstance(trip, int):
        groups, left = Const(ct, trip // factor), Const(ct, trip % factor)
    else:
        groups = arith.emit(cx, "floordiv", [trip, Const(ct, factor)], ct)
        left = arith.emit(cx, "floormod", [trip, Const(ct, factor)], ct)
    iv, g, rest = cx.fresh("iv"), cx.fresh("grp"), cx.fresh("left")
    cx.hidden_types[iv] = (t, weak)
    cx.hidden_types[g] = cx.hidden_types[rest] = (ct, False)
    b.write(iv, start if is_const(start) and weak else arith.convert(cx, start, t))
    b.write(g, Const(ct, 0))
    b.write(rest, left)
    assigned = {cx.scope.prefix + n for n in cx.scope.src.assigned_in(st)}
    done = b.new_block("endfor")

    def advance(by):
        """iv + by (by: copies of step), typed like the loop variable."""
        if is_const(step_v):
            delta = step_v * by
        else:
            delta = arith.binop(cx, "mul", step_v, by)
        v = arith.binop(cx, "add", b.read(iv), delta)
        v = arith.convert(cx, v, t) if not is_const(v) else v
        if weak and not is_const(v):
            b.weak.add(v)
        return v

    def loop(counter, limit_pred, copies, latch_updates, exit_to):
        head = b.new_block("for")
        body = b.new_block("body")
        latch = b.new_block("next")
        b.loop_assigned[head] = assigned | {iv, g, rest}
        b.br(head)
        b.block = head
        cx.set_loc(st.iter)
        c = limit_pred(b.read(counter))
        cx.branch(c, body, exit_to)
        b.seal(body)
        b.block = body
        for k in range(copies):
            nxt = latch if k == copies - 1 else b.new_block("unrolled")
            cx.set_loc(st.iter)
            cx.assign_name(st.target.id, b.read(iv) if k == 0 else advance(k))
            cx.scope.loops.append((nxt, done))
            cx.body(st.body)
            cx.scope.loops.pop()
            if b.block is not None:
                b.br(nxt)
            if nxt is not latch:
                b.seal(nxt)
                b.block = nxt if b.preds[nxt] else None
                if b.block is None:
                    break
        b.seal(latch)
        if b.preds[latch]:
            b.block = latch
            cx.set_loc(st.iter)
            latch_updates()
            b.br(head)
        b.seal(head)

    def main_updates():
        b.write(iv, advance(factor))
        b.write(g, arith.emit(cx, "add", [b.read(g), Const(ct, 1)], ct))

    def rest_updates():
        b.write(iv, advance(1))
        b.write(rest, arith.emit(cx, "sub", [b.read(rest), Const(ct, 1)], ct))

    rest_pre = b.new_block("unroll_rest")
    loop(g, lambda v: arith.emit(cx, "cmp", [v, groups], T.bool_, pred="lt"), factor,
         main_updates, rest_pre)
    b.seal(rest_pre)
    b.block = rest_pre
    loop(rest, lambda v: arith.emit(cx, "cmp", [v, Const(ct, 0)], T.bool_, pred="ne"), 1,
         rest_updates, done)
    b.seal(done)
    b.block = done if b.preds[done] else None

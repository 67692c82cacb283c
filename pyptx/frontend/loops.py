"""`for` loops: `range(start, stop, step)` as a CFG loop, `static_range(...)` unrolled,
`pyptx.range(..., unroll=N)` unrolled N-fold with a remainder loop (unroll.py).

A range loop keeps its own hidden induction variable, so assigning the loop variable inside the
body does not change the iteration (as in Python), and after the loop the variable holds the
last value it had in the body (as in Python; it is unchanged if the body never ran).
"""
from __future__ import annotations

import ast
import builtins

from .. import types as T
from ..ir.core import Const
from . import arith, iterables, unroll
from .values import PY_SCALARS, is_const

MAX_UNROLL = 4096


def lower_for(cx, st) -> None:
    if st.orelse:
        raise cx.err("for ... else is not supported; use a flag variable", st)
    it = st.iter
    fn = cx.expr(it.func) if isinstance(it, ast.Call) else None
    from ..dsl import Intrinsic
    if fn is builtins.enumerate:
        counted = iterables.enumerate_range(cx, it)
        if counted is not None:
            call, start = counted
            return _range(cx, st, _range_args(cx, call, "range"), count_from=start)
    ranges = (isinstance(fn, Intrinsic) and fn.intrinsic in ("static_range", "range")) or \
        fn is builtins.range
    if not ranges:
        items = iterables.static_items(cx, it, cx.expr(it))
        return iterables.lower_static_for(cx, st, items)
    if not isinstance(st.target, ast.Name):
        raise cx.err("the loop variable of a range loop must be a single name; write for i in "
                     "range(n) (tuples unpack: for j, v in enumerate(range(n)) or over a "
                     "tuple)", st.target)
    if isinstance(fn, Intrinsic) and fn.intrinsic == "static_range":
        return _static_range(cx, st, _range_args(cx, it, "static_range"))
    if fn is builtins.range:
        return _range(cx, st, _range_args(cx, it, "range"))
    args, factor = unroll.range_call_args(cx, it)
    if factor == 1:
        return _range(cx, st, args)
    return unroll.lower_unrolled(cx, st, args, factor)


def _range_args(cx, call, name):
    if call.keywords:
        raise cx.err(f"{name}() takes no keyword arguments; write {name}(start, stop, step)",
                     call)
    args = [cx.expr(a) for a in call.args]
    cx.set_loc(call)
    return check_range_args(cx, call, args, name)


def check_range_args(cx, call, args, name):
    """1 to 3 integer range arguments -> [start, stop, step]."""
    if not 1 <= len(args) <= 3:
        raise cx.err(f"{name}() takes 1 to 3 arguments; write {name}(n) or "
                     f"{name}(start, stop, step)", call)
    for a in args:
        t, _ = arith.type_of(cx, a)
        if not (t.is_int or (isinstance(a, bool))) or t.is_bool:
            raise cx.err(f"{name}() needs integer arguments, got {t.name}; convert with i32(x)",
                         call)
    if len(args) == 1:
        args = [0, args[0], 1]
    elif len(args) == 2:
        args = [args[0], args[1], 1]
    return args


def _static_int(cx, v, call_node):
    if isinstance(v, Const) and isinstance(v.value, int):
        return v.value
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise cx.err("static_range() needs compile-time ints (literals or pyptx.constexpr "
                 "parameters); use range() for runtime bounds", call_node)


def _static_range(cx, st, args) -> None:
    start, stop, step = (_static_int(cx, a, st.iter) for a in args)
    if step == 0:
        raise cx.err("static_range() step must not be zero; use e.g. "
                     "pyptx.static_range(0, N, 1)", st.iter)
    values = range(start, stop, step)
    if len(values) > MAX_UNROLL:
        raise cx.err(f"static_range() would unroll {len(values)} iterations (limit "
                     f"{MAX_UNROLL}); use range()", st.iter)
    unroll_values(cx, st, values, lambda v: cx.assign_name(st.target.id, v))


def unroll_values(cx, st, values, bind) -> None:
    """The body of `st` once per value, `bind(value)` before each copy; `break`/`continue`
    jump to the end / the next copy."""
    b = cx.b
    jumps = cx.scope.src.has_jumps(st)
    done = b.new_block("unrolled_end") if jumps else None
    for v in values:
        if b.block is None:
            break
        bind(v)
        if not jumps:
            cx.body(st.body)
            continue
        nxt = b.new_block("unrolled")
        cx.scope.loops.append((nxt, done))
        cx.body(st.body)
        cx.scope.loops.pop()
        if b.block is not None:
            b.br(nxt)
        b.seal(nxt)
        b.block = nxt if b.preds[nxt] else None
    if done is not None:
        if b.block is not None:
            b.br(done)
        b.seal(done)
        b.block = done if b.preds[done] else None


def _range(cx, st, args, count_from=None) -> None:
    """A range loop; with `count_from` (an int) it is `enumerate(range(...), count_from)`:
    a hidden i32 counter starts there and goes up by one per iteration."""
    b = cx.b
    start, stop, step = args
    if is_const(step) and step == 0:
        raise cx.err("range() step must not be zero; use e.g. range(0, n, 1)", st.iter)
    t, weak = arith.promote_many(cx, args, "range")
    if t.is_bool:
        t = T.i32
    step_sign = None
    if isinstance(step, PY_SCALARS):
        step_sign = 1 if step > 0 else -1
    elif isinstance(step, Const):
        step_sign = 1 if step.value > 0 else -1
    elif not t.is_signed:
        step_sign = 1
    start_v = arith.convert(cx, start, t) if not (weak and is_const(start)) else start
    stop_v = arith.convert(cx, stop, t) if not is_const(stop) else stop
    step_v = arith.convert(cx, step, t) if not is_const(step) else step
    iv = cx.fresh("iv")
    cx.hidden_types[iv] = (t, weak)
    b.write(iv, start_v if is_const(start_v) else arith.convert(cx, start_v, t))
    cnt = None
    if count_from is not None:
        cnt = cx.fresh("count")
        cx.hidden_types[cnt] = (T.i32, True)
        b.write(cnt, count_from)
    head = b.new_block("for")
    body = b.new_block("body")
    latch = b.new_block("next")
    done = b.new_block("endfor")
    b.loop_assigned[head] = {cx.scope.prefix + n for n in cx.scope.src.assigned_in(st)} | {iv}
    if cnt is not None:
        b.loop_assigned[head].add(cnt)
    b.br(head)
    b.block = head
    i = b.read(iv)
    cx.set_loc(st.iter)
    if step_sign == 1:
        c = arith.compare(cx, "lt", i, stop_v)
    elif step_sign == -1:
        c = arith.compare(cx, "gt", i, stop_v)
    else:
        up = arith.binop(cx, "and", arith.compare(cx, "gt", step_v, 0),
                         arith.compare(cx, "lt", i, stop_v))
        down = arith.binop(cx, "and", arith.compare(cx, "lt", step_v, 0),
                           arith.compare(cx, "gt", i, stop_v))
        c = arith.binop(cx, "or", up, down)
    cx.branch(c, body, done)
    b.seal(body)
    b.block = body
    if cnt is None:
        cx.assign_name(st.target.id, i)
    else:
        cx.assign_target(st.target, (b.read(cnt), i))
    cx.scope.loops.append((latch, done))
    cx.body(st.body)
    cx.scope.loops.pop()
    if b.block is not None:
        b.br(latch)
    b.seal(latch)
    if b.preds[latch]:
        b.block = latch
        cx.set_loc(st.iter)
        nxt = arith.binop(cx, "add", b.read(iv), step_v)
        b.write(iv, arith.convert(cx, nxt, t) if not is_const(nxt) else nxt)
        if weak and not is_const(nxt):
            b.weak.add(nxt)
        if cnt is not None:
            c = arith.binop(cx, "add", b.read(cnt), 1)
            b.write(cnt, arith.convert(cx, c, T.i32))
            b.weak.add(b.read(cnt))
        b.br(head)
    b.seal(head)
    b.seal(done)
    b.block = done if b.preds[done] else None

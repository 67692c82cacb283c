"""Instantiation cache for `@pyptx.func` device functions: lower once, clone at every call.

Why: inlining re-lowers the callee's AST at every call site (and again on every re-walk of the
kernel), and the accurate math functions (`pyptx.math.exp` -> `mathlib.exp_f32` -> `exp_f64` ->
...) are large.  Cloning already-built IR is a value/block renaming, several times cheaper than
AST lowering + type inference.

What a template is: the callee lowered *on its own* (its own `Lowerer`, builder and type fixed
point) into a small region: an entry block standing for the caller's current block, the callee's
blocks, and the continuation block where the call's result is available.  Scalar IR arguments
become `Param` placeholders; Python constants and `Const`s are part of the key and stay in the
template as they are.  Cloning maps placeholders to the caller's values, appends the entry's
instructions to the caller's block, and continues the caller in the continuation block - the
same blocks, instructions, order and locations that inlining in place produces (block names,
hidden-variable hints and the frontend's counters are offset so even the IR text matches).

Only "pure" calls are cached; everything else falls back to inlining in place, which is always
correct: arguments must be scalars (no arrays, tuples or objects); the callee must not touch
shared/local memory, printf or array stores, read a closure, or read a variable that is unset on
some path into it (in place such a read could reach the caller's blocks); lowering must succeed
(errors are reported by the in-place path, with its exact messages).  The cache lives across
compiles: a template records the module globals and attributes it read (`deps`) and is used only
while each still holds the identical object.
"""
from __future__ import annotations

import builtins
import re

from .. import types as T
from ..ir.builder import UNDEF
from ..ir.core import Block, BlockArg, Const, Function, Instr, Param
from .values import PY_SCALARS

ENABLED = True                # False: always inline in place (tests compare the two)
MISS = object()               # "no template: inline in place"
_UNCACHEABLE = object()
_MISSING = object()
_CACHE: dict = {}
_MAX_ENTRIES = 512
_MAX_WALKS = 6
_BLOCK_NAME = re.compile(r"^(.*?)(\d+)$")
_HIDDEN_HINT = re.compile(r"^\$([A-Za-z_]+)(\d+)((?:\.\d+)?)$")   # $ret7, $ret7.1 (tuple item)


class Template:
    __slots__ = ("entry_instrs", "blocks", "n_values", "weak", "result", "ret_index", "deps",
                 "funcs", "n_blocks", "n_names", "params")

    # entry_instrs / each block's instrs: list of (op, operands, type, attrs, succs, out index)
    # operands: int = template value index, else a Const; succs: [(block index, operands)]
    # blocks: [(hint, number, [(arg type, hint, hidden number or None, value index)], instrs,
    #           preds [(block index, k)] with -1 for the entry)]


def instantiate(cx, df, converted: dict):
    """The inlined call's result, or MISS when this call must be inlined in place."""
    if not ENABLED:
        return MISS
    key_parts = []
    seen: dict = {}
    weak = cx.b.weak
    for v in converted.values():
        if isinstance(v, PY_SCALARS):
            key_parts.append((type(v), repr(v)))
        elif isinstance(v, Const):
            key_parts.append(("C", v.type, repr(v.value)))
        elif isinstance(v, (Instr, BlockArg, Param)) and isinstance(v.type, T.ScalarType):
            j = seen.get(id(v))
            if j is not None:
                key_parts.append(("alias", j))
            else:
                seen[id(v)] = len(key_parts)
                key_parts.append((v.type, v in weak))
        else:
            return MISS
    key = (df.py_func, tuple(key_parts), cx.fastmath)
    tpl = _CACHE.get(key)
    if tpl is _UNCACHEABLE:
        return MISS
    if tpl is None or not _valid(tpl):
        tpl = _build(cx, df, converted)
        if len(_CACHE) >= _MAX_ENTRIES:
            _CACHE.clear()
        _CACHE[key] = tpl if tpl is not None else _UNCACHEABLE
        if tpl is None:
            return MISS
    if cx.inline_stack and not tpl.funcs.isdisjoint(cx.inline_stack):
        return MISS                       # recursion: let the in-place path report it
    if cx.deps is not None:
        cx.deps.extend(tpl.deps)
        cx.funcs.update(tpl.funcs)
    return _clone(cx, tpl, list(converted.values()))


def _valid(tpl) -> bool:
    for kind, owner, name, value in tpl.deps:
        if kind == "g":
            if owner.get(name, _MISSING) is not value:
                return False
        elif kind == "b":
            if name in owner or getattr(builtins, name, _MISSING) is not value:
                return False
        elif getattr(owner, name, _MISSING) is not value:
            return False
    return True


# ---- building --------------------------------------------------------------------------------

def _build(cx, df, converted: dict):
    """Lower `df` alone with placeholder parameters; None when the call is not cacheable."""
    from .lower import _consistent
    args = list(converted.values())
    declared: dict = {}
    try:
        for _ in range(_MAX_WALKS):
            tcx, site_block, result, entry = _walk(cx, df, converted, declared)
            final = {k: acc.final() for k, acc in tcx.observed.items()}
            if _consistent(tcx, final):
                break
            declared = final
        else:
            return None
    except Exception:  # noqa: BLE001 - any failure: the in-place path reports it exactly
        return None
    fn = tcx.fn
    if (not tcx.cacheable or tcx.written or tcx.uses_printf or fn.shared or fn.locals
            or fn.consts or fn.dynamic_shared or fn.attrs or fn.params):
        return None
    b = tcx.b
    for d in b.defs.values():                 # a read that would reach the caller's blocks
        if d.get(entry) is UNDEF:
            return None
    for blk in fn.blocks:
        for ins in blk.instrs:
            for v in ins.operands:
                if b.resolve(v) is UNDEF:
                    return None
            for _, ops in ins.succs:
                for v in ops:
                    if b.resolve(v) is UNDEF:
                        return None
    result = _resolve_result(b, result)
    if result is MISS:
        return None
    b.finish()
    if site_block not in fn.blocks or fn.blocks[0] is not entry:
        return None
    return _encode(tcx, fn, entry, site_block, result, args, b)


def _walk(cx, df, converted, declared):
    """One lowering of the callee, mirroring `calls.inline` step by step."""
    from .calls import callee_scope, lower_body
    from .lowering import Lowerer, Scope
    from .source import get_source
    fn = Function(df.name)
    tcx = Lowerer(fn, declared)
    tcx.fastmath = cx.fastmath
    tcx.deps = []
    tcx.funcs = {df.py_func}
    tcx.inline_stack = list(cx.inline_stack)
    tcx.node = cx.node
    b = tcx.b
    entry = b.new_block("entry")
    b.seal(entry)
    b.block = entry
    src = get_source(df.py_func)
    tcx.scope = Scope(src, df.py_func, "k:")      # only for error locations before the switch
    scope, site = callee_scope(tcx, df, src)
    placeholders: dict = {}
    values = {}
    for n, v in converted.items():
        if isinstance(v, (PY_SCALARS, Const)):
            values[n] = v
        else:
            p = placeholders.get(id(v))
            if p is None:
                p = placeholders[id(v)] = Param(n, v.type, -1)
                if v in cx.b.weak:
                    b.weak.add(p)
            values[n] = p
    tcx.placeholders = [values[n] for n in converted]
    tcx.scope, tcx.loc_frozen = scope, True
    tcx.inline_stack.append(df.py_func)
    result = lower_body(tcx, df, src, site, values)
    return tcx, site.block, result, entry


def _resolve_result(b, result):
    if isinstance(result, tuple):
        out = tuple(_resolve_result(b, r) for r in result)
        if any(r is MISS for r in out):
            return MISS
        return type(result)(*out) if type(result) is not tuple else out
    if result is None or isinstance(result, PY_SCALARS):
        return result
    if not isinstance(getattr(result, "type", None), T.ScalarType):
        return MISS                            # an array or object result: inline in place
    r = b.resolve(result)
    return MISS if r is UNDEF else r


def _encode(tcx, fn, entry, site_block, result, args, b) -> Template:
    index: dict = {}                            # id(template value) -> value index
    for p in tcx.placeholders:
        if isinstance(p, Param) and id(p) not in index:
            index[id(p)] = len(index)
    n_params = len(index)
    bindex = {id(blk): k for k, blk in enumerate(fn.blocks)}    # entry is 0
    for blk in fn.blocks:
        for a in blk.args:
            index[id(a)] = len(index)
        for ins in blk.instrs:
            index[id(ins)] = len(index)

    def enc(v):
        got = index.get(id(v))
        if got is not None:
            return got
        if isinstance(v, Const):
            return v
        raise ValueError("template value defined outside the template")

    blocks = []
    for blk in fn.blocks:
        instrs = [(ins.op, [enc(v) for v in ins.operands], ins.type, ins.attrs,
                   [(bindex[id(t)], [enc(v) for v in ops]) for t, ops in ins.succs],
                   index[id(ins)]) for ins in blk.instrs]
        m = _BLOCK_NAME.match(blk.name)
        bargs = []
        for a in blk.args:
            h = _HIDDEN_HINT.match(a.hint)
            bargs.append((a.type, (h.group(1), h.group(3)) if h else a.hint,
                          int(h.group(2)) if h else None,
                          index[id(a)]))
        preds = [(bindex[id(p)], k) for p, k in b.preds.get(blk, ()) if id(p) in bindex]
        blocks.append((m.group(1), int(m.group(2)), bargs, instrs, preds))
    tpl = Template()
    tpl.blocks = blocks
    tpl.entry_instrs = blocks[0][3]
    tpl.n_values = len(index)
    tpl.params = n_params
    tpl.weak = [index[id(v)] for v in b.weak if id(v) in index and index[id(v)] >= n_params]
    tpl.ret_index = bindex[id(site_block)]
    tpl.result = _enc_result(result, enc)
    tpl.deps = tcx.deps
    tpl.funcs = frozenset(tcx.funcs)
    tpl.n_blocks = b.blocks_made - 1            # blocks the in-place path would have created
    tpl.n_names = tcx._n
    tpl.params = [index[id(p)] if isinstance(p, Param) else None for p in tcx.placeholders]
    return tpl


def _enc_result(r, enc):
    if isinstance(r, tuple):
        kind = "tuple" if type(r) is tuple else "complex"       # frontend/complex64.Complex
        return (kind, tuple(_enc_result(x, enc) for x in r))
    if r is None or isinstance(r, PY_SCALARS):
        return ("py", r)
    return ("v", enc(r))


# ---- cloning ---------------------------------------------------------------------------------

def _clone(cx, tpl: Template, args: list):
    b = cx.b
    vals = [None] * tpl.n_values
    for k, slot in enumerate(tpl.params):
        if slot is not None:
            vals[slot] = args[k]
    loc = b.loc
    base_block = b.blocks_made - 1
    base_name = cx._n
    fn_blocks = b.fn.blocks
    new_blocks = [b.block]
    for hint, num, bargs, _, _ in tpl.blocks[1:]:
        nb = Block(f"{hint}{base_block + num}")
        for t, ahint, hidden, slot in bargs:
            a = BlockArg(t, nb, len(nb.args), ahint if hidden is None else
                         f"${ahint[0]}{hidden + base_name}{ahint[1]}")
            nb.args.append(a)
            vals[slot] = a
        fn_blocks.append(nb)
        new_blocks.append(nb)
    b.reserve_blocks(tpl.n_blocks)
    cx._n += tpl.n_names
    created = []
    for blk, (_, _, _, instrs, _) in zip(new_blocks, tpl.blocks):
        out = blk.instrs
        for op, ops, t, attrs, succs, slot in instrs:
            ins = Instr(op, ops, t, dict(attrs) if attrs else {}, loc)
            ins.block = blk
            out.append(ins)
            vals[slot] = ins
            created.append((ins, succs))
    for ins, succs in created:
        ops = ins.operands
        if len(ops) == 2:                         # (no comprehension frame for the usual case)
            x, y = ops
            ins.operands = [vals[x] if x.__class__ is int else x,
                            vals[y] if y.__class__ is int else y]
        else:
            ins.operands = [vals[o] if o.__class__ is int else o for o in ops]
        if succs:
            ins.succs = [(new_blocks[t], [vals[o] if o.__class__ is int else o for o in ops])
                         for t, ops in succs]
    preds = b.preds
    sealed = b.sealed
    for blk, (_, _, _, _, tpreds) in zip(new_blocks[1:], tpl.blocks[1:]):
        preds[blk] = [(new_blocks[p], k) for p, k in tpreds]
        sealed.add(blk)
    weak = b.weak
    for slot in tpl.weak:
        weak.add(vals[slot])
    b.block = new_blocks[tpl.ret_index]
    return _dec_result(tpl.result, vals)


def _dec_result(r, vals):
    kind, x = r
    if kind == "tuple":
        return tuple(_dec_result(e, vals) for e in x)
    if kind == "complex":
        from .complex64 import Complex
        return Complex(*(_dec_result(e, vals) for e in x))
    if kind == "py":
        return x
    return vals[x] if x.__class__ is int else x

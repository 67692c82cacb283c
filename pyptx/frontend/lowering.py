"""The AST walker: statements and expressions of a kernel (and of inlined device functions).

SSA is built on the fly by `pyptx.ir.builder.IRBuilder`.  A variable has one type per function;
the driver (`lower.py`) re-runs this walker with the types it observed when a first
walk had to guess (a loop-carried variable read before its typed assignment).  Control flow with
compile-time conditions (constexpr `if`, `while False`) is folded while lowering, so the dead
side is never lowered.
"""
from __future__ import annotations

import ast
import builtins

import numpy as np

from .. import types as T
from ..errors import CompileError
from ..ir.builder import UNDEF, IRBuilder
from ..ir.core import BlockArg, Const, Instr
from . import arith, memory
from .values import PY_SCALARS, ArrayView, TupleVar, TypeAcc, is_const, make_const

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
           ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.LShift: "lshift",
           ast.RShift: "rshift", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor"}
_CMPOPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt",
           ast.GtE: "ge"}
_UNARY = {ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "invert", ast.Not: "not"}

#: statements that are never supported, with what to write instead
_UNSUPPORTED_STMTS = {
    ast.ClassDef: "classes cannot be defined in a kernel; define them outside (and pass data "
                  "as arrays)",
    ast.FunctionDef: "functions cannot be defined inside a kernel; define a @pyptx.func at "
                     "module level",
    ast.AsyncFunctionDef: "functions cannot be defined inside a kernel; define a @pyptx.func "
                          "at module level",
    ast.Try: "exceptions are not supported in kernels; check conditions with if",
    ast.Raise: "exceptions are not supported in kernels; check conditions with if and return",
    ast.With: "'with' is not supported in kernels; write the statements without it",
    ast.AsyncWith: "'async with' is not supported in kernels; write the statements without it",
    ast.AsyncFor: "'async for' is not supported; use for ... in range(...)",
    ast.Global: "'global' is not supported: kernels cannot assign module variables; write "
                "results into an array parameter",
    ast.Nonlocal: "'nonlocal' is not supported in kernels; write results into an array "
                  "parameter",
    ast.Import: "imports are not allowed inside a kernel; import at module level",
    ast.ImportFrom: "imports are not allowed inside a kernel; import at module level",
    ast.Delete: "'del' is not supported in kernels; leave the name unused or use a new one",
    ast.Assert: "'assert' is not supported in kernels; use if ...: return",
}
if hasattr(ast, "Match"):
    _UNSUPPORTED_STMTS[ast.Match] = "'match' is not supported in kernels; use if/elif"
if hasattr(ast, "TryStar"):
    _UNSUPPORTED_STMTS[ast.TryStar] = "exceptions are not supported in kernels; check conditions with if"

_UNSUPPORTED_EXPRS = {
    ast.Lambda: "lambdas are not supported in kernels; define a @pyptx.func",
    ast.List: "lists are not supported in kernels; use a tuple of values or "
              "pyptx.local.array(n, dtype)",
    ast.Dict: "dicts are not supported in kernels; use separate variables or a tuple",
    ast.Set: "sets are not supported in kernels; use separate variables or a tuple",
    ast.ListComp: "comprehensions are not supported in kernels; write a for loop",
    ast.SetComp: "comprehensions are not supported in kernels; write a for loop",
    ast.DictComp: "comprehensions are not supported in kernels; write a for loop",
    ast.GeneratorExp: "generator expressions are not supported in kernels; write a for loop",
    ast.Await: "'await' is not supported in kernels; kernels are plain def functions",
    ast.Yield: "generators are not supported in kernels (no 'yield'); write results into an "
               "array parameter",
    ast.YieldFrom: "generators are not supported in kernels (no 'yield from')",
    ast.JoinedStr: "f-strings are not supported; pass values to print separately: "
                   "print(\"x =\", x)",
    ast.Starred: "'*' unpacking is not supported in kernels; pass arguments one by one",
    ast.Slice: "slicing is not supported in kernels; index single elements, a[i]",
    ast.NamedExpr: "':=' is not supported in kernels; assign on its own line",
}


#: id(obj) -> obj for objects `Lowerer.compile_time` accepted as themselves (modules,
#: intrinsics, functions, types): the next lookup skips the chain of type checks
_ACCEPTED: dict = {}


class Scope:
    """The names of one function body being lowered (the kernel, or one inlined call)."""
    __slots__ = ("src", "globals", "closure", "prefix", "objvars", "dyn_locals", "loops",
                 "ret", "func", "declared")

    def __init__(self, src, py_func, prefix: str, func=None):
        self.src = src
        self.globals = py_func.__globals__
        self.closure = {}
        if py_func.__closure__:
            for name, cell in zip(py_func.__code__.co_freevars, py_func.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:
                    pass
        self.prefix = prefix
        self.objvars: dict = {}
        self.dyn_locals: set = set()
        self.loops: list = []            # (continue block, break block)
        self.ret = None                  # ReturnSite for device functions, else the exit block
        self.func = func
        self.declared: dict = {}         # local name -> ScalarType from `x: f32 = ...`


class Lowerer:
    """One walk over a kernel.  `declared` maps variable keys to (type, weak) from a previous
    walk; `observed` collects what this walk saw."""

    def __init__(self, fn, declared: dict):
        self.fn = fn
        self.b = IRBuilder(fn, self._phi_type, self._coerce)
        self.declared = declared
        self.observed: dict[str, TypeAcc] = {}
        self.assumed: list = []          # (key, type, weak) decisions to re-check at the end
        self.const_writes: set = set()   # keys that held a Python constant
        self.hidden_types: dict = {}
        self.scope: Scope | None = None
        self.node = None
        self.loc_frozen = False
        self.inline_stack: list = []
        self.written: set = set()
        self.uses_printf = False
        self._n = 0
        # set while building a device-function template (templates.py): what it read from
        # outside, the functions it inlined, and whether it may be cached at all
        self.deps: list | None = None
        self.funcs: set | None = None
        self.cacheable = True
        self.fastmath = False            # approximate f32 math (frontend/fastmath.py)

    # ---- errors ------------------------------------------------------------------------------
    def err(self, message: str, node=None) -> CompileError:
        return self.scope.src.error(node if node is not None else self.node, message)

    def fresh(self, prefix: str) -> str:
        self._n += 1
        return f"${prefix}{self._n}"

    # ---- typing callbacks for the builder ----------------------------------------------------
    def _phi_type(self, var: str, operands):
        if var in self.declared:
            return self.declared[var]
        if var in self.hidden_types:
            return self.hidden_types[var]
        if operands is not None and operands:
            acc = TypeAcc()
            for v in operands:
                if isinstance(v, PY_SCALARS):
                    acc.add(T.literal_type(v), True)
                elif isinstance(getattr(v, "type", None), T.ScalarType):
                    acc.add(v.type, v in self.b.weak)
                elif getattr(v, "type", 0) is None:
                    continue
                else:
                    raise self.err(f"'{var.rsplit(':', 1)[-1]}' holds {arith.describe(v)} on "
                                   f"one path and a number on another; use one kind per name")
            if acc.strong is not None or acc.weak is not None:
                t = acc.final()
                if not var.startswith("$"):
                    self.assumed.append((var, *t))
                return t
        acc = self.observed.get(var)
        t = acc.final() if acc is not None else (T.i32, True)
        if not var.startswith("$"):
            self.assumed.append((var, *t))
        return t

    def _coerce(self, v, t, block):
        if isinstance(v, PY_SCALARS):
            return make_const(v, t)
        if not isinstance(getattr(v, "type", None), T.ScalarType):
            raise self.err(f"a variable holds {arith.describe(v)} on one path and a number on "
                           f"another; use one kind per name")
        if isinstance(v, Const):
            return make_const(v.value, t)
        return self.b.emit_at_end(block, Instr("cvt", [v], t, {}, self.b.loc))

    # ---- variables ---------------------------------------------------------------------------
    def write_scalar(self, key: str, value) -> None:
        t, weak = arith.type_of(self, value)
        decl = self.declared.get(key)
        if decl is not None:
            dt, dweak = decl
            if is_const(value):
                if not dweak:
                    value = arith.convert(self, value, dt)
            elif t != dt:
                value = arith.convert(self, value, dt)
                if dweak and isinstance(value, Instr):
                    self.b.weak.add(value)
        self.observed.setdefault(key, TypeAcc()).add(t, weak)
        if is_const(value):
            self.const_writes.add(key)
        else:
            self.assumed.append((key, value.type, value in self.b.weak))
        self.b.write(key, value)

    def assign_name(self, name: str, value) -> None:
        sc = self.scope
        prev = sc.objvars.get(name)
        if isinstance(value, complex):
            from .complex64 import as_complex
            value = as_complex(self, value)
        if isinstance(value, tuple):
            from .complex64 import Complex, ComplexVar
            kind = ComplexVar if isinstance(value, Complex) else TupleVar
            depth = len(sc.loops)
            if prev is not None and isinstance(prev, TupleVar) and \
                    (type(prev) is ComplexVar) != (kind is ComplexVar):
                raise self.err(f"'{name}' cannot be rebound between a complex number and a "
                               f"tuple; use a new name")
            if prev is not None and not (isinstance(prev, TupleVar) and (
                    prev.n == len(value) or prev.depth == depth)):
                raise self.err(f"'{name}' cannot be rebound to a tuple of another length inside "
                               f"a loop it was bound outside of; use a new name")
            sc.objvars[name] = kind(len(value), depth)
            for k, v in enumerate(value):
                self.assign_name(f"{name}.{k}", v)
            return
        if is_const(value) or isinstance(getattr(value, "type", None), T.ScalarType) and \
                not isinstance(value, type):
            decl = sc.declared.get(name)
            if decl is not None and value is not UNDEF:
                value = arith.convert_declared(self, value, decl, f"the value assigned to '{name}'")
            if prev is not None:
                raise self.err(self._rebind_message(name, prev))
            if value is UNDEF:
                raise self.err(f"'{name}' is used before it is assigned; assign it first, e.g. "
                               f"{name} = 0")
            sc.dyn_locals.add(name)
            self.write_scalar(sc.prefix + name, value)
            return
        if prev is not None and prev is not value:
            raise self.err(self._rebind_message(name, prev))
        if sc.prefix + name in self.b.defs:
            raise self.err(f"'{name}' holds a number elsewhere and cannot also hold "
                           f"{arith.describe(value)}; use a new name")
        if value is None:
            raise self.err("this expression has no value (a call of something that returns "
                           "nothing?)")
        if isinstance(value, (str, bytes)):
            raise self.err("strings are only allowed as print() arguments in kernels; pass the "
                           "string literal to print directly")
        sc.objvars[name] = value

    def _rebind_message(self, name: str, prev) -> str:
        if isinstance(prev, ArrayView):
            what = "an array parameter" if prev.root == name else "an array"
            return (f"'{name}' is {what} and cannot be reassigned; store elements with "
                    f"{name}[i] = ..., or use a new name")
        if isinstance(prev, TupleVar):
            return f"'{name}' holds a tuple and cannot be reassigned to something else; use a new name"
        return (f"'{name}' holds {arith.describe(prev)} and cannot be reassigned; use a new name")

    def load_name(self, name: str):
        sc = self.scope
        obj = sc.objvars.get(name)
        if obj is not None:
            if isinstance(obj, TupleVar):
                from .complex64 import Complex, ComplexVar
                parts = tuple(self.load_name(f"{name}.{k}") for k in range(obj.n))
                return Complex(*parts) if isinstance(obj, ComplexVar) else parts
            return obj
        if name in sc.src.local_names or name in sc.dyn_locals:
            v = self.b.read(sc.prefix + name)
            if v is UNDEF:
                raise self.err(f"'{name}' is used before it is assigned (on every path to "
                               f"here); assign it first, e.g. {name} = 0")
            return v
        return self.global_value(name)

    def global_value(self, name: str):
        sc = self.scope
        g = sc.globals
        if name in sc.closure:           # a free variable: Python reads the cell, not a global
            v = sc.closure[name]
            self.cacheable = False
        elif name in g:
            v = g[name]
            if self.deps is not None:
                self.deps.append(("g", g, name, v))
        elif hasattr(builtins, name):
            v = getattr(builtins, name)
            if self.deps is not None:
                self.deps.append(("b", g, name, v))
        else:
            from .describe import did_you_mean
            known = set(sc.src.local_names) | set(sc.dyn_locals) | set(sc.closure) | set(g)
            hint = did_you_mean(name, known | set(dir(builtins)), quote="'")
            raise self.err(f"name '{name}' is not defined" + (
                hint or "; define it before the kernel or pass it as a parameter"))
        return self.compile_time(v, name)

    def compile_time(self, v, name: str):
        """Check (and adapt) a Python object a kernel refers to by name or attribute."""
        if isinstance(v, PY_SCALARS) or v is None or isinstance(v, str):
            return v
        if _ACCEPTED.get(id(v)) is v:   # accepted as itself before (the checks depend on its
            return v                    # type only)
        if isinstance(v, tuple):         # a module-level tuple of constants, like Numba's
            return tuple(self.compile_time(x, name) for x in v)
        if isinstance(v, complex):
            return v
        if type(v).__module__.startswith("numba."):        # `from numba import float32`
            t = T.from_numba_type(v)
            if t is not None:
                return t
        if isinstance(v, np.generic):
            try:
                return make_const(v.item(), T.from_dtype(v.dtype))
            except KeyError:
                pass
        if isinstance(v, np.ndarray):     # frozen into constant memory, as Numba does
            from .constmem import module_array
            return module_array(self, v, name)
        if isinstance(v, type) and issubclass(v, np.generic):
            try:
                return T.from_dtype(v)
            except KeyError:
                pass
        if is_allowed_object(v) or callable(v):
            if len(_ACCEPTED) >= 1024:
                _ACCEPTED.clear()
            _ACCEPTED[id(v)] = v        # held, so its id stays its own
            return v
        kind = type(v).__name__
        raise self.err(f"'{name}' is a {kind}; kernels can only use int, float and bool "
                       f"constants, pyptx intrinsics and @pyptx.func functions from outside; "
                       f"pass data as array parameters")

    # ---- locations -----------------------------------------------------------------------------
    def set_loc(self, node) -> None:
        self.node = node
        if not self.loc_frozen:
            src = self.scope.src
            # cached on the (long-lived, per-Source) AST node: every walk asks again
            c = getattr(node, "_pyptx_loc", None)
            if c is None or c[0] is not src:
                c = (src, (src.line_of(node), src.col_of(node)))
                try:
                    node._pyptx_loc = c
                except AttributeError:
                    pass
            self.b.loc = c[1]

    # ---- statements ----------------------------------------------------------------------------
    def body(self, stmts) -> None:
        for st in stmts:
            if self.b.block is None:
                return                    # the rest is unreachable (after return/break/...)
            self.stmt(st)

    def stmt(self, st) -> None:
        c = getattr(st, "_pyptx_loc", None)        # set_loc(st), its cached case inline
        if c is not None and not self.loc_frozen and c[0] is self.scope.src:
            self.node = st
            self.b.loc = c[1]
        else:
            self.set_loc(st)
        method = _STMT_DISPATCH.get(type(st))
        if method is None:
            msg = _UNSUPPORTED_STMTS.get(type(st),
                                         "this statement is not supported in kernels; use "
                                         "assignments, if, while, for ... in range(...) and "
                                         "calls")
            raise self.err(msg, st)
        method(self, st)

    def s_pass(self, st):
        pass

    def s_expr(self, st):
        if isinstance(st.value, ast.Constant) and isinstance(st.value.value, str):
            return                        # docstring
        self.expr(st.value)

    def s_assign(self, st):
        value = self.expr(st.value)
        for target in st.targets:
            self.assign_target(target, value)

    def s_annassign(self, st):
        if st.value is None:
            raise self.err("declare a variable with a value: x: f32 = 0.0", st)
        if not isinstance(st.target, ast.Name):
            raise self.err("annotated assignment needs a plain name on the left; write "
                           "x: f32 = 0.0", st)
        ann = None if isinstance(st.annotation, ast.Subscript) else self.expr(st.annotation)
        if not isinstance(ann, T.ScalarType):
            raise self.err("a local variable is declared with a scalar type: write "
                           "x: f32 = 0.0; arrays are parameters or "
                           "pyptx.shared/local.array(...)",
                           st.annotation)
        value = self.expr(st.value)
        self.set_loc(st)
        self.scope.declared[st.target.id] = ann
        self.assign_target(st.target, value)

    def assign_target(self, target, value) -> None:
        self.set_loc(target)
        if isinstance(target, ast.Name):
            self.assign_name(target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, ArrayView) or not isinstance(value, tuple):
                raise self.err(f"cannot unpack {arith.describe(value)} into "
                               f"{len(target.elts)} names; only tuples (and a.shape) unpack, "
                               f"e.g. a, b = x.shape", target)
            if any(isinstance(e, ast.Starred) for e in target.elts):
                raise self.err("starred assignment (a, *b = ...) is not supported; write one "
                               "name per value: a, b, c = t", target)
            if len(value) != len(target.elts):
                raise self.err(f"cannot unpack {len(value)} values into {len(target.elts)} "
                               f"names; write {len(value)} names on the left", target)
            for t, v in zip(target.elts, value):
                self.assign_target(t, v)
        elif isinstance(target, ast.Subscript):
            view, ptr = self.subscript_ptr(target)
            memory.store(self, view, ptr, value)
        elif isinstance(target, ast.Attribute):
            raise self.err("cannot assign to an attribute in a kernel; assign a plain name or "
                           "an array element", target)
        else:
            raise self.err("cannot assign to this expression", target)

    def subscript_ptr(self, node):
        base = self.expr(node.value)
        if not isinstance(base, ArrayView):
            raise self.err(f"only arrays can be assigned by index, not {arith.describe(base)}; "
                           f"store into an array parameter, e.g. out[i] = v", node)
        index = self.index_expr(node.slice)
        self.set_loc(node)
        n_idx = len(index) if isinstance(index, tuple) else 1
        if has_slice(index) or n_idx < base.ndim:
            raise self.err("cannot assign to a slice or a row in a kernel; assign elements, "
                           "e.g. in a loop: a[i, j] = v", node)
        return base, memory.element_ptr(self, base, index)

    def index_expr(self, node):
        if isinstance(node, ast.Slice):
            return lower_slice(self, node)
        if isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice) for e in node.elts):
            return tuple(lower_slice(self, e) if isinstance(e, ast.Slice) else self.expr(e)
                         for e in node.elts)
        return self.expr(node)

    def s_augassign(self, st):
        op = self.binop_name(st.op, st)
        if isinstance(st.target, ast.Name):
            cur = self.load_name(st.target.id)
            value = self.expr(st.value)
            self.set_loc(st)
            self.assign_name(st.target.id, arith.binop(self, op, cur, value))
        elif isinstance(st.target, ast.Subscript):
            view, ptr = self.subscript_ptr(st.target)
            value = self.expr(st.value)
            self.set_loc(st)
            new = arith.binop(self, op, memory.load(self, view, ptr), value)
            memory.store(self, view, ptr, new)
        else:
            raise self.err("augmented assignment needs a name or an array element on the "
                           "left; write x += 1 or a[i] += 1", st)

    def s_if(self, st):
        """if / elif / else; an elif chain in a loop, not one recursion per branch."""
        b = self.b
        outer_merges = []                 # endif blocks of the enclosing ifs of an elif chain
        while True:
            then = b.new_block("then")
            other = b.new_block("else") if st.orelse else None
            merge = b.new_block("endif")
            self.cond(st.test, then, other or merge)
            b.seal(then)
            if b.preds[then]:
                b.block = then
                self.body(st.body)
                if b.block is not None:
                    b.br(merge)
            if other is not None:
                b.seal(other)
            if other is None or not b.preds[other]:
                break
            b.block = other
            if len(st.orelse) == 1 and type(st.orelse[0]) is ast.If:
                outer_merges.append(merge)
                st = st.orelse[0]
                self.set_loc(st)
                continue
            self.body(st.orelse)
            if b.block is not None:
                b.br(merge)
            break
        for k, m in enumerate(reversed(outer_merges + [merge])):     # innermost first
            if k and b.block is not None:
                b.br(m)
            b.seal(m)
            b.block = m if b.preds[m] else None

    def s_while(self, st):
        if st.orelse:
            raise self.err("while ... else is not supported; use a flag variable", st)
        b = self.b
        head = b.new_block("while")
        body = b.new_block("body")
        done = b.new_block("endwhile")
        b.loop_assigned[head] = {self.scope.prefix + n for n in self.scope.src.assigned_in(st)}
        b.br(head)
        b.block = head
        self.cond(st.test, body, done)
        b.seal(body)
        if b.preds[body]:
            b.block = body
            self.scope.loops.append((head, done))
            self.body(st.body)
            self.scope.loops.pop()
            if b.block is not None:
                b.br(head)
        b.seal(head)
        b.seal(done)
        b.block = done if b.preds[done] else None

    def s_for(self, st):
        from .loops import lower_for
        lower_for(self, st)

    def s_break(self, st):
        if not self.scope.loops:
            raise self.err("'break' outside a loop; use it inside for or while (or return)",
                           st)
        self.b.br(self.scope.loops[-1][1])

    def s_continue(self, st):
        if not self.scope.loops:
            raise self.err("'continue' outside a loop; use it inside for or while", st)
        self.b.br(self.scope.loops[-1][0])

    def s_return(self, st):
        from .calls import lower_return
        lower_return(self, st)

    # ---- conditions (branching form of boolean expressions) --------------------------------
    def cond(self, node, if_true, if_false) -> None:
        b = self.b
        if isinstance(node, ast.BoolOp):
            for k, sub in enumerate(node.values):
                if k == len(node.values) - 1:
                    self.cond(sub, if_true, if_false)
                    return
                nxt = b.new_block("and" if isinstance(node.op, ast.And) else "or")
                if isinstance(node.op, ast.And):
                    self.cond(sub, nxt, if_false)
                else:
                    self.cond(sub, if_true, nxt)
                b.seal(nxt)
                if not b.preds[nxt]:
                    return
                b.block = nxt
            return
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self.cond(node.operand, if_false, if_true)
            return
        if isinstance(node, ast.Compare) and len(node.ops) > 1:
            left = self.expr(node.left)
            for k, (op, right_node) in enumerate(zip(node.ops, node.comparators)):
                right = self.expr(right_node)
                self.set_loc(node)
                c = self.compare_op(op, left, right)
                if k == len(node.ops) - 1:
                    self.branch(c, if_true, if_false)
                    return
                nxt = b.new_block("cmp")
                self.branch(c, nxt, if_false)
                b.seal(nxt)
                if not b.preds[nxt]:
                    return
                b.block = nxt
                left = right
            return
        value = self.expr(node)
        self.set_loc(node)
        self.branch(arith.truth(self, value), if_true, if_false)

    def branch(self, c, if_true, if_false) -> None:
        if isinstance(c, bool):
            self.b.br(if_true if c else if_false)
        else:
            self.b.cbr(c, if_true, if_false)

    def compare_op(self, op, left, right):
        pred = _CMPOPS.get(type(op))
        if pred is None:
            what = {ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}[type(op)]
            raise self.err(f"'{what}' is not supported in kernels; compare numbers with == or !=")
        return arith.compare(self, pred, left, right)

    def cond_value(self, node):
        """A boolean expression used as a value: branches joined by a hidden variable."""
        b = self.b
        var = self.fresh("cond")
        t, f, done = b.new_block("true"), b.new_block("false"), b.new_block("join")
        self.cond(node, t, f)
        for blk, val in ((t, True), (f, False)):
            b.seal(blk)
            if b.preds[blk]:
                b.block = blk
                b.write(var, val)
                b.br(done)
        b.seal(done)
        b.block = done
        v = b.read(var)
        return v

    # ---- expressions ----------------------------------------------------------------------------
    def expr(self, node):
        saved = self.node
        # set_loc(node), its cached case inline (this is the hottest call of the walk)
        c = getattr(node, "_pyptx_loc", None)
        if c is not None and not self.loc_frozen and c[0] is self.scope.src:
            self.node = node
            self.b.loc = c[1]
        else:
            self.set_loc(node)
        method = _EXPR_DISPATCH.get(type(node))
        if method is None:
            msg = _UNSUPPORTED_EXPRS.get(type(node), "this kind of expression is not supported "
                                                     "in kernels; write it with arithmetic, "
                                                     "comparisons, calls and a[i] indexing")
            raise self.err(msg, node)
        v = method(self, node)
        self.node = saved
        return v

    def e_constant(self, node):
        v = node.value
        if isinstance(v, (bool, int, float, str)) or v is None:
            return v
        if isinstance(v, complex):
            return v
        raise self.err(f"{type(v).__name__} literals are not supported in kernels; use int, "
                       f"float or bool literals")

    def e_name(self, node):
        return self.load_name(node.id)

    def e_tuple(self, node):
        return tuple(self.expr(e) for e in node.elts)

    def e_binop(self, node):
        a = self.expr(node.left)
        b = self.expr(node.right)
        self.set_loc(node)
        return arith.binop(self, self.binop_name(node.op, node), a, b)

    def binop_name(self, op, node) -> str:
        name = _BINOPS.get(type(op))
        if name is None:             # today only `@`
            raise self.err("the matrix-multiply operator '@' is not supported in kernels; "
                           "write the loop (or use stdlib_kernels.gemm from the host)", node)
        return name

    def e_unaryop(self, node):
        if isinstance(node.op, ast.Not) and not isinstance(node.operand, (ast.Constant, ast.Name)):
            return self.cond_value(node)
        v = self.expr(node.operand)
        self.set_loc(node)
        return arith.unary(self, _UNARY[type(node.op)], v)

    def e_boolop(self, node):
        """`a and b` / `a or b` as a value, with Python semantics: the first operand that decides
        (falsy for `and`, truthy for `or`), else the last; the later operands are evaluated only
        if reached.  The result type is the promotion of every operand's (all bool_ -> bool_)."""
        b = self.b
        var = self.fresh("boolop")
        done = b.new_block("join")
        is_and = isinstance(node.op, ast.And)
        last = len(node.values) - 1
        for k, sub in enumerate(node.values):
            v = self.expr(sub)
            self.set_loc(sub)
            arith.type_of(self, v)                   # a scalar, or a CompileError
            b.write(var, v)
            if k == last:
                b.br(done)
                break
            nxt = b.new_block("and" if is_and else "or")
            c = arith.truth(self, v)
            if is_and:
                self.branch(c, nxt, done)
            else:
                self.branch(c, done, nxt)
            b.seal(nxt)
            if not b.preds[nxt]:
                break
            b.block = nxt
        b.seal(done)
        b.block = done
        self.set_loc(node)
        return b.read(var)

    def e_compare(self, node):
        if len(node.ops) > 1:
            return self.cond_value(node)
        a = self.expr(node.left)
        b = self.expr(node.comparators[0])
        self.set_loc(node)
        return self.compare_op(node.ops[0], a, b)

    def e_ifexp(self, node):
        b = self.b
        var = self.fresh("ifexp")
        t, f, done = b.new_block("then"), b.new_block("else"), b.new_block("join")
        self.cond(node.test, t, f)
        results = []
        for blk, sub in ((t, node.body), (f, node.orelse)):
            b.seal(blk)
            if b.preds[blk]:
                b.block = blk
                v = self.expr(sub)
                if not (is_const(v) or isinstance(getattr(v, "type", None), T.ScalarType)):
                    results.append(v)
                    if len(results) == 2 and results[0] is not results[1]:
                        raise self.err("both sides of 'x if c else y' must be numbers (or the "
                                       "same array); use an if statement for different arrays",
                                       node)
                else:
                    b.write(var, v)
                b.br(done)
        b.seal(done)
        b.block = done
        if results:
            return results[0]
        return b.read(var)

    def e_attribute(self, node):
        value = self.expr(node.value)
        self.set_loc(node)
        attr = node.attr
        if isinstance(value, ArrayView):
            return memory.attribute(self, value, attr)
        if is_complex(value):
            return complex_attribute(self, value, attr)
        if is_const(value) or isinstance(value, (Instr, BlockArg, Const)) or \
                isinstance(value, tuple) or hasattr(value, "index") and hasattr(value, "type"):
            if isinstance(value, tuple):
                raise self.err(f"'.{attr}' is not supported on {arith.describe(value)}")
            raise self.err(f"'.{attr}' is not supported on {arith.describe(value)}: numbers in "
                           f"kernels have no attributes or methods; use a function instead, "
                           f"e.g. abs(x), f32(x) or pyptx.math.sqrt(x)")
        try:
            got = getattr(value, attr)
        except AttributeError:
            from .describe import missing_attribute
            raise self.err(missing_attribute(value, attr, ast.unparse(node.value))) from None
        if self.deps is not None:
            self.deps.append(("a", value, attr, got))
        if isinstance(got, SpecialRegister):
            return arith.emit(self, "sreg", [], T.i32, name=got.sreg)
        return self.compile_time(got, attr)

    def e_subscript(self, node):
        value = self.expr(node.value)
        index = self.index_expr(node.slice)
        self.set_loc(node)
        if isinstance(value, ArrayView):
            n_idx = len(index) if isinstance(index, tuple) else 1
            if has_slice(index) or n_idx < value.ndim:
                return subview(self, value, index)
            return memory.load(self, value, memory.element_ptr(self, value, index))
        if isinstance(value, tuple):
            if isinstance(index, Const):
                index = index.value
            if not isinstance(index, int) or isinstance(index, bool):
                if getattr(index, "type", None) is not None and not isinstance(value, TupleVar):
                    from .parity import tuple_at
                    what, idx = (ast.unparse(x).encode("ascii", "backslashreplace").decode()
                                 for x in (node, node.slice))     # (PTX comments are ASCII)
                    return tuple_at(self, value, index, f"{what} needs {idx}")
                raise self.err("a tuple can only be indexed by a compile-time int "
                               "(e.g. a.shape[0])")
            if not -len(value) <= index < len(value):
                raise self.err(self._index_range_message(node, index, len(value)))
            return value[index]
        if isinstance(value, T.ScalarType):
            raise self.err(f"array types like {value.name}[:] are only for parameter "
                           f"annotations, e.g. def k(x: {value.name}[:]); for a local array use "
                           f"pyptx.local.array(n, {value.name})")
        raise self.err(f"cannot index {arith.describe(value)}; only arrays and tuples can be "
                       f"indexed (e.g. x[i] with an array parameter x)")

    def _index_range_message(self, node, index: int, n: int) -> str:
        base = node.value
        if isinstance(base, ast.Attribute) and base.attr == "shape":
            name = ast.unparse(base.value)
            last = f"{name}.shape[{n - 1}]" if n > 1 else ""
            return (f"{name}.shape[{index}] is out of range: {name} has {n} dimension(s), so "
                    f"write {name}.shape[0]" + (f" .. {last}" if last else ""))
        return (f"tuple index {index} is out of range for a tuple of {n} value(s); use an "
                f"index from 0 to {n - 1}")

    def e_call(self, node):
        return lower_call(self, node)


_STMT_DISPATCH = {
    ast.Pass: Lowerer.s_pass, ast.Expr: Lowerer.s_expr, ast.Assign: Lowerer.s_assign,
    ast.AnnAssign: Lowerer.s_annassign, ast.AugAssign: Lowerer.s_augassign,
    ast.If: Lowerer.s_if, ast.While: Lowerer.s_while, ast.For: Lowerer.s_for,
    ast.Break: Lowerer.s_break, ast.Continue: Lowerer.s_continue, ast.Return: Lowerer.s_return,
}
_EXPR_DISPATCH = {
    ast.Constant: Lowerer.e_constant, ast.Name: Lowerer.e_name, ast.Tuple: Lowerer.e_tuple,
    ast.BinOp: Lowerer.e_binop, ast.UnaryOp: Lowerer.e_unaryop, ast.BoolOp: Lowerer.e_boolop,
    ast.Compare: Lowerer.e_compare, ast.IfExp: Lowerer.e_ifexp,
    ast.Attribute: Lowerer.e_attribute, ast.Subscript: Lowerer.e_subscript,
    ast.Call: Lowerer.e_call,
}

# Helpers the walk calls for nearly every expression, bound once here (an import statement in
# a method costs about a microsecond per call); imported last since they import arith/memory.
from ..dsl import SpecialRegister  # noqa: E402
from .calls import is_allowed_object, lower_call  # noqa: E402
from .complex64 import attribute as complex_attribute, is_complex  # noqa: E402
from .dynshared import subview  # noqa: E402 - views.subview, plus slices of dynamic shared
from .views import has_slice, lower_slice  # noqa: E402

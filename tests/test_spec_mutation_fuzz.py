"""Mutation fuzzing of valid kernels (the compile contract: "No other exception type ever escapes `compile`
for bad user code").

Hypothesis picks one of a handful of valid kernels and a seed; the seed drives 1-3 random AST
mutations (swap operators, replace names/constants with other names, literals, strings, lists,
None; delete/duplicate statements; wrap statements in unsupported constructs; change or drop
annotations; change call arguments, subscripts, comparisons).  The mutated module is written to
a real file and imported (a mutation Python itself rejects at import time is discarded), then
`pyptx.compile` must either succeed — and the conftest fixture assembles the PTX with ptxas — or
raise `pyptx.CompileError` whose line lies inside the module's source.  Nothing else may escape.
"""
from __future__ import annotations

import ast
import os
import random
import sys
import textwrap
import warnings

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
import pyptx  # noqa: E402
from kernel_factory import load_module  # noqa: E402
# imported here, not inside the test: importing it defines @given tests, which hypothesis refuses
# inside a running @given test when this file runs on its own
from test_error_messages import message_problems  # noqa: E402

HEADER = """\
import pyptx
from pyptx import f16, f32, f64, i8, i32, i64, u8, u32, u64, bool_, constexpr
from pyptx import thread_idx, block_idx, block_dim, grid_dim
LIMIT = 4
SCALE = 1.5
"""

KERNELS = [
    # saxpy-like with a guard and a device function returning a tuple
    """
@pyptx.func
def lohi(a: f32, b: f32):
    if a < b:
        return a, b
    return b, a

@pyptx.kernel
def kern(out: f32[:], x: f32[:], y: f32[:], a: f32, n: i32):
    i = block_idx.x * block_dim.x + thread_idx.x
    if i < n and x[i] > 0.0:
        lo, hi = lohi(x[i], y[i])
        out[i] = a * lo + hi
    elif i < n:
        out[i] = x[i] if y[i] > 1.0 else -y[i]
""",
    # loops, break/continue, augmented assignment, integer ops
    """
@pyptx.kernel
def kern(out: i32[:, :], x: i32[:], n: i32):
    t = pyptx.grid(1)
    s = 0
    k = 0
    while k < n:
        k += 1
        if k % 3 == 0:
            continue
        if s > 1000:
            break
        s += (x[t] << 2) ^ (k & 7) | 1
    for j in range(n - 1, -1, -2):
        s -= j // 3
    out[0, t] = s
    out[1, t] += ~s >> 1
""",
    # shared memory, barriers, shuffles, votes, atomics
    """
@pyptx.kernel
def kern(out: f32[:], cnt: u32[:], x: f32[:], T: constexpr):
    s = pyptx.shared.array((2, T), f32)
    t = thread_idx.x
    s[0, t] = x[block_idx.x * T + t]
    pyptx.syncthreads()
    v = s[0, T - 1 - t]
    for d in pyptx.static_range(5):
        v += pyptx.shfl_xor(v, 1 << d)
    if pyptx.vote_any(v > SCALE):
        pyptx.atomic_add(cnt, 0, u32(1))
    old = pyptx.atomic_max(cnt, (1,), pyptx.ballot(v > 0.0))
    out[block_idx.x * T + t] = v + f32(old)
""",
    # casts, math, local arrays, print
    """
@pyptx.kernel
def kern(out: f64[:], h: f16[:], b: u8[:], n: i32):
    i = pyptx.grid(1)
    buf = pyptx.local.array(LIMIT, f32)
    for k in range(LIMIT):
        buf[k] = pyptx.math.exp(f32(h[i]) * k)
    acc = 0.0
    for k in range(LIMIT):
        acc += buf[k]
    if i == 0:
        print("acc", acc, b[i])
    out[i] = f64(acc) + pyptx.math.sqrt(f64(b[i])) + i64(pyptx.popc(u32(b[i])))
""",
]

NAMES = ["i", "t", "x", "out", "n", "s", "k", "LIMIT", "SCALE", "pyptx", "f32", "i32", "print",
         "range", "len", "undefined_thing", "thread_idx", "lohi", "kern", "True", "None", "T",
         "cnt", "buf", "acc", "min", "abs", "object", "type", "open", "__name__", "ast"]
LITERALS = [0, 1, -1, 2**31, 2**63, 2**70, 0.5, -0.0, float("inf"), float("nan"), True, False,
            None, "str", b"bytes", 1j, 255, 256, -129]
BINOPS = [ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift,
          ast.RShift, ast.BitOr, ast.BitXor, ast.BitAnd, ast.MatMult]
CMPOPS = [ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot, ast.In, ast.NotIn]
UNOPS = [ast.UAdd, ast.USub, ast.Not, ast.Invert]
ANNOTATIONS = ["f32", "f32[:]", "f32[:, :]", "i32[:, :, :]", "u8[:]", "bool_", "constexpr", "f16",
               "i64[:]", "int", "float", "list", "'f32'", "None", "f32[1:]", "pyptx", "SCALE",
               "f32[:][:]", "i32[:, :, :, :]", "pyptx.math.exp"]


def _expr(src: str) -> ast.expr:
    return ast.parse(src, mode="eval").body


def _random_expr(r: random.Random) -> ast.expr:
    c = r.random()
    if c < 0.35:
        return ast.Name(r.choice(NAMES), ast.Load())
    if c < 0.7:
        return ast.Constant(r.choice(LITERALS))
    return _expr(r.choice(["[1, 2]", "{1: 2}", "(1, 2.0)", "x[0:2]", "lambda q: q",
                           "[q for q in range(3)]", "f'{n}'", "x.shape", "x.T", "out.view(u32)",
                           "pyptx.shared", "pyptx.grid(3)", "(yield)", "x[i, i]",
                           "pyptx.atomic_add(x, 0, 1)", "print", "range(3)", "...",
                           "pyptx.shfl_down(1, 1)", "pyptx.bitcast(1.0, i32)", "-x",
                           "pyptx.static_range(3)", "n if n else x", "x and n", "not x"]))


def _random_stmt(r: random.Random) -> list[ast.stmt]:
    return ast.parse(r.choice([
        "pass", "return", "return 1", "break", "continue", "x = 1", "n = 1.5", "del n",
        "global LIMIT", "import math", "assert n", "raise ValueError()", "zz = zz + 1",
        "class C: pass", "def g(): pass", "with n: pass", "try:\n pass\nexcept Exception:\n pass",
        "for q in [1, 2]: pass", "for q in range(3):\n pass\nelse:\n pass", "while False: pass",
        "a, b = 1", "a, b = 1, 2, 3", "x[0] = x", "x[0], n = 1.0, 2", "n += x", "print(x)",
        "pyptx.syncthreads()", "pyptx.syncthreads(1)", "pyptx.syncwarp(-1)",
        "async def h(): pass", "q: i32 = 1.5", "q: f32", "x.shape = 1", "n.real = 1",
        "yield 1", "lambda: 0", "nonlocal_q = pyptx.shared.array(n, f32)",
        "m = pyptx.local.array((2, 0), f32)", "pyptx.shared.dynamic(i32)[0] = 1",
    ])).body


class Mutator:
    def __init__(self, r: random.Random):
        self.r = r

    def nodes(self, tree, kinds):
        return [nd for nd in ast.walk(tree) if isinstance(nd, kinds)]

    def mutate(self, tree: ast.Module) -> None:
        r = self.r
        funcs = [f for f in tree.body if isinstance(f, ast.FunctionDef)]
        fn = r.choice(funcs)
        choice = r.randrange(11)
        if choice == 0:                              # swap a binary / aug operator
            ops = self.nodes(fn, (ast.BinOp, ast.AugAssign))
            if ops:
                r.choice(ops).op = r.choice(BINOPS)()
        elif choice == 1:                            # swap a comparison / unary / bool op
            cmps = self.nodes(fn, (ast.Compare, ast.UnaryOp, ast.BoolOp))
            if cmps:
                nd = r.choice(cmps)
                if isinstance(nd, ast.Compare):
                    nd.ops = [r.choice(CMPOPS)() for _ in nd.ops]
                elif isinstance(nd, ast.UnaryOp):
                    nd.op = r.choice(UNOPS)()
                else:
                    nd.op = r.choice([ast.And, ast.Or])()
        elif choice in (2, 3):                       # replace an expression
            exprs = [nd for nd in ast.walk(fn) if isinstance(nd, (ast.Name, ast.Constant,
                                                                   ast.Call, ast.Subscript,
                                                                   ast.Attribute))
                     and nd not in (fn.args.args and [a.annotation for a in fn.args.args])]
            targets = []
            for parent in ast.walk(fn):
                for field, val in ast.iter_fields(parent):
                    if isinstance(val, ast.expr) and val in exprs and \
                            not isinstance(getattr(val, "ctx", None), (ast.Store, ast.Del)):
                        targets.append((parent, field, None))
                    elif isinstance(val, list):
                        for k, v in enumerate(val):
                            if isinstance(v, ast.expr) and v in exprs and \
                                    not isinstance(getattr(v, "ctx", None), (ast.Store, ast.Del)):
                                targets.append((parent, field, k))
            targets = [t for t in targets if not isinstance(t[0], ast.arg)]
            if targets:
                parent, field, k = r.choice(targets)
                new = _random_expr(r)
                if k is None:
                    setattr(parent, field, new)
                else:
                    getattr(parent, field)[k] = new
        elif choice == 4:                            # delete a statement
            body = self._some_body(fn)
            if body and len(body) > 0:
                del body[r.randrange(len(body))]
                if not body:
                    body.append(ast.Pass())
        elif choice == 5:                            # duplicate a statement
            body = self._some_body(fn)
            k = r.randrange(len(body))
            body.insert(r.randrange(len(body) + 1), body[k])
        elif choice == 6:                            # insert an (often unsupported) statement
            body = self._some_body(fn)
            for s in reversed(_random_stmt(r)):
                body.insert(r.randrange(len(body) + 1), s)
        elif choice == 7:                            # wrap statements in a construct
            body = self._some_body(fn)
            k = r.randrange(len(body))
            wrapper = r.choice(["with n:\n    pass", "try:\n    pass\nexcept Exception:\n    pass",
                                "for q in range(2):\n    pass", "while n < 0:\n    pass",
                                "if True:\n    pass", "if n:\n    pass\nelse:\n    pass",
                                "for q in pyptx.static_range(2):\n    pass",
                                "for q in [1, 2]:\n    pass", "def inner():\n    pass",
                                "for q, w in range(2):\n    pass"])
            w = ast.parse(wrapper).body[0]
            w.body = [body[k]]
            body[k] = w
        elif choice == 8:                            # change / drop an annotation
            args = fn.args.args
            if args:
                a = r.choice(args)
                a.annotation = None if r.random() < 0.2 else _expr(r.choice(ANNOTATIONS))
            if r.random() < 0.2:
                fn.returns = _expr(r.choice(ANNOTATIONS))
        elif choice == 9:                            # change call arguments
            calls = self.nodes(fn, ast.Call)
            if calls:
                c = r.choice(calls)
                act = r.randrange(4)
                if act == 0 and c.args:
                    c.args.pop(r.randrange(len(c.args)))
                elif act == 1:
                    c.args.append(_random_expr(r))
                elif act == 2:
                    c.keywords.append(ast.keyword(r.choice(["mask", "value", "dtype", "x", "end",
                                                            "sep"]), _random_expr(r)))
                else:
                    c.args = list(reversed(c.args))
        else:                                        # change a subscript / parameter list
            subs = self.nodes(fn, ast.Subscript)
            if subs and r.random() < 0.7:
                s = r.choice(subs)
                s.slice = r.choice([_expr("(i, i)"), _expr("-1"), _expr("1.5"), _expr("i"),
                                    _expr("(0, 0, 0)"), _random_expr(r)])
            else:
                args = fn.args
                act = r.randrange(4)
                if act == 0 and args.args:
                    args.kwonlyargs.append(args.args.pop())
                    args.kw_defaults.append(None)
                elif act == 1:
                    args.vararg = ast.arg("rest")
                elif act == 2 and args.args:
                    args.defaults = [ast.Constant(1)]
                elif args.args:
                    args.args.insert(0, ast.arg(r.choice(["extra", "q"]), None))

    def _some_body(self, fn) -> list:
        bodies = [fn.body]
        for nd in ast.walk(fn):
            for field in ("body", "orelse"):
                b = getattr(nd, field, None)
                if isinstance(b, list) and b and isinstance(b[0], ast.stmt) and nd is not fn:
                    bodies.append(b)
        return self.r.choice(bodies)


def _mutated_source(base: str, seed: int, n: int) -> str | None:
    tree = ast.parse(HEADER + textwrap.dedent(base))
    m = Mutator(random.Random(seed))
    for _ in range(n):
        m.mutate(tree)
    ast.fix_missing_locations(tree)
    try:
        return ast.unparse(tree) + "\n"
    except Exception:  # noqa: BLE001 - ast.unparse can't render some nonsense trees
        return None


def _check(src: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # SyntaxWarnings of nonsense mutants
        return _check_quiet(src)


def _check_quiet(src: str) -> str:
    try:
        compile(src, "<mutant>", "exec")
    except (SyntaxError, ValueError):
        return "python-rejects"
    try:
        mod = load_module(src)
    except Exception:  # noqa: BLE001 - Python itself fails at import (annotations, decorators)
        return "import-fails"
    k = getattr(mod, "kern", None)
    if not isinstance(k, pyptx.Kernel):
        return "no-kernel"
    nlines = src.count("\n") + 1
    try:
        pyptx.compile(k, constexprs={"T": 32} if "T" in k.py_func.__code__.co_varnames else None)
    except pyptx.CompileError as e:
        assert isinstance(e, SyntaxError)
        assert e.lineno is not None and 1 <= e.lineno <= nlines, (e.lineno, str(e), src)
        assert os.path.basename(e.filename or "").startswith("pyptx_test_mod_"), (e.filename, src)
        text = str(e)
        assert f":{e.lineno}:" in text, text
        assert not message_problems(e.msg), (message_problems(e.msg), e.msg, src)
        return "compile-error"
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"{type(e).__name__}: {e}\n--- mutant ---\n{src}") from e
    return "ok"


@pytest.mark.parametrize("idx", range(len(KERNELS)))
def test_base_kernels_compile(idx):
    src = HEADER + textwrap.dedent(KERNELS[idx])
    assert _check(src) == "ok"


@settings(deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.integers(0, len(KERNELS) - 1), st.integers(0, 2**32 - 1), st.integers(1, 3))
def test_mutated_kernels_only_raise_compile_error(idx, seed, n):
    src = _mutated_source(KERNELS[idx], seed, n)
    assume(src is not None)
    outcome = _check(src)
    assume(outcome not in ("python-rejects", "import-fails", "no-kernel"))


def test_fixed_seed_sweep():
    """A deterministic sweep (the same mutants every run), so regressions show up in CI even
    when hypothesis' random draw misses them."""
    outcomes = {}
    for idx in range(len(KERNELS)):
        for seed in range(40):
            src = _mutated_source(KERNELS[idx], seed * 7919 + idx, 1 + seed % 3)
            if src is not None:
                o = _check(src)
                outcomes[o] = outcomes.get(o, 0) + 1
    assert outcomes.get("compile-error", 0) > 20 and outcomes.get("ok", 0) > 5, outcomes

"""Generated expression kernels, run on the CPU executor, against numpy on the same dtypes.

Hypothesis draws a random expression tree over three input arrays of random dtypes (i8..u64, f16,
f32, f64, bool) and literals; the tree is rendered once as kernel source (`out[i] = <expr>`) and
evaluated once with numpy ufuncs on whole arrays.  Integer results must match bit for bit; float
results too, because the kernels are compiled with fma=False (fma=False is bit-identical to numpy).
A tree numpy rejects (e.g. `&` on floats, a literal that does not fit) must be a CompileError.

Reference semantics where numpy has no single spelling (they are pyptx's documented rules):
  * int / int -> both converted to f32, then divided (integer `/` gives f32; bools
    count as integers here) — when the operands promote to an integer type (i8 with u64 promotes
    to f64, so that divides in f64);
  * `- / // % << >>` on two booleans are CompileErrors (numpy would promote to int8);
  * a boolean with an int literal gives the literal's default type, i32 (numpy: int64);
  * min/max on floats return the non-NaN operand (np.fmin / np.fmax), and -0.0 < +0.0;
  * float -> int casts truncate, saturate, NaN -> 0 (PTX cvt.rzi), see `ref_cast`.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import pyptx
from kernel_factory import make_kernel
from pyptx.ir import parse_function, print_function

INT_TYPES = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
FLOAT_TYPES = ["f16", "f32", "f64"]
ALL_TYPES = INT_TYPES + FLOAT_TYPES + ["bool_"]
NP = {n: pyptx.types.scalar(n).dtype for n in ALL_TYPES}
N = 67                                        # threads (not a multiple of the block)


# ---- the expression tree -----------------------------------------------------------------------

@dataclass
class Node:
    kind: str            # 'arg' 'lit' 'un' 'bin' 'cmp' 'sel' 'cast' 'call'
    op: str = ""
    kids: tuple = ()
    value: object = None

    def src(self) -> str:
        k = self.kind
        if k == "arg":
            return f"{self.op}[i]"
        if k == "lit":
            return repr(self.value)
        if k == "un":
            return f"({self.op}{self.kids[0].src()})" if self.op != "abs" else \
                f"abs({self.kids[0].src()})"
        if k == "bin":
            a, b = (c.src() for c in self.kids)
            if self.op in ("min", "max"):
                return f"{self.op}({a}, {b})"
            if self.op in ("<<", ">>"):
                return f"({a} {self.op} ({b} & {self.value}))"
            return f"({a} {self.op} {b})"
        if k == "cmp":
            return f"({self.kids[0].src()} {self.op} {self.kids[1].src()})"
        if k == "sel":
            c, a, b = (x.src() for x in self.kids)
            return f"({a} if {c} else {b})"
        if k == "cast":
            return f"pyptx.{self.op}({self.kids[0].src()})"
        if k == "call":
            return f"pyptx.math.{self.op}({self.kids[0].src()})"
        raise AssertionError(k)


def ref_cast(x: np.ndarray, to: str) -> np.ndarray:
    dt = NP[to]
    if x.dtype.kind == "f" and dt.kind in "iu":
        info = np.iinfo(dt)
        with np.errstate(invalid="ignore"):
            t = np.trunc(x.astype(np.float64))
            t = np.where(np.isnan(t), 0, t)
            lo = np.where(t <= float(info.min), 1, 0).astype(bool)
            hi = np.where(t >= float(info.max), 1, 0).astype(bool)
            mid = np.clip(t, float(info.min), float(info.max))
            out = np.asarray(mid.astype(dt))
        return np.where(lo, dt.type(info.min), np.where(hi, dt.type(info.max), out))
    if dt == np.bool_:
        return x != 0
    return x.astype(dt)


def evaluate(node: Node, env: dict):
    """numpy's answer for `node` (arrays for args, Python scalars stay weak)."""
    k = node.kind
    if k == "arg":
        return env[node.op]
    if k == "lit":
        return node.value
    if k == "un":
        x = evaluate(node.kids[0], env)
        if _py(x):          # an operator on a bare literal is folded by Python (stays weak)
            return {"-": lambda v: -v, "~": lambda v: ~v, "abs": abs}[node.op](x)
        return {"-": np.negative, "~": np.invert, "abs": np.abs}[node.op](x)
    if k in ("bin", "cmp"):
        a, b = (evaluate(c, env) for c in node.kids)
        op = node.op
        if _py(a) and _py(b):   # literal op literal: Python computes it at compile time
            return _PY_OPS[op](a, b, node.value)
        if op in ("<<", ">>"):     # the source masks the count: `a << (b & m)`
            b = b & node.value if _py(b) else np.bitwise_and(*_bool_with_int(b, node.value))
        a, b = _bool_with_int(a, b)
        if _is_bool(a) and _is_bool(b) and op in ("-", "/", "//", "%", "<<", ">>"):
            raise TypeError(f"pyptx refuses {op} on two booleans")    # docs/decisions.md
        if op == "/" and _is_int(a) and _is_int(b) and np.result_type(a, b).kind in "iub":
            return np.float32(1) * _as_arr(a).astype(np.float32) / _as_arr(b).astype(np.float32)
        if op in ("min", "max"):
            f = np.result_type(a, b)
            if f.kind == "f":
                return _float_min_max(op, a, b)
            return (np.minimum if op == "min" else np.maximum)(a, b)
        if op in ("<<", ">>"):
            return (np.left_shift if op == "<<" else np.right_shift)(a, b)
        fn = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
              "//": np.floor_divide, "%": np.remainder, "&": np.bitwise_and, "|": np.bitwise_or,
              "^": np.bitwise_xor, "<": np.less, "<=": np.less_equal, ">": np.greater,
              ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal}[op]
        return fn(a, b)
    if k == "sel":
        c = evaluate(node.kids[0], env)
        if _py(c):           # a compile-time condition: only the chosen side is compiled
            return evaluate(node.kids[1] if c else node.kids[2], env)
        a, b = evaluate(node.kids[1], env), evaluate(node.kids[2], env)
        # two literals under a run-time condition stay a weak (literal-like) value in pyptx;
        # numpy has no weak arrays, so such trees are not generated (docs/decisions.md)
        assume(not (_py(a) and _py(b)))
        return np.where(c, *_bool_with_int(a, b))
    if k == "cast":
        return ref_cast(_as_arr(evaluate(node.kids[0], env)), node.op)
    if k == "call":
        x = _strong(evaluate(node.kids[0], env))
        return {"sqrt": np.sqrt, "fabs": np.fabs}[node.op](x)
    raise AssertionError(k)


def _float_min_max(op, a, b):
    """pyptx's float min/max (PTX min/max, IEEE 754-2019 minimumNumber): the non-NaN operand,
    and -0.0 < +0.0 whatever the order (numpy's fmin returns either zero)."""
    r = (np.fmin if op == "min" else np.fmax)(a, b)
    both_zero = (np.asarray(a) == 0) & (np.asarray(b) == 0)
    if np.any(both_zero):
        sa, sb = np.signbit(a), np.signbit(b)
        sign = (sa | sb) if op == "min" else (sa & sb)
        r = np.where(both_zero, np.where(sign, -0.0, 0.0).astype(np.asarray(r).dtype), r)
    return r


def _bool_with_int(a, b):
    """A boolean with a Python int: pyptx gives the literal its default type (i32, or i64 when
    it does not fit) where numpy would use its default int (int64); docs/decisions.md."""
    if _is_bool(a) and isinstance(b, int) and not isinstance(b, bool):
        return a, _strong(b)
    if _is_bool(b) and isinstance(a, int) and not isinstance(a, bool):
        return _strong(a), b
    return a, b


def _py(v) -> bool:
    return isinstance(v, (bool, int, float))


_PY_OPS = {
    "+": lambda a, b, m: a + b, "-": lambda a, b, m: a - b, "*": lambda a, b, m: a * b,
    "/": lambda a, b, m: a / b, "//": lambda a, b, m: a // b, "%": lambda a, b, m: a % b,
    "&": lambda a, b, m: a & b, "|": lambda a, b, m: a | b, "^": lambda a, b, m: a ^ b,
    "<<": lambda a, b, m: a << (b & m), ">>": lambda a, b, m: a >> (b & m),
    "min": lambda a, b, m: min(a, b), "max": lambda a, b, m: max(a, b),
    "<": lambda a, b, m: a < b, "<=": lambda a, b, m: a <= b, ">": lambda a, b, m: a > b,
    ">=": lambda a, b, m: a >= b, "==": lambda a, b, m: a == b, "!=": lambda a, b, m: a != b,
}


def _strong(v):
    """A bare literal given to a function takes its default type: bool_, i32 (i64), f32."""
    if isinstance(v, bool):
        return np.bool_(v)
    if isinstance(v, int):
        return np.int32(v) if -2**31 <= v < 2**31 else np.int64(v)
    if isinstance(v, float):
        return np.float32(v)
    return v


def _is_int(v) -> bool:
    """Integer or boolean (for `/`, bools count as integers)."""
    if isinstance(v, (bool, int)):
        return True
    return isinstance(v, (np.ndarray, np.generic)) and v.dtype.kind in "iub"


def _is_bool(v) -> bool:
    return isinstance(v, bool) or (isinstance(v, (np.ndarray, np.generic)) and v.dtype == np.bool_)


def _as_arr(v):
    return v if isinstance(v, np.ndarray) else np.asarray(v)


# ---- generation --------------------------------------------------------------------------------

BIN_OPS = ["+", "-", "*", "/", "//", "%", "&", "|", "^", "<<", ">>", "min", "max"]
CMP_OPS = ["<", "<=", ">", ">=", "==", "!="]


@st.composite
def trees(draw, depth=3):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.integers(0, 4)) == 0:
            lit = draw(st.one_of(st.integers(0, 100), st.sampled_from([0.5, 2.25, 3.0, 1e3]),
                                 st.booleans()))
            return Node("lit", value=lit)
        return Node("arg", op=draw(st.sampled_from(["a", "b", "c"])))
    kind = draw(st.sampled_from(["un", "bin", "bin", "bin", "cmp", "sel", "cast", "call"]))
    sub = trees(depth=depth - 1)
    if kind == "un":
        return Node("un", draw(st.sampled_from(["-", "~", "abs"])), (draw(sub),))
    if kind == "bin":
        op = draw(st.sampled_from(BIN_OPS))
        return Node("bin", op, (draw(sub), draw(sub)), value=draw(st.sampled_from([1, 3, 7])))
    if kind == "cmp":
        return Node("cmp", draw(st.sampled_from(CMP_OPS)), (draw(sub), draw(sub)))
    if kind == "sel":
        cond = Node("cmp", draw(st.sampled_from(CMP_OPS)), (draw(sub), draw(sub)))
        return Node("sel", "", (cond, draw(sub), draw(sub)))
    if kind == "cast":
        return Node("cast", draw(st.sampled_from(ALL_TYPES)), (draw(sub),))
    return Node("call", draw(st.sampled_from(["sqrt", "fabs"])), (draw(sub),))


def random_input(rng: np.random.Generator, tname: str) -> np.ndarray:
    dt = NP[tname]
    if dt == np.bool_:
        return rng.integers(0, 2, N).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        wide = rng.integers(info.min, info.max, N, dtype=dt, endpoint=True)
        small = rng.integers(max(info.min, -20), 21, N).astype(dt)
        return np.where(rng.random(N) < 0.5, wide, small)
    vals = rng.standard_normal(N) * 10.0 ** rng.integers(-3, 4, N)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 65504.0, 1e-7])
    vals = np.where(rng.random(N) < 0.15, rng.choice(specials, N), vals)
    return vals.astype(dt)


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    if got.dtype.kind == "f":
        both_nan = np.isnan(got) & np.isnan(want)
        g = got.view(f"u{got.itemsize}")
        w = want.view(f"u{want.itemsize}")
        return bool(np.all(both_nan | (g == w)))
    return np.array_equal(got, want)


def kernel_source(expr: str, ta: str, tb: str, tc: str, tout: str) -> str:
    return (
        "import pyptx\n"
        "from pyptx import *\n"
        f"def expr_kernel(out: {tout}[:], a: {ta}[:], b: {tb}[:], c: {tc}[:], n: i32):\n"
        "    i = block_idx.x * block_dim.x + thread_idx.x\n"
        "    if i < n:\n"
        f"        out[i] = {expr}\n")


@given(tree=trees(), ta=st.sampled_from(ALL_TYPES), tb=st.sampled_from(ALL_TYPES),
       tc=st.sampled_from(ALL_TYPES), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=settings().max_examples * 4)      # ci profile: 240, nightly: 8000
def test_random_expression_matches_numpy(tree, ta, tb, tc, seed, device):
    rng = np.random.default_rng(seed)
    env = {"a": random_input(rng, ta), "b": random_input(rng, tb), "c": random_input(rng, tc)}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            want = _as_arr(evaluate(tree, env))
            numpy_error = None
        except (TypeError, OverflowError, ValueError, ZeroDivisionError) as e:   # refused
            numpy_error = e
    if numpy_error is None and want.shape != (N,):
        want = np.broadcast_to(want, (N,)).copy()
    tout = pyptx.types.from_dtype(want.dtype).name if numpy_error is None else "f32"
    src = kernel_source(tree.src(), ta, tb, tc, tout)
    k = pyptx.kernel(make_kernel(src), fma=False)
    if numpy_error is not None:
        with pytest.raises(pyptx.CompileError):
            pyptx.compile(k)
        return
    ck = pyptx.compile(k)
    assert print_function(parse_function(ck.ir)) == ck.ir       # the IR text round-trips
    out = np.full(N, 99 if want.dtype != np.bool_ else True, dtype=want.dtype)   # poisoned
    k[(N + 31) // 32, 32](out, env["a"], env["b"], env["c"], N)
    assert same_bits(out, want), (
        f"expression {tree.src()} with a:{ta} b:{tb} c:{tc}\n"
        f"first mismatches: got {out[~_eq_mask(out, want)][:4]} want {want[~_eq_mask(out, want)][:4]}")


def _eq_mask(got, want):
    if got.dtype.kind == "f":
        return (np.isnan(got) & np.isnan(want)) | (got.view(f"u{got.itemsize}") ==
                                                    want.view(f"u{want.itemsize}"))
    return got == want

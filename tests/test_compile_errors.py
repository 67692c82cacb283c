"""Invalid kernels must raise pyptx.CompileError at the right line with a helpful message.

Each case is a module source; the line marked `# ERR` is where the error must point, and the
phrase must appear in the message.  A hypothesis test then mixes supported and unsupported
constructs at random and checks that nothing but CompileError ever escapes the frontend.
"""
from __future__ import annotations

import os
import sys

import pytest
from hypothesis import given, settings, strategies as st

sys.path.insert(0, os.path.dirname(__file__))
import pyptx  # noqa: E402
from kernel_factory import load_module  # noqa: E402
from pyptx.compiler import resolve_param_types  # noqa: E402
from pyptx.frontend import lower_kernel  # noqa: E402

HEAD = ("import pyptx\nfrom pyptx import f32, i32, u32, i64, f16, f64, u8, bool_, constexpr\n"
        "import numpy as np\nLIMIT = 4\nTABLE = [1, 2]\n")


def _k(body: str, params: str = "x: f32[:], n: i32", extra: str = "") -> str:
    lines = body.strip("\n").splitlines()
    return HEAD + extra + f"def k({params}):\n" + "\n".join("    " + ln for ln in lines) + "\n"


_F = "@pyptx.func\n"
CASES = [
    # -- unsupported statements
    (_k("class A: pass  # ERR"), "classes"),
    (_k("def g(): pass  # ERR"), "@pyptx.func"),
    (_k("try:  # ERR\n    pass\nexcept Exception:\n    pass"), "exceptions"),
    (_k("raise ValueError()  # ERR"), "exceptions"),
    (_k("with open('f') as f:  # ERR\n    pass"), "'with'"),
    (_k("global LIMIT  # ERR"), "'global'"),
    (_k("import math  # ERR"), "imports"),
    (_k("del n  # ERR"), "'del'"),
    (_k("assert n > 0  # ERR"), "'assert'"),
    (_k("for i in range(n):\n    pass\nelse:  # ERR\n    pass").replace("    for i", "    for i")
     .replace("else:  # ERR", "else:"), "for ... else"),
    (_k("while n > 0:  # ERR\n    n -= 1\nelse:\n    pass"), "while ... else"),
    (_k("y = [1, 2]  # ERR"), "lists"),
    (_k("y = {1: 2}  # ERR"), "dicts"),
    (_k("y = {1, 2}  # ERR"), "sets"),
    (_k("y = [i for i in range(3)]  # ERR"), "comprehensions"),
    (_k("y = (i for i in range(3))  # ERR"), "generator"),
    (_k("f = lambda v: v  # ERR"), "lambdas"),
    (_k("y = f'{n}'  # ERR"), "f-strings"),
    (_k("yield n  # ERR"), "generators"),
    (_k("if (m := n) > 0:  # ERR\n    pass"), "':='"),
    (_k("s = 'abc'  # ERR\ny = s + n"), "string"),
    # -- names and globals
    (_k("y = undefined_name + 1  # ERR"), "not defined"),
    (_k("y = TABLE[0]  # ERR"), "list"),
    (_k("if n > 0:\n    y = 1\nz = q  # ERR\nq = 2"), "before it is assigned"),
    (_k("x = 1.0  # ERR"), "cannot be reassigned"),
    (_k("y = x\ny = n  # ERR"), "array"),
    (_k("y = x.shape\ny = 1  # ERR"), "tuple"),
    # -- operators
    (_k("y = n is None  # ERR"), "'is'"),
    (_k("y = n in (1, 2)  # ERR"), "'in'"),
    (_k("y = (n > 0) ** 2  # ERR"), "'**'"),
    (_k("y = (n > 0) ** (n > 1)  # ERR"), "'**'"),
    (_k("y = x[n] << 2  # ERR"), "integers"),
    (_k("y = ~x[n]  # ERR"), "'~'"),
    (_k("y = -(n > 0)  # ERR"), "boolean"),
    (_k("y = (n > 0) - (n < 3)  # ERR"), "boolean"),
    (_k("y = 1 // 0  # ERR"), "division by zero"),
    (_k("y = i64(n) + 2**70  # ERR"), "64 bits"),
    (_k("y = u8(n) + 300  # ERR"), "does not fit"),
    # -- arrays
    (_k("y = x[1.5]  # ERR"), "integer"),
    (_k("y = x[x[0]]  # ERR"), "integer"),
    (_k("y = x[n, n]  # ERR"), "dimension"),
    (_k("y = x[::0]  # ERR"), "step cannot be zero"),
    (_k("y = x.strides  # ERR"), ".shape"),
    (_k("y = n.shape  # ERR"), "not supported"),
    (_k("n[0] = 1  # ERR"), "only arrays"),
    (_k("x.foo = 1  # ERR"), "attribute"),
    (_k("x[0] = x  # ERR"), "only numbers"),
    (_k("y = x + 1  # ERR"), "array"),
    (_k("y = x.view(u8)\nz = x.view(i32)\nw = pyptx.shared.array(n, f32)  # ERR"), "compile-time ints"),
    (_k("w = pyptx.shared.array((4, 0), f32)  # ERR"), "positive"),
    (_k("w = pyptx.shared.array(4, 'float')  # ERR"), "scalar type"),
    (_k("w = pyptx.shared.dynamic(f32)\ny = len(w)  # ERR"), "dynamic shared"),
    (_k("pyptx.atomic_add(x, 0, 1.0, 2)  # ERR"), "takes 3 argument"),
    (_k("w = pyptx.local.array(4, f32)\npyptx.atomic_add(w, 0, 1.0)  # ERR"), "local"),
    (_k("w = pyptx.shared.array(4, u8)\npyptx.atomic_add(w, 0, 1)  # ERR"), "not available"),
    # -- calls
    (_k("y = len(x, x)  # ERR"), "takes 1 argument"),
    (_k("y = helper(n)  # ERR", extra="def helper(v):\n    return v\n"), "@pyptx.func"),
    (_k("y = other[1, 1](x, n)  # ERR", extra="@pyptx.kernel\ndef other(x: f32[:], n: i32):\n    pass\n"),
     "kernel"),
    (_k("y = g(n)", extra=_F + "def g(v):\n    return g(v)  # ERR\n"), "recursion"),
    (_k("y = g(n)", extra=_F + "def g(v):\n    return h(v)\n" + _F + "def h(v):\n    return g(v)  # ERR\n"),
     "recursion"),
    (_k("y = g(n, n)  # ERR", extra=_F + "def g(v):\n    return v\n"), "takes 1 argument"),
    (_k("y = g(x)  # ERR", extra=_F + "def g(v: i32):\n    return v\n"), "expected a number"),
    (_k("y = g(n)", extra=_F + "def g(v: i32):\n    if v > 0:\n        return v\n    return v, v  # ERR\n"),
     "different kinds"),
    (_k("y = range(n)  # ERR"), "for i in range"),
    (_k("y = pyptx.static_range(4)  # ERR"), "static_range"),
    (_k("for i in pyptx.static_range(n):  # ERR\n    pass"), "compile-time ints"),
    (_k("for i in range(1.5):  # ERR\n    pass"), "integer"),
    (_k("for i in range(0, 10, 0):  # ERR\n    pass"), "zero"),
    (_k("for i in x:  # ERR\n    pass"), "range"),
    (_k("for i, j in range(3):  # ERR\n    pass"), "single name"),
    (_k("y = pyptx.shfl_xor(x[0])  # ERR"), "missing"),
    (_k("y = pyptx.shfl_xor(x[0], 1.5)  # ERR"), "integer"),
    (_k("y = pyptx.bitcast(n, f64)  # ERR"), "same width"),
    (_k("y = pyptx.popc(x[0])  # ERR"), "integer"),
    (_k("y = pyptx.grid(4)  # ERR"), "1, 2 or 3"),
    (_k("y = pyptx.math.fma(n, n, n)  # ERR"), "float"),
    (_k("y = pyptx.math.exp(x[0], 2)  # ERR"), "one argument"),
    (_k("y = pyptx.nothing(1)  # ERR"), "no attribute"),
    (_k("y = np.sum(x)  # ERR"), "cannot be called in a kernel"),
    (_k("y = int(x)  # ERR"), "number"),
    (_k("y = n(3)  # ERR"), "cannot call"),
    (_k("y = (1, 2)\na, b, c = y  # ERR"), "unpack"),
    (_k("a, b = n  # ERR"), "unpack"),
    (_k("print(n, file=None)  # ERR"), "sep= and end="),
    (_k("return n  # ERR"), "cannot return a value"),
    (_k("y = x.view(f64)  # ERR", params="x: f32[:], n: i32") .replace("x.view(f64)", "pyptx.shared.array(3, u8).view(i32)"), "multiple of"),
    (_k("y = pyptx.shared.array(4, f32)\ny = pyptx.shared.array(4, f32)  # ERR"), "cannot be reassigned"),
    (_k("y = i32  # fine\nz = y[:]  # ERR"), "annotations"),
    (_k("pass", params="x: f32[:], n: constexpr"), "constexpr"),
]


def _expected_line(src: str) -> int:
    for k, line in enumerate(src.splitlines(), 1):
        if "# ERR" in line:
            return k
    return 0


@pytest.mark.parametrize("src,phrase", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_compile_error(src, phrase):
    mod = load_module(src)
    types = resolve_param_types(mod.k)
    with pytest.raises(pyptx.CompileError) as info:
        lower_kernel(mod.k, types, {})
    err = info.value
    assert phrase.lower() in err.msg.lower(), err.msg
    want = _expected_line(src)
    if want:
        assert err.lineno == want, (err.lineno, str(err))
    assert err.filename and err.filename.endswith(".py")
    assert err.offset and err.offset >= 1
    assert "^" in str(err)


def test_corpus_is_large():
    assert len(CASES) >= 60


def test_compile_reports_compile_error():
    mod = load_module(_k("y = [1]  # ERR"))
    with pytest.raises(pyptx.CompileError):
        pyptx.compile(pyptx.kernel(mod.k))


# ---- random kernels: only CompileError (or success) may come out ----------------------------

_STMTS = [
    "y = x[i] + 1", "y = x[i] * n", "y = n // 3", "y = n % -3", "y = x[i] / 2", "y = n / 2",
    "if n > 2:\n    y = 1.5", "while y < 10:\n    y += 1", "for j in range(n):\n    y += j",
    "for j in pyptx.static_range(3):\n    y += j", "y = x[i] if i < n else 0.0",
    "y = i < n and x[i] > 0", "x[i] = y", "x[i] += y", "y = pyptx.math.exp(y)",
    "y = min(y, 3)", "y = abs(y)", "y = pyptx.shfl_xor(y, 1)", "pyptx.syncthreads()",
    "y = pyptx.atomic_add(x, i, 1.0)", "y = i32(y) << 2", "y = f32(y)", "y = -y",
    "y = x.shape[0]", "y = len(x)", "print(y)", "break", "continue", "return",
    # unsupported
    "y = [1]", "y = x[1:2]", "y = y is None", "y = 'a'", "y = x", "y = unknown",
    "y = y ** 0.5", "y = x[y]", "y = helper(y)", "raise ValueError()", "y = {}",
    "y = x[i, i]", "x = 1", "y = pyptx.bitcast(y, u8)", "y = ~y", "y = lambda: 0",
]


@st.composite
def kernel_sources(draw):
    stmts = draw(st.lists(st.sampled_from(_STMTS), min_size=1, max_size=6))
    loop = draw(st.booleans())
    body = ["i = pyptx.grid(1)", "y = 0.0"]
    for s in stmts:
        body.extend(s.splitlines())
    text = "\n".join(body)
    if loop:
        text = "\n".join(body[:2]) + "\nfor it in range(n):\n" + "\n".join(
            "    " + ln for ln in body[2:])
    return _k(text, extra="def helper(v):\n    return v\n")


@settings(max_examples=150)
@given(kernel_sources())
def test_random_kernels_only_raise_compile_error(src):
    try:
        mod = load_module(src)
    except SyntaxError:          # e.g. 'break' outside a loop: Python itself rejects it
        return
    types = resolve_param_types(mod.k)
    try:
        fn = lower_kernel(mod.k, types, {})
    except pyptx.CompileError as e:
        assert e.lineno and e.msg
        from test_error_messages import message_problems
        assert not message_problems(e.msg), (message_problems(e.msg), e.msg)
        return
    assert all(b.terminator is not None for b in fn.blocks)
    ck = pyptx.compile(pyptx.kernel(mod.k))      # the whole pipeline accepts what we produce
    assert ".entry k" in ck.ptx

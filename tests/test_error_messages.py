"""Every CompileError reads as advice to the user: no internal reprs (`Param('n', i32)`,
`<pyptx block_idx>`, `<module 'pyptx' from '/path'>`, `object at 0x...`), no internal class
names, and always something to write instead (including "did you mean ...?" for misspelt names).

The corpus is every bad kernel of test_compile_errors.py plus the cases below (scalar parameters
used like arrays, attributes of DSL objects, misspelt module members, out-of-range shapes ...).
"""
from __future__ import annotations

import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import pyptx  # noqa: E402
from kernel_factory import load_module  # noqa: E402
from pyptx.compiler import resolve_param_types  # noqa: E402
from pyptx.frontend import lower_kernel  # noqa: E402
from test_compile_errors import CASES, HEAD, _F, _k  # noqa: E402

_HELPERS = (_F + "def helper(v):\n    return v + 1\n\n"
            "@pyptx.kernel\ndef other(out: f32[:]):\n    out[0] = 1.0\n\n")

#: (kernel body, phrase the message must contain)
MORE = [
    ("pyptx.atomic_add(n, 0, 1)", "atomic_add(array, index, value)"),
    ("y = n.real", "no attributes or methods"),
    ("y = n.bit_length()", "no attributes or methods"),
    ("y = len(n)", "len(x) with an array"),
    ("y = n[0]", "only arrays and tuples"),
    ("a, b = n", "only tuples"),
    ("y = pyptx.block_idx.w", "pyptx.block_idx.x"),
    ("pyptx.syncthread()", "did you mean pyptx.syncthreads?"),
    ("y = pyptx.math.fast_nope(1.0)", "did you mean pyptx.math.fast_"),
    ("y = pyptx.math.expp(1.0)", "did you mean pyptx.math.exp"),
    ("y = pyptx.thread_idxx.x", "did you mean pyptx.thread_idx?"),
    ("y = np.sqrtt(n)", "did you mean np.sqrt?"),
    ("y = x.shape[1]", "x.shape[0]"),
    ("y = (1, 2)\nz = y[5]", "from 0 to 1"),
    ("y = nn + 1", "did you mean 'n'?"),
    ("y = pyptx.shared.arr(4, f32)", "did you mean pyptx.shared.array?"),
    ("x[0] = pyptx.thread_idx", "pyptx.thread_idx"),
    ("x[0] = pyptx.syncthreads", "pyptx.syncthreads"),
    ("x[0] = helper", "helper"),
    ("x[0] = np", "module numpy"),
    ("x[0] = pyptx.shared", "pyptx.shared.array"),
    ("y = pyptx.thread_idx + 1", "pyptx.thread_idx"),
    ("y = len(pyptx.thread_idx)", "len(x)"),
    ("y = pyptx.syncthreads.x", "remove '.x'"),
    ("y = helper.x", "call it"),
    ("y = pyptx.math(1.0)", "cannot call"),
    ("y = x.sizee", ".shape"),
    ("y = helper(w=1)", "no parameter 'w'"),
    ("y = helper()", "missing the argument"),
    ("y = helper(1, v=2)", "twice"),
    ("y = x.view(n)", "such as f32"),
    ("y = n.shape", "no attributes"),
    ("y = x.shape.foo", "unpack"),
    ("y = x.shape[1.5]", "int"),
    ("y = 1.5 % 0\ny = 2 ** 200", "non-zero"),
    ("y = ~1.5", "i32(x)"),
    ("y = pyptx.vload(n, 0, 4)", "vload(array, i"),
    ("y = pyptx.vload(x, 1, 4)", "use e.g. 0"),
    ("y = pyptx.vload(x, 0, 3)", "lanes"),
    ("pyptx.vstore(x, 0, (x, x))", "tuple of numbers"),
    ("y = pyptx.vlaod(x, 0, 4)", "did you mean pyptx.vload?"),
    ("y = pyptx.vload(x, 0, n)", "e.g. pyptx.vload(a, i, 4)"),
    ("for j in pyptx.range(n, unroll=n):\n    y = j", "unroll=4"),
    ("for j in pyptx.range(0, n, 0, unroll=2):\n    y = j", "step must not be zero"),
]
MORE_CASES = [(_k(body, extra=_HELPERS), phrase) for body, phrase in MORE] + [
    (HEAD + "async def k(x: f32[:], n: i32):\n    x[0] = 1.0\n", "write def k"),
    (HEAD + _F + "async def g(v):\n    return v\n\ndef k(x: f32[:], n: i32):\n"
     "    x[0] = g(1.0)\n", "write def g"),
    (HEAD + "def k(x: f32[:], n: int):\n    x[0] = 1.0\n", "write f32, i32"),
]

#: what must never appear: internal class names and reprs
_INTERNAL = re.compile(r"\b(Param|Instr|BlockArg|ArrayView|TupleVar|Dim3|Intrinsic|MemorySpace|"
                       r"SpecialRegister|DeviceFunction|BoundView|ScalarType|ArrayType|Lowerer|"
                       r"ReturnSite|TypeAcc|NoneType|Const|Function|Kernel)\b|object at 0x|"
                       r"from '/|<class |<module |<function |Traceback")
#: how a message tells the user what to write instead
_ADVICE = re.compile(r"(?<!\w)(write|written|use|did you mean|e\.g\.|pass|convert|call|"
                     r"define|index it|index single|unpack|store|annotate|rewrite|split|"
                     r"decorate|make|assign|compare|reinterpret|allocate|remove|leave|return|"
                     r"import|check|such as|it provides|can only be used as|loop with|"
                     r"pyptx\.\w+\.x)(?!\w)", re.I)


def message_problems(msg: str) -> list[str]:
    problems = []
    unquoted = re.sub(r"'[^']*'", "''", msg)         # operators like '<<' are quoted
    if "<" in unquoted:
        problems.append("shows a <...> repr")
    m = _INTERNAL.search(msg)
    if m:
        problems.append(f"names an internal object ({m.group(0)!r})")
    if not _ADVICE.search(msg):
        problems.append("says nothing about what to write instead")
    return problems


def _message(src: str) -> str:
    mod = load_module(src)
    with pytest.raises(pyptx.CompileError) as info:
        lower_kernel(mod.k.py_func if isinstance(mod.k, pyptx.Kernel) else mod.k,
                     resolve_param_types(mod.k if not isinstance(mod.k, pyptx.Kernel)
                                         else mod.k.py_func), {})
    return info.value.msg


ALL = CASES + MORE_CASES


@pytest.mark.parametrize("src,phrase", ALL, ids=[f"case{i}" for i in range(len(ALL))])
def test_message_is_advice_without_internals(src, phrase):
    msg = _message(src)
    assert phrase.lower() in msg.lower(), msg
    assert not message_problems(msg), (message_problems(msg), msg)


def test_the_checks_catch_what_they_should():
    assert message_problems("got Param Param('n', i32)")
    assert message_problems("Dim3 <pyptx block_idx> has no attribute 'w'")
    assert message_problems("module <module 'pyptx' from '/x/pyptx/__init__.py'> has no "
                            "attribute 'syncthread'")
    assert message_problems("tuple index 1 out of range (length 1)")
    assert not message_problems("'<<' needs integers, got f32; convert with i32(x)")


def test_sized_array_annotation_is_a_clear_type_error():
    with pytest.raises(TypeError, match="no sizes") as info:
        pyptx.f32[4]
    assert not message_problems(str(info.value))


def test_intrinsic_called_from_plain_python_is_a_type_error():
    with pytest.raises(TypeError, match=r"pyptx.syncthreads\(\) can only be used inside") as info:
        pyptx.syncthreads()
    assert not message_problems(str(info.value))


def _plain(x, n):
    x[0] = n


@pytest.mark.parametrize("options,phrase", [
    (dict(signature="f33[:], i32"), "did you mean 'f32'?"),
    (dict(signature="f32[4], i32"), "no sizes"),
    (dict(signature="f32[:"), "write it like"),
    (dict(signature=(float, pyptx.i32)), "float is not a pyptx type"),
    (dict(signature="f32[:], i32", opt_level=object()), "opt_level must be 0, 1 or 2"),
    (dict(signature="f32[:], i32", arch=80), "arch='sm_80'"),
    (dict(signature="f32[:], i32", constexprs={"m": 1}), "constexpr parameters"),
])
def test_compile_option_messages(options, phrase):
    with pytest.raises(pyptx.CompileError) as info:
        pyptx.compile(_plain, **options)
    msg = info.value.msg
    assert phrase in msg, msg
    assert not message_problems(msg), (message_problems(msg), msg)

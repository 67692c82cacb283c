"""Module-level facts: .version/.target selection, parameters, names, line comments,
determinism (emission speed: benchmarks/bench_stages.py)."""
from __future__ import annotations

import re

import numpy as np

import pytest
from ptx_ir_helpers import FnBuilder

from pyptx.errors import CompileError
from pyptx.ir.core import Const
from pyptx.ptx import emit
from pyptx.types import bool_, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64

from test_ptx_ops import build_all_ops
from test_ptx_support import assemble_ok, instructions


def saxpy(name="saxpy", with_lines=False):
    b = FnBuilder(name)
    out, x, y = b.ptr("out", f32), b.ptr("x", f32), b.ptr("y", f32)
    a, n = b.param("a", f32), b.param("n", i32)
    if with_lines:
        b.fn.attrs["source_lines"] = {10: "    i = block_idx.x * block_dim.x + thread_idx.x",
                                      11: "    if i < n:", 12: "        out[i] = a * x[i] + y[i]"}
        b.line = 10
    i = b.op("add", [b.op("mul", [b.sreg("ctaid.x"), b.sreg("ntid.x")], i32), b.sreg("tid.x")],
             i32)
    body, done = b.block("body"), b.block("done")
    b.line = 11 if with_lines else None
    b.cbr(b.op("cmp", [i, n], bool_, pred="lt"), body, [], done, [])
    b.at(body)
    b.line = 12 if with_lines else None
    v = b.op("fma", [a, b.load(b.gep(x, i)), b.load(b.gep(y, i))], f32)
    b.store(b.gep(out, i), v)
    b.br(done)
    b.at(done)
    b.ret()
    return b.fn


@pytest.mark.parametrize("arch,version", [
    ("sm_75", "7.0"), ("sm_80", "7.0"), ("sm_86", "7.1"), ("sm_89", "7.8"), ("sm_90", "7.8"),
    ("sm_90a", "8.0"), ("sm_100", "8.6"), ("sm_120", "8.7")])
def test_version_per_arch(arch, version):
    m = emit(saxpy(), arch)
    assert m.version == version
    assert re.search(rf"^\.version {re.escape(version)}$", m.text, re.M)
    assert re.search(rf"^\.target {arch}$", m.text, re.M)
    assert ".address_size 64" in m.text


def test_version_is_accepted_by_local_ptxas():
    from pyptx.toolchain import max_ptx_isa
    top = tuple(map(int, max_ptx_isa().split(".")))
    for arch in ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120"):
        v = tuple(map(int, emit(saxpy(), arch).version.split(".")))
        assert v <= top
    assemble_ok([(emit(saxpy(), a).text, a) for a in ("sm_100", "sm_120")])


def test_unknown_arch_is_a_compile_error():
    with pytest.raises(CompileError, match="sm_42"):
        emit(saxpy(), "sm_42")


def test_saxpy_shape():
    m = emit(saxpy(), "sm_80")
    ins = instructions(m.text)
    assert [(p.name, p.ptx_type) for p in m.params] == [
        ("out", "u64"), ("x", "u64"), ("y", "u64"), ("a", "f32"), ("n", "s32")]
    assert ".visible .entry saxpy(" in m.text
    assert "fma.rn.f32" in {i.split()[0] for i in ins}
    assert sum(i.startswith("cvta.to.global.u64") for i in ins) == 3
    assert any(re.fullmatch(r"mov\.u32 %r\d+, %ctaid\.x", i) for i in ins)
    assert any(re.fullmatch(r"mov\.u32 %r\d+, %ntid\.x", i) for i in ins)
    assert "ret" in ins


def test_param_types_follow_the_contract():
    b = FnBuilder("params")
    types = [bool_, i8, u8, i16, u16, i32, u32, i64, u64, f16, f32, f64]
    for t in types:
        b.param(f"v_{t.name}", t)
    b.ptr("p", f32)
    b.ret()
    m = emit(b.fn, "sm_80")
    assert [p.ptx_type for p in m.params] == [
        "u8", "s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64", "b16", "f32", "f64", "u64"]
    for p in m.params:
        assert f".param .{p.ptx_type} {p.name}" in m.text
    assemble_ok([(m.text, "sm_80")])


def test_names_are_sanitised_and_unique():
    b = FnBuilder("my kernel.v2")
    b.ptr("x", f32)
    b.param("x.shape0", i32)
    b.param("x_shape0", i32)
    b.param("1st", i32)
    b.param("_", i32)
    b.param("vprintf", i32)
    b.shared("x", f32, 4)
    b.ret()
    m = emit(b.fn, "sm_80")
    names = [p.name for p in m.params]
    assert names[0] == "x" and names[1] == "x_shape0"
    assert len(set(names)) == len(names)
    ident = re.compile(r"^(?:[A-Za-z][A-Za-z0-9_$]*|[_$%][A-Za-z0-9_$]+)$")
    assert all(ident.match(n) for n in names), names
    assert "vprintf" not in names
    assert re.search(r"\.entry my_kernel_v2\(", m.text)
    decl = re.search(r"\.shared \.align 16 \.b8 (\S+)\[16\];", m.text).group(1)
    assert decl not in names
    assemble_ok([(m.text, "sm_80")])


def test_line_comments():
    text = emit(saxpy(with_lines=True), "sm_80").text
    comments = re.findall(r"^\t// line (\d+): (.*)$", text, re.M)
    assert comments == [("10", "i = block_idx.x * block_dim.x + thread_idx.x"),
                        ("11", "if i < n:"), ("12", "out[i] = a * x[i] + y[i]")]
    plain = emit(saxpy(with_lines=True), "sm_80", line_comments=False).text
    assert "// line" not in plain
    assert instructions(plain) == instructions(text)
    assemble_ok([(text, "sm_80")])


def test_deterministic():
    for t in (i8, f16, f32, u64, bool_):
        a = emit(build_all_ops(t), "sm_90").text
        b = emit(build_all_ops(t), "sm_90").text
        assert a == b
    assert emit(saxpy(with_lines=True), "sm_80").text == emit(saxpy(with_lines=True), "sm_80").text


def test_registers_declared_per_class_only_when_used():
    text = emit(saxpy(), "sm_80").text
    decls = dict(re.findall(r"\.reg (\.\w+) (%\w+)<\d+>;", text)[i][::-1]
                 for i in range(len(re.findall(r"\.reg ", text))))
    assert set(decls) == {"%p", "%r", "%rd", "%f"}
    for prefix in decls:
        n = int(re.search(rf"\.reg \.\w+ {prefix}<(\d+)>", text).group(1))
        used = [int(k) for k in re.findall(rf"{prefix}(\d+)\b", text)]
        assert max(used) == n - 1


def test_constants_as_immediates():
    b = FnBuilder("consts")
    x = b.ptr("x", f32)
    d = b.ptr("d", f64)
    h = b.ptr("h", f16)
    q = b.ptr("q", u64)
    b.store(x, b.op("add", [b.load(x), Const(f32, 1.0)], f32))
    b.store(d, b.op("mul", [b.load(d), Const(f64, -2.5)], f64))
    b.store(h, b.op("add", [b.load(h), Const(f16, 1.0)], f16))
    b.store(q, b.op("add", [b.load(q), Const(u64, 2**64 - 1)], u64))
    b.ret()
    text = emit(b.fn, "sm_80").text
    ins = instructions(text)
    assert any(re.fullmatch(r"add\.rn\.f32 %f\d+, %f\d+, 0f3F800000", i) for i in ins)
    assert any(re.fullmatch(r"mul\.rn\.f64 %fd\d+, %fd\d+, 0dC004000000000000", i) for i in ins)
    assert any(re.fullmatch(r"mov\.b16 %h\d+, 0x3C00", i) for i in ins)
    assert any(re.fullmatch(r"add\.u64 %rd\d+, %rd\d+, 0xFFFFFFFFFFFFFFFF", i) for i in ins)
    assemble_ok([(text, "sm_80")])


def test_min_arch_attribute_is_enforced():
    fn = saxpy()
    fn.attrs["min_arch"] = 80
    with pytest.raises(CompileError, match="sm_80"):
        emit(fn, "sm_75")
    assert emit(fn, "sm_80").version == "7.0"


def test_non_ascii_source_gives_ascii_ptx():
    """ptxas 13.0 and the CUDA 13.0 driver's JIT reject a non-ASCII byte anywhere, comments
    included (found on an H100: the RoPE kernel's `# cos θ_i` comment); names and comments
    are spelled in ASCII."""
    import pyptx
    from pyptx import f32

    @pyptx.kernel
    def ker_θ(out: f32[:], x: f32[:]):
        i = pyptx.grid(1)   # α·β
        if i < out.shape[0]:
            β = x[i] * 2.0
            out[i] = β

    ptx = pyptx.compile(ker_θ, arch="sm_80").ptx
    assert ptx.isascii()
    assert "# \\u03b1\\xb7\\u03b2" in ptx              # the comment survives, escaped
    x = np.arange(5, dtype=np.float32)
    out = np.zeros_like(x)
    ker_θ[1, 32](out, x)
    np.testing.assert_array_equal(out, 2 * x)

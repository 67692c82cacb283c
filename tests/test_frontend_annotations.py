"""Annotated locals (`x: f32 = 0`) declare the variable's type; '@' and float dp4a operands are
CompileErrors at the user's line (found by a conformance review)."""
import numpy as np
import pytest

import pyptx
from kernel_factory import load_module

SRC = '''
import pyptx
from pyptx import f32, i32

def declared_f32(out: f32[:], x: f32[:]):
    s: f32 = 0
    for k in range(4):
        s += x[k]
    s = 1            # an int assigned later converts to the declared f32
    out[0] = s / 3
    t: f32 = x[0]
    t = t * 2.0      # f64 literal arithmetic... stays f32 (weak literal)
    out[1] = t

def truncating(out: f32[:]):
    x: i32 = 1.5                              # ERR 16

def later_float(out: f32[:], n: i32):
    x: i32 = 0
    x = out[0]                                # ERR 20
    out[1] = x

def matmul(out: f32[:]):
    out[0] = out[0] @ out[1]                  # ERR 24

def dp4a_float(out: i32[:]):
    out[0] = pyptx.dp4a(1.0, 2, 3)            # ERR 27

def array_annotation(out: f32[:]):
    y: f32[:] = out                           # ERR 30
'''


@pytest.fixture(scope="module")
def mod():
    return load_module(SRC)


def test_declared_type_converts_later_assignments(mod, cpu_device):
    x = np.random.default_rng(3).standard_normal(4).astype(np.float32)
    out = np.full(2, np.nan, np.float32)
    pyptx.kernel(mod.declared_f32, fma=False)[1, 1](out, x)
    assert out[0] == np.float32(1) / np.float32(3)
    assert out[1] == x[0] * np.float32(2)
    assert "f64" not in pyptx.compile(mod.declared_f32).ir


@pytest.mark.parametrize("name,line,phrase", [
    ("truncating", 16, "declared i32"), ("later_float", 20, "declared i32"),
    ("matmul", 24, "'@' is not supported"), ("dp4a_float", 27, "i32 or u32"),
    ("array_annotation", 30, "scalar type"),
])
def test_errors_point_at_the_line(mod, name, line, phrase):
    with pytest.raises(pyptx.CompileError) as ei:
        pyptx.compile(getattr(mod, name))
    assert ei.value.lineno == line and phrase in str(ei.value)


ND_SRC = '''
import pyptx
from pyptx import f32, i32

@pyptx.kernel
def scale4(out: f32[:, :, :, :], x: f32[:, :, :, :]):
    i, j = pyptx.thread_idx.x, pyptx.thread_idx.y
    for k in range(x.shape[2]):
        for m in range(x.shape[3]):
            out[i, j, k, m] = x[i, j, k, m] * 2.0 + x.ndim

def first5(out, x):
    out[0] = x[1, 0, 2, 1, 3] + x.shape[4]
'''


def test_four_and_five_dimensional_array_annotations_compile_and_run(cpu_device):
    """Arrays of any rank already worked through inference; the annotation (and `signature=`)
    accepts the same ranks rather than a TypeError at import."""
    mod = load_module(ND_SRC)
    assert repr(pyptx.f32[:, :, :, :]) == "f32[:, :, :, :]"
    x = np.random.default_rng(4).standard_normal((3, 2, 4, 5)).astype(np.float32)
    out = np.full_like(x, np.nan)
    mod.scale4[1, (3, 2)](out, x)
    np.testing.assert_array_equal(out, x * np.float32(2) + np.float32(4))
    x5 = np.random.default_rng(5).standard_normal((2, 1, 3, 2, 4)).astype(np.float32)
    ck = pyptx.compile(mod.first5, signature="f32[:], f32[:, :, :, :, :]")
    assert ck.signature[1].ndim == 5
    out5 = np.zeros(1, np.float32)
    pyptx.kernel(mod.first5, signature="f32[:], f32[:, :, :, :, :]")[1, 1](out5, x5)
    assert out5[0] == x5[1, 0, 2, 1, 3] + np.float32(4)

"""The launch API (docs/launching.md) on the CPU device: every LaunchError case is raised before anything
runs, and valid launches reach the CPU executor with the flattened, converted PTX argument list.

The compiler is replaced by hand-built CompiledKernels (tests/fake_driver.py) and the CPU executor
by a recorder, so these tests exercise exactly pyptx/runtime/launch.py and the argument checkers
it builds (pyptx/runtime/arg_checks.py).
"""
import numpy as np
import pytest

import pyptx
import pyptx.compiler as pyptx_compiler
from pyptx import bool_, constexpr, f16, f32, f64, i8, i32, i64, u8, u16
from pyptx.errors import LaunchError
from pyptx.runtime import cpu as cpu_pkg
from pyptx.runtime import launch as L

from fake_driver import FakeCompiler, hand_compiled

rng = np.random.default_rng(1234)


class Recorded:
    def __init__(self, array, writable):
        self.array, self.writable = array, writable


@pytest.fixture
def env(monkeypatch):
    """CPU device, a fake compiler that builds the PTX params from the annotations, and a
    recording CPU executor."""
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    runs = []
    monkeypatch.setattr(cpu_pkg, "launch", lambda *a: runs.append(a), raising=False)
    monkeypatch.setattr(cpu_pkg, "ArrayArg", Recorded, raising=False)
    monkeypatch.setattr(L, "_cpu_entry", [])
    L.invalidate_plans()                     # plans hold the executor's ArrayArg class

    def make(k, cx, arg_types):
        from pyptx.compiler import resolve_param_types
        types = resolve_param_types(k.py_func, k.signature, arg_types)
        specs = []
        for n, t in types.items():
            if t is constexpr:
                continue
            if isinstance(t, pyptx.ArrayType):
                specs.append((n, "array", t.dtype, t.ndim, n.startswith("out")))
            else:
                specs.append((n, "scalar", t, 0, False))
        nshared = getattr(k.py_func, "shared_bytes", 0)
        body = f"    .shared .align 4 .b8 tile[{nshared}];\n" if nshared else ""
        return hand_compiled(k.name, specs, body=body)

    fc = FakeCompiler(make)
    monkeypatch.setattr(pyptx_compiler, "compile_kernel", fc)
    return runs, fc


@pyptx.kernel
def saxpy(out: f32[:], x: f32[:], a: f32, n: i32):
    pass


def _saxpy_args(n=100):
    x = rng.standard_normal(n).astype(np.float32)
    return [np.empty_like(x), x, np.float32(rng.standard_normal()), n]


def test_valid_launch_flattens_arrays_and_converts_scalars(env):
    runs, _ = env
    out, x, a, n = _saxpy_args(37)
    saxpy[2, 32](out, x, a, n)
    (ptx, entry, grid, block, flat, shared), = runs
    assert entry == "saxpy" and grid == (2, 1, 1) and block == (32, 1, 1) and shared == 0
    assert flat[0].array is out and flat[0].writable is True and flat[1] == 37
    assert flat[2].array is x and flat[2].writable is False and flat[3] == 37
    assert type(flat[4]) is float and np.float32(flat[4]) == a     # packed without numpy
    assert flat[5] == 37 and type(flat[5]) is int


@pytest.mark.parametrize("bad, what", [
    (lambda a: a.__setitem__(1, a[1].astype(np.float64)), "float64 array"),
    (lambda a: a.__setitem__(1, a[1].reshape(1, -1)), "2 dimensions"),
    (lambda a: a.__setitem__(1, np.stack([a[1], a[1]], 1)[:, 0]), "non-contiguous"),
    (lambda a: a.__setitem__(1, list(a[1])), "list"),
    (lambda a: a.__setitem__(3, 2**31), "out of range"),
    (lambda a: a.__setitem__(3, -2**31 - 1), "out of range"),
    (lambda a: a.__setitem__(3, 2.5), "float"),
    (lambda a: a.__setitem__(3, "7"), "str"),
    (lambda a: a.__setitem__(2, "x"), "str"),
    (lambda a: a.__setitem__(2, 1e39), "out of range"),
    (lambda a: a.__setitem__(0, np.empty((3, 0), np.float32)), "2 dimensions"),
])
def test_bad_argument_is_a_launch_error_naming_the_parameter(env, bad, what):
    runs, _ = env
    args = _saxpy_args()
    bad(args)
    with pytest.raises(LaunchError) as ei:
        saxpy[1, 128](*args)
    names = {0: "out", 1: "x", 2: "a", 3: "n"}
    msg = str(ei.value)
    assert what in msg
    assert any(f"'{n}'" in msg for n in names.values())
    assert runs == []


def test_read_only_array_for_a_written_parameter(env):
    runs, _ = env
    args = _saxpy_args()
    args[0].flags.writeable = False
    with pytest.raises(LaunchError, match="'out'.*read-only"):
        saxpy[1, 128](*args)
    assert runs == []


@pyptx.kernel
def huge(x: f32[:, :]):
    pass


def test_dimension_of_2_31_is_rejected(env):
    runs, _ = env
    with pytest.raises(LaunchError, match="'x'.*2\\*\\*31"):
        huge[1, 1](np.empty((2**31, 0), np.float32))
    huge[1, 1](np.empty((2**31 - 1, 0), np.float32))
    assert runs[0][4][1:] == [2**31 - 1, 0]


def test_missing_and_extra_arguments_are_named(env):
    runs, _ = env
    out, x, a, n = _saxpy_args()
    with pytest.raises(LaunchError, match="missing 2 argument.*'a', 'n'"):
        saxpy[1, 32](out, x)
    with pytest.raises(LaunchError, match="takes 4 argument.*out, x, a, n.*1 extra"):
        saxpy[1, 32](out, x, a, n, 5)
    assert runs == []


@pytest.mark.parametrize("grid, block, what", [
    (1, 1025, "1025 threads"), (1, (32, 33), "1056 threads"), (1, (1, 1, 65), "limit 64"),
    (1, (1, 1025), "1025 threads"), ((1, 65536), 32, "limit 65535"), (0, 32, "at least 1"),
    (1, (32, 1, 1, 1), "1 to 3"), (1.0, 32, "int"), ((2, "a"), 32, "int"), (1, -4, "at least"),
])
def test_bad_geometry(env, grid, block, what):
    runs, _ = env
    with pytest.raises(LaunchError, match=what):
        saxpy[grid, block](*_saxpy_args())
    assert runs == []


def test_geometry_normalised_to_three_dims(env):
    runs, _ = env
    saxpy[(3, 2), np.int64(64)](*_saxpy_args())
    saxpy[(2**31 - 1,), (8, 8, 16)](*_saxpy_args())
    assert runs[0][2:4] == ((3, 2, 1), (64, 1, 1))
    assert runs[1][2:4] == ((2**31 - 1, 1, 1), (8, 8, 16))


def test_shared_memory_over_the_cpu_limit(env):
    runs, _ = env
    x = rng.standard_normal(8).astype(np.float32)
    k = pyptx.Kernel(_static_kernel(16 * 1024))
    k[1, 32](x, 0, shared_mem=32 * 1024)                    # 16 + 32 KiB = the limit
    with pytest.raises(LaunchError, match="16384 bytes of static.*32769 dynamic"):
        k[1, 32](x, 0, shared_mem=32 * 1024 + 1)
    with pytest.raises(LaunchError, match="shared_mem must be >= 0"):
        k[1, 32](x, 0, shared_mem=-1)
    assert len(runs) == 1 and runs[0][5] == 32 * 1024


def _static_kernel(nbytes):
    def k(x: f32[:], n: i32):
        pass
    k.shared_bytes = nbytes
    return k


def test_static_shared_alone_over_the_limit(env):
    runs, _ = env
    k = pyptx.Kernel(_static_kernel(48 * 1024 + 4))
    with pytest.raises(LaunchError, match="49156 bytes of static"):
        k[1, 32](np.ones(4, np.float32), 1)
    assert runs == []


@pyptx.kernel
def scalars(b: bool_, c: i8, d: u8, e: u16, g: i64, h: f16, p: f64):
    pass


def test_scalar_conversion_and_ranges(env):
    runs, _ = env
    v = float(rng.standard_normal())
    scalars[1, 1](True, -128, np.uint8(255), 65535, -2**63, v, 3)
    flat = runs[0][4]
    assert flat[0] is True and flat[1] == -128 and flat[2] == 255 and flat[3] == 65535
    assert flat[4] == -2**63
    assert type(flat[5]) is float and np.float16(flat[5]) == np.float16(v)
    assert type(flat[6]) is float and flat[6] == 3.0
    bad = [(1, -128, 0, 0, 0, 0.0, 0.0, "'b'.*bool"),
           (True, 128, 0, 0, 0, 0.0, 0.0, "'c'.*out of range for int8"),
           (True, 0, -1, 0, 0, 0.0, 0.0, "'d'.*out of range for uint8"),
           (True, 0, 0, 65536, 0, 0.0, 0.0, "'e'.*out of range"),
           (True, 0, 0, 0, 2**63, 0.0, 0.0, "'g'.*out of range"),
           (True, 0, 0, 0, 0, 65520.0, 0.0, "'h'.*out of range for float16"),
           (True, 0, 0, 0, 0, 1.0, 10**400, "'p'.*out of range"),
           (True, 0, 0, 0, 0, True, 0.0, "'h'.*expected a number")]
    for *args, what in bad:
        with pytest.raises(LaunchError, match=what):
            scalars[1, 1](*args)
    assert len(runs) == 1
    scalars[1, 1](np.bool_(False), 0, 0, 0, 0, float("inf"), float("nan"))   # inf/nan pass
    assert np.isinf(runs[1][4][5]) and np.isnan(runs[1][4][6])


def test_unannotated_parameters_are_inferred_from_arguments(env):
    runs, fc = env

    @pyptx.kernel
    def untyped(out, x, n, big, a, d, flag):
        pass

    x = rng.standard_normal((4, 3)).astype(np.float64)
    untyped[1, 1](np.empty(5, np.int16), x, 7, 2**40, 1.5, np.float64(2.0), False)
    t = fc.requests[-1]["arg_types"]
    assert t == {"out": i16_arr(), "x": f64[:, :], "n": i32, "big": i64, "a": f32,
                 "d": f64, "flag": bool_}
    untyped[1, 1](np.empty(5, np.int16), x, 8, 2**40 + 1, 2.5, np.float64(1.0), True)
    assert len(fc.requests) == 1                 # same types: the plan is reused
    untyped[1, 1](np.empty(5, np.int16), x.astype(np.float32), 8, 1, 2.5, 1.0, True)
    assert fc.requests[-1]["arg_types"]["x"] == f32[:, :]
    assert fc.requests[-1]["arg_types"]["big"] == i32
    with pytest.raises(LaunchError, match="'x'.*cannot infer"):
        untyped[1, 1](np.empty(5, np.int16), [1.0], 8, 1, 2.5, 1.0, True)


def i16_arr():
    return pyptx.i16[:]


def test_constexpr_from_launch_and_from_specialize(env):
    runs, fc = env

    @pyptx.kernel
    def tiled(x: f32[:], BLOCK: constexpr, n: i32):
        pass

    x = rng.standard_normal(16).astype(np.float32)
    tiled[1, 32](x, 128, 16)
    tiled[1, 32](x, 128, 9)
    assert len(fc.requests) == 1 and fc.requests[0]["constexprs"] == {"BLOCK": 128}
    assert runs[1][4][1:] == [16, 9]             # the constexpr is not a PTX parameter
    tiled[1, 32](x, np.int32(64), 16)
    assert fc.requests[-1]["constexprs"] == {"BLOCK": 64}
    with pytest.raises(LaunchError, match="'BLOCK' is a constexpr"):
        tiled[1, 32](x, "64", 16)
    spec = tiled.specialize(BLOCK=256)
    spec[1, 32](x, 5)
    with pytest.raises(LaunchError, match="takes 2 argument"):
        spec[1, 32](x, 256, 5)


def test_device_array_on_cpu_is_a_private_host_copy(env):
    runs, _ = env
    x = rng.standard_normal(10).astype(np.float32)
    d = pyptx.to_device(x)
    assert d.shape == (10,) and d.dtype == np.float32 and d.ndim == 1 and d.size == 10
    assert not hasattr(d, "__cuda_array_interface__")
    x[0] += 1.0
    assert np.array_equal(d.copy_to_host()[1:], x[1:]) and d.copy_to_host()[0] != x[0]
    out = pyptx.to_device(np.zeros(10, np.float32))
    saxpy[1, 32](out, d, 1.0, 10)
    flat = runs[0][4]
    assert flat[0].array is out._host and flat[2].array is d._host
    flat[0].array[:] = 7                         # what the executor would write
    assert np.all(out.copy_to_host() == 7)
    with pytest.raises(LaunchError, match="'x'.*float64"):
        saxpy[1, 32](out, pyptx.to_device(x.astype(np.float64)), 1.0, 10)


def test_bad_device_setting(monkeypatch):
    monkeypatch.setenv("PYPTX_DEVICE", "tpu")
    with pytest.raises(pyptx.DeviceError, match="auto, gpu or cpu"):
        pyptx.device()
    monkeypatch.setenv("PYPTX_DEVICE", "cpu")
    assert pyptx.device() == "cpu"

"""`pyptx.math.fast_*`: one PTX `.approx` instruction each (plus a scaling multiply for fast_exp /
fast_log), and results on the executor within the error bounds NVIDIA documents for them
(docs/math.md).  Also the accurate `rsqrt`, which uses no `.approx`."""
import numpy as np
import pytest

import pyptx
from pyptx import f32, i32
from test_mathlib_accuracy import ulp_distance

N = 1 << 16


def _kernel(name):
    fn = getattr(pyptx.math, name)

    def k(out: f32[:], x: f32[:], n: i32):
        i = pyptx.grid(1)
        if i < n:
            out[i] = fn(x[i])
    k.__name__ = f"mathlib_{name}"
    return pyptx.kernel(k)


def _run(name, x):
    out = np.full_like(x, np.nan)
    _kernel(name)[(len(x) + 255) // 256, 256](out, x, len(x))
    return out


def _pos(rng, lo, hi):
    return np.exp2(rng.uniform(lo, hi, N)).astype(np.float32)


#: name -> (instruction, inputs, reference, check(x, got, ref) -> bool array)
def _ulps(bound):
    return lambda x, got, ref: ulp_distance(got, ref.astype(np.float32)) <= bound(x)


def _abs_in(lo, hi, absb, ulpb):
    def check(x, got, ref):
        inside = (np.abs(x) >= lo) & (np.abs(x) <= hi)
        a = np.abs(got.astype(np.float64) - ref) <= absb
        u = ulp_distance(got, ref.astype(np.float32)) <= ulpb
        return np.where(inside, a, u)
    return check


def _rel(bound):
    return lambda x, got, ref: np.abs(got.astype(np.float64) - ref) <= bound * np.abs(ref)


CASES = {
    "fast_exp": ("ex2.approx.ftz.f32", lambda r: r.uniform(-87, 88, N), np.exp,
                 _ulps(lambda x: 2 + np.floor(1.173 * np.abs(x)))),
    "fast_exp2": ("ex2.approx.ftz.f32", lambda r: r.uniform(-126, 127.9, N), np.exp2,
                  _ulps(lambda x: 2)),
    "fast_log": ("lg2.approx.f32", lambda r: _pos(r, -126, 127), np.log,
                 _abs_in(0.5, 2.0, 2.0 ** -21.41, 3)),
    "fast_log2": ("lg2.approx.f32", lambda r: _pos(r, -126, 127), np.log2,
                  _abs_in(0.5, 2.0, 2.0 ** -22, 2)),
    "fast_sin": ("sin.approx.f32", lambda r: r.uniform(-np.pi, np.pi, N), np.sin,
                 lambda x, got, ref: np.abs(got - ref) <= 2.0 ** -21.41),
    "fast_cos": ("cos.approx.f32", lambda r: r.uniform(-np.pi, np.pi, N), np.cos,
                 lambda x, got, ref: np.abs(got - ref) <= 2.0 ** -21.19),
    "fast_tanh": ("tanh.approx.f32", lambda r: r.uniform(-12, 12, N), np.tanh,
                  _rel(2.0 ** -10.987)),
    "fast_rcp": ("rcp.approx.f32", lambda r: _pos(r, -125, 125), lambda v: 1 / v,
                 _ulps(lambda x: 1)),
    "fast_rsqrt": ("rsqrt.approx.f32", lambda r: _pos(r, -126, 127), lambda v: 1 / np.sqrt(v),
                   _rel(2.0 ** -22.9)),
    "fast_sqrt": ("sqrt.approx.f32", lambda r: _pos(r, -126, 127), np.sqrt, _rel(2.0 ** -23)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_variant_is_one_approx_instruction(name):
    ptx = pyptx.compile(_kernel(name), arch="sm_80").ptx
    body = [ln.split()[0] for ln in ptx.splitlines()
            if ln.strip() and not ln.lstrip().startswith(("//", "."))]
    approx = [op for op in body if ".approx" in op]
    assert approx == [CASES[name][0]]
    assert not [op for op in body if op.endswith(".f64")]


@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_variant_within_documented_bound(name, device):
    _, gen, ref_fn, check = CASES[name]
    x = gen(np.random.default_rng(sorted(CASES).index(name))).astype(np.float32)
    got = _run(name, x)
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64))
    ok = check(x, got, ref)
    assert ok.all(), (x[~ok][:3], got[~ok][:3], ref[~ok][:3])


def test_fast_exp_flushes_denormals_like_the_hardware(cpu_device):
    """ex2.approx.ftz: a denormal result (or input) is a signed zero."""
    x = np.array([-100.0, -130.0, -149.0, 1e-40, -1e-40, 0.0, np.inf, -np.inf, np.nan],
                 np.float32)
    got = _run("fast_exp2", x)
    want = np.array([2.0 ** -100, 0.0, 0.0, 1.0, 1.0, 1.0, np.inf, 0.0, np.nan], np.float32)
    assert np.array_equal(got, want, equal_nan=True)


def test_accurate_rsqrt_within_1ulp(device):
    rng = np.random.default_rng(5)
    x = np.concatenate([_pos(rng, -149, 128), rng.uniform(0.25, 4, N)]).astype(np.float32)
    got = _run("rsqrt", x)
    cr = (1 / np.sqrt(x.astype(np.float64))).astype(np.float32)
    assert ulp_distance(got, cr).max() <= 1
    ptx = pyptx.compile(_kernel("rsqrt"), arch="sm_80").ptx
    assert ".approx" not in ptx

"""Regenerate pyptx/mathlib/consts_f64.py: the polynomial coefficients and constants of the f64
Numba-parity functions (pyptx/mathlib/numba_parity_f64.py: atan atan2 asin acos cbrt erf erfc).
Developer tool; needs mpmath, which pyptx itself does not.

    python tests/tools/mathlib_fit_f64.py > pyptx/mathlib/consts_f64.py

The f32 tool (mathlib_fit.py) fits in numpy float64, which is too coarse for f64 coefficients.
Here each polynomial is a discrete Remez exchange computed entirely in 50-digit mpmath on 1200
Chebyshev nodes, minimising the error weighted as it reaches the final result.  Coefficients
are rounded to f64 one at a time, lowest degree first, and the remaining ones refitted, so the
rounding of each is absorbed by the next (as in mathlib_fit.py).  Takes a few minutes.
"""
from __future__ import annotations

import sys

import mpmath as mp

mp.mp.dps = 50


def _solve_reference(rows, t, w, idx):
    """Coefficients and levelled error E of the reference points `idx`."""
    m = len(rows[0])
    a = mp.matrix(m + 1, m + 1)
    rhs = mp.matrix(m + 1, 1)
    for r, i in enumerate(idx):
        for j in range(m):
            a[r, j] = rows[i][j]
        a[r, m] = (-1) ** r / w[i]
        rhs[r] = t[i]
    sol = mp.lu_solve(a, rhs)
    return [sol[j] for j in range(m)], sol[m]


def _alternating_extrema(e):
    """One index per run of equal sign (the largest |e| of the run), so signs alternate."""
    out = []
    for i, v in enumerate(e):
        if out and (v >= 0) == (e[out[-1]] >= 0):
            if abs(v) > abs(e[out[-1]]):
                out[-1] = i
        else:
            out.append(i)
    return out


def _shrink(ext, e, size):
    """Drop extrema until `size` remain, keeping the signs alternating and the largest ones."""
    ext = list(ext)
    while len(ext) > size:
        k = min(range(len(ext)), key=lambda i: abs(e[ext[i]]))
        if k == 0 or k == len(ext) - 1 or len(ext) == size + 1:
            if len(ext) == size + 1 and 0 < k < len(ext) - 1:
                k = 0 if abs(e[ext[0]]) < abs(e[ext[-1]]) else len(ext) - 1
            del ext[k]
        else:                                  # drop it and the smaller of its neighbours
            j = k - 1 if abs(e[ext[k - 1]]) < abs(e[ext[k + 1]]) else k + 1
            for i in sorted((k, j), reverse=True):
                del ext[i]
    return ext


def remez(v, t, w, powers, iters=40):
    """Weighted discrete minimax fit of t by sum_j c_j v^j (j in `powers`) on the grid."""
    rows = [[vi ** j for j in powers] for vi in v]
    n, m = len(v), len(powers)
    idx = [round((n - 1) * (1 - mp.cos(mp.pi * k / m)) / 2) for k in range(m + 1)]
    best = None
    for _ in range(iters):
        c, lev = _solve_reference(rows, t, w, idx)
        e = [w[i] * (mp.fsum(cj * rj for cj, rj in zip(c, rows[i])) - t[i]) for i in range(n)]
        emax = max(abs(x) for x in e)
        if best is None or emax < best[1]:
            best = (c, emax)
        if emax - abs(lev) <= emax * mp.mpf("1e-5"):
            break
        ext = _alternating_extrema(e)
        if len(ext) < m + 1:
            break
        idx = sorted(_shrink(ext, e, m + 1))
    return best[0]


def fit(target, weight, a, b, deg, fixed=(), var=lambda x: x, pair0=False, n=1200, lo_deg=0):
    """f64 coefficients c_lo_deg..c_deg of P(v) = sum c_j v^j fitting target(x) on [a, b], with
    max |weight(x) (P - target)| near-minimal; `fixed` gives the lowest ones.  With `pair0` the
    lowest coefficient is kept as an f64 hi + lo pair (the first two numbers returned).  Returns
    (coefficients, max weighted error with the rounded coefficients)."""
    a, b = mp.mpf(a), mp.mpf(b)
    xs = [a + (b - a) * (1 - mp.cos(mp.pi * (i + mp.mpf(0.5)) / n)) / 2 for i in range(n)]
    v = [var(x) for x in xs]
    t = [target(x) for x in xs]
    w = [weight(x) for x in xs]
    coefs = [float(c) for c in fixed]
    while len(coefs) <= deg - lo_deg:
        done = range(lo_deg, lo_deg + len(coefs))
        rest = [t[i] - mp.fsum(c * v[i] ** j for c, j in zip(coefs, done)) for i in range(n)]
        sol = remez(v, rest, w, list(range(lo_deg + len(coefs), deg + 1)))
        coefs.append(sol[0] if pair0 and not coefs else float(sol[0]))
        print(f"  {len(coefs)}/{deg + 1 - lo_deg}", file=sys.stderr, end="\r")
    err = max(abs(w[i] * (mp.fsum(mp.mpf(c) * v[i] ** j for j, c in
                                  enumerate(coefs, lo_deg)) - t[i])) for i in range(n))
    return (split(coefs[0]) + coefs[1:] if pair0 else coefs), err


def split(x, parts=2):
    """x as a sum of `parts` f64 values, each the rounding of what is left."""
    out, rest = [], mp.mpf(x)
    for _ in range(parts):
        out.append(float(rest))
        rest -= mp.mpf(out[-1])
    return out


def _erfcx(x):
    return mp.erfc(x) * mp.exp(x * x)


FITS = {
    # atan u = u + u^3 P(u^2), |u| <= 7/16
    "ATAN_P": (lambda x: (mp.atan(x) - x) / x ** 3, lambda x: x ** 3 / mp.atan(x), 0,
               mp.mpf(7) / 16, 10, (), lambda x: x * x),
    # asin x = x + x^3 P(x^2), |x| <= 1/2
    "ASIN_P": (lambda x: (mp.asin(x) - x) / x ** 3, lambda x: x ** 3 / mp.asin(x), 0, 0.5, 12,
               (), lambda x: x * x),
    # erf x = x + x P(x^2), |x| <= 0.84375; weighted for erf and for erfc = (1 - x) - x P
    "ERF_P": (lambda x: (mp.erf(x) - x) / x, lambda x: x / min(mp.erf(x), mp.erfc(x)), 0,
              0.84375, 11, (), lambda x: x * x),
    # erfc x = e^(-x^2) R(x), R = erfcx: a polynomial in x - 5/4 on [1/2, 2] ...
    "ERFC_R1": (_erfcx, lambda x: 1 / _erfcx(x), 0.5, 2.0, 20, (), lambda x: x - 1.25,
                True),
    # (the constant terms as hi + lo pairs) ... and R = S(v) / x beyond, S = x erfcx(x) a polynomial in v = 1/x - 3/8 on [2, 4] and
    # in v = 1/x^2 on [4, 27.5] (the range of the asymptotic series)
    "ERFC_S2": (lambda x: x * _erfcx(x), lambda x: 1 / (x * _erfcx(x)), 2.0, 4.0, 16, (),
                lambda x: 1 / x - 0.375, True),
    "ERFC_S3": (lambda x: x * _erfcx(x), lambda x: 1 / (x * _erfcx(x)), 4.0, 27.5, 14, (),
                lambda x: 1 / (x * x), True),
    # cbrt: seed for m^(-1/3) on [1, 8], refined by Newton steps
    "CBRT_SEED": (lambda m: mp.cbrt(m) ** -1, lambda m: mp.cbrt(m), 1.0, 8.0, 3, (),
                  lambda m: m),
}


def main(names=None):
    print('"""Constants of the f64 Numba-parity math functions (pyptx/mathlib/numba_parity_f64.py), '
          'generated by\ntests/tools/mathlib_fit_f64.py: near-minimax polynomial coefficients '
          '(exact f64 values) and\nf64 hi + lo splits of the angles and values used.  Do not '
          'edit by hand."""\n')
    consts = {"PIO2": mp.pi / 2, "PI": mp.pi, "PIO4": mp.pi / 4, "ATAN_HALF": mp.atan(0.5)}
    for name, val in consts.items():
        hi, lo = split(val)
        print(f"{name}_HI, {name}_LO = {hi!r}, {lo!r}")
    for name, (tg, wt, a, b, deg, fixed, var, *extra) in FITS.items():
        if names and name not in names:
            continue
        coefs, err = fit(tg, wt, a, b, deg, fixed, var, *extra)
        print(f"\n#: max weighted error 2^{float(mp.log(err, 2)):.1f} "
              "(with the f64-rounded coefficients)")
        print(f"{name} = (")
        for c in coefs:
            print(f"    {c!r},")
        print(")")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])

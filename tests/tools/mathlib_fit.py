"""Regenerate pyptx/mathlib/consts.py: the f32 math library's polynomial coefficients and
range-reduction constants (developer tool; needs mpmath, which pyptx itself does not).

    python tests/tools/mathlib_fit.py > pyptx/mathlib/consts.py

Each polynomial is a near-minimax fit: Lawson's iteratively reweighted least squares on 3000
Chebyshev nodes against a 40-digit mpmath reference, minimising the error weighted as it reaches
the final result.  Coefficients are rounded to f32 one at a time, lowest degree first, and the
remaining ones refitted, so the rounding of each is absorbed by the next.
"""
from __future__ import annotations

import mpmath as mp
import numpy as np

mp.mp.dps = 40


def fit(target, weight, a, b, deg, fixed=(), var=lambda x: x, n=3000, iters=200):
    """f32 coefficients c of P(v) = sum c_j v^j, v = var(x), fitting target(x) on [a, b] with
    max |weight(x) * (P - target)| near-minimal; `fixed` gives leading coefficients.  Returns
    (coefficients, max weighted error with the rounded coefficients)."""
    xs = [mp.mpf(a) + (mp.mpf(b) - a) * (1 - mp.cos(mp.pi * (i + 0.5) / n)) / 2 for i in range(n)]
    xs = [x for x in xs if x != 0]
    t = np.array([float(target(x)) for x in xs])
    w = np.array([float(weight(x)) for x in xs])
    v = np.array([float(var(x)) for x in xs])
    coefs = [float(np.float32(c)) for c in fixed]
    while len(coefs) <= deg:
        rhs = t - sum(c * v ** j for j, c in enumerate(coefs))
        basis = np.stack([v ** j for j in range(len(coefs), deg + 1)], 1)
        lw = np.ones(len(v))
        for _ in range(iters):
            sw = np.sqrt(lw) * np.abs(w)
            sol = np.linalg.lstsq(basis * sw[:, None], rhs * sw, rcond=None)[0]
            lw = lw * np.abs(w * (basis @ sol - rhs))
            lw /= lw.sum()
        coefs.append(float(np.float32(sol[0])))
    err = np.max(np.abs(w * (sum(c * v ** j for j, c in enumerate(coefs)) - t)))
    return coefs, err


def f32(x) -> float:
    return float(np.float32(float(x)))


def split(x, parts):
    """x as a sum of `parts` f32 values, each the rounding of what is left."""
    out, rest = [], mp.mpf(x)
    for _ in range(parts):
        out.append(f32(rest))
        rest -= mp.mpf(out[-1])
    return out


def main():
    ln2 = mp.log(2)
    sq_lo, sq_hi = mp.sqrt(0.5) - 1, mp.sqrt(2) - 1
    fits = {
        # e^r = 1 + r Q(r), |r| <= ln2/2 (+ rounding slack); weight: error of r Q in e^r
        "EXP_Q": fit(lambda r: mp.expm1(r) / r, lambda r: r / mp.exp(r), -0.3466, 0.3466, 5,
                     fixed=(1,)),
        # 2^f = 1 + f Q(f), |f| <= 1/2
        "EXP2_Q": fit(lambda f: mp.expm1(f * ln2) / f, lambda f: f / mp.exp(f * ln2), -0.5, 0.5,
                      5),
        # log1p(f) = f + f^2 G(f), 1 + f in [sqrt(1/2), sqrt(2))
        "LOG_G": fit(lambda f: (mp.log1p(f) - f) / f ** 2, lambda f: f ** 2 / mp.log1p(f),
                     sq_lo, sq_hi, 8, fixed=(-0.5,)),
        # log2(1 + f) = f/ln2 + f^2 G(f)
        "LOG2_G": fit(lambda f: (mp.log1p(f) - f) / ln2 / f ** 2,
                      lambda f: f ** 2 / mp.log1p(f) * ln2, sq_lo, sq_hi, 8),
        # sin r = r + r^3 S(r^2), |r| <= 0.8
        "SIN_S": fit(lambda r: (mp.sin(r) - r) / r ** 3, lambda r: r ** 3 / mp.sin(r), 0, 0.8, 2,
                     var=lambda r: r * r),
        # cos r = 1 - r^2/2 + r^4 C(r^2), |r| <= 0.8
        "COS_C": fit(lambda r: (mp.cos(r) - 1 + r * r / 2) / r ** 4, lambda r: r ** 4 / mp.cos(r),
                     0, 0.8, 2, var=lambda r: r * r),
        # tanh x = x + x^3 T(x^2), |x| < 0.875
        "TANH_T": fit(lambda x: (mp.tanh(x) - x) / x ** 3, lambda x: x ** 3 / mp.tanh(x), 0, 0.875,
                      6, var=lambda x: x * x),
        # sinh x = x + x^3 P(x^2), |x| < 1
        "SINH_P": fit(lambda x: (mp.sinh(x) - x) / x ** 3, lambda x: x ** 3 / mp.sinh(x), 0, 1.0, 3,
                      var=lambda x: x * x),
        # atan t = t + t^3 P(t^2), |t| <= tan(pi/8)
        "ATAN_P": fit(lambda x: (mp.atan(x) - x) / x ** 3, lambda x: x ** 3 / mp.atan(x), 0,
                      mp.sqrt(2) - 1, 5, var=lambda x: x * x),
        # erf x = x + x P(x^2), |x| <= 1
        "ERF_P": fit(lambda x: (mp.erf(x) - x) / x, lambda x: x / mp.erf(x), 0, 1.0, 6,
                     var=lambda x: x * x),
        # erfc x = e^(-x^2) R(x): R1 a polynomial in x - 5/4 on [1/2, 2] (centred: Horner
        # without cancellation) ...
        "ERFC_R1": fit(lambda x: mp.erfc(x) * mp.exp(x * x),
                       lambda x: 1 / (mp.erfc(x) * mp.exp(x * x)), 0.5, 2.0, 11,
                       var=lambda x: x - 1.25),
        # ... and R(x) = S(1/x) / x on [2, 10.1], S a polynomial in 1/x (R itself would lose an
        # ulp in its last Horner step)
        "ERFC_S2": fit(lambda x: x * mp.erfc(x) * mp.exp(x * x),
                       lambda x: 1 / (x * mp.erfc(x) * mp.exp(x * x)), 2.0, 10.1, 8,
                       var=lambda x: 1 / x),
        # asin x = x + x^3 P(x^2), |x| <= 1/2
        "ASIN_P": fit(lambda x: (mp.asin(x) - x) / x ** 3, lambda x: x ** 3 / mp.asin(x), 0, 0.5, 5,
                      var=lambda x: x * x),
    }
    with mp.workdps(100):
        two_over_pi = int(mp.floor(2 / mp.pi * mp.mpf(2) ** 224))
    words = [(two_over_pi >> (224 - 32 * (i + 1))) & 0xFFFFFFFF for i in range(7)]
    ln2_hi, ln2_lo = split(ln2, 2)
    l2e_hi, l2e_lo = split(1 / ln2, 2)
    p1, p2, p3 = split(mp.pi / 2, 3)
    pi_hi, pi_lo = split(mp.pi, 2)
    pio4_hi, pio4_lo = split(mp.pi / 4, 2)
    lg2_hi, lg2_lo = split(mp.log10(2), 2)
    il10_hi, il10_lo = split(1 / mp.log(10), 2)
    print('"""Constants of the f32 math library (pyptx/mathlib/basic_f32.py), generated by '
          'tests/tools/mathlib_fit.py:\nnear-minimax polynomial coefficients (all exact f32 values) '
          'and f32 splits of ln 2,\n1/ln 2, pi/2 and 2/pi.  Do not edit by hand."""\n')
    print("#: ln 2, 1/ln 2 and pi/2 as sums of f32 values (to 2^-53, 2^-51 and 2^-76)")
    print(f"LN2_HI, LN2_LO = {ln2_hi!r}, {ln2_lo!r}")
    print(f"LOG2E_HI, LOG2E_LO = {l2e_hi!r}, {l2e_lo!r}")
    print(f"PIO2_1, PIO2_2, PIO2_3 = ({p1!r}, {p2!r},\n                          {p3!r})")
    print(f"TWO_OVER_PI = {f32(2 / mp.pi)!r}")
    print(f"PI_HI, PI_LO = {pi_hi!r}, {pi_lo!r}")
    print(f"PIO4_HI, PIO4_LO = {pio4_hi!r}, {pio4_lo!r}")
    print(f"LOG10_2_HI, LOG10_2_LO = {lg2_hi!r}, {lg2_lo!r}")
    print(f"INV_LN10_HI, INV_LN10_LO = {il10_hi!r}, {il10_lo!r}")
    il10 = 1 / mp.log(10)
    print(f"INV_LN10_F64, INV_LN10_F64_LO = {float(il10)!r}, {float(il10 - mp.mpf(float(il10)))!r}")
    print(f"#: the first 224 bits of 2/pi after the binary point, 32 per word")
    print("TWO_OVER_PI_WORDS = (" + ", ".join(f"0x{w:08X}" for w in words[:4]) + ",\n"
          "                     " + ", ".join(f"0x{w:08X}" for w in words[4:]) + ")")
    for name, (coefs, err) in fits.items():
        print(f"\n#: max weighted error 2^{np.log2(err):.1f} (with the f32-rounded coefficients)")
        print(f"{name} = (")
        for c in coefs:
            print(f"    {c!r},")
        print(")")


if __name__ == "__main__":
    main()

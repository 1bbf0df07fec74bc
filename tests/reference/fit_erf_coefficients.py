#!/usr/bin/env python3
"""Fits the two polynomials of math::erf_f32 (core/simd_math.h) and prints their coefficients,
highest degree first (the order of the Horner steps there):

- near zero, |x| < 0.921875: R(t), t = x^2, of degree 5 with erf(x) = x + x R(x^2), i.e. R fitted
  to erf(x)/x - 1, minimising the largest relative error of erf;
- farther out, 0.921875 <= a <= 4: Q(a) of degree 6 with erf(a) = 1 - exp(Q(a)), i.e. Q fitted
  to log(erfc(a)), minimising the largest error of erf relative to erf (an error dQ changes erf
  by erfc * dQ).

Each fit is a weighted minimax fit by Lawson's algorithm: least squares on 2000 Chebyshev points,
reweighted by each point's error until the largest error is as small as it gets. The reference
values come from mpmath at 40 digits. The fits alone are good to about 1e-9 relative; rounding
the coefficients and the float arithmetic bring the function to the 1.1 ulp that
tests/test_simd_math.cpp measures.

Run with the build's Python (numpy, mpmath):

    build/torch-venv/bin/python3 tests/reference/fit_erf_coefficients.py
"""
import mpmath as mp
import numpy as np

mp.mp.dps = 40

SPLIT = 0.921875  # where the two formulas meet
TOP = 4.0  # from 4 on erf rounds to 1 in float (erfc(4) = 1.5e-8 is below half an ulp of 1)


def chebyshev_points(low, high, count=2000):
    return 0.5 * (low + high) + 0.5 * (high - low) * np.cos(np.linspace(0, np.pi, count))


def lawson_fit(points, targets, powers_of, degree, weights, iterations=300):
    """Coefficients c (lowest degree first) of sum c_k powers_of(x)^k minimising max |error| * weight."""
    basis = np.stack([powers_of ** k for k in range(degree + 1)], axis=1)
    lawson = np.full(len(points), 1.0 / len(points))
    for _ in range(iterations):
        scale = np.sqrt(lawson) * weights
        coefficients, *_ = np.linalg.lstsq(basis * scale[:, None], targets * scale, rcond=None)
        error = np.abs(basis @ coefficients - targets) * weights
        lawson = lawson * error
        lawson /= lawson.sum()
    return coefficients, error.max()


def main():
    x = np.maximum(chebyshev_points(0.0, SPLIT), 1e-6)
    erf_over_x = np.array([float(mp.erf(v) / v) for v in x])
    r, r_error = lawson_fit(x, erf_over_x - 1, x * x, 5, 1 / erf_over_x)

    a = chebyshev_points(SPLIT, TOP)
    log_erfc = np.array([float(mp.log(mp.erfc(v))) for v in a])
    erfc_over_erf = np.array([float(mp.erfc(v) / mp.erf(v)) for v in a])
    q, q_error = lawson_fit(a, log_erfc, a, 6, erfc_over_erf)

    for name, coefficients, error in (("R", r, r_error), ("Q", q, q_error)):
        print(f"{name} (largest relative error of erf {error:.2e}):")
        print("  " + ", ".join(f"{float(np.float32(c)):.8e}f" for c in coefficients[::-1]))


if __name__ == "__main__":
    main()

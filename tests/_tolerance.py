"""How far a value of ours may be from another library's (NumPy, SciPy, BLAS, array-api-strict).

Two correct float64 evaluations of one expression differ by their roundings, scaled by the
expression's conditioning: libraries sum in other orders and call other kernels (NumPy and
OpenBLAS pick theirs per CPU), and a sum that cancels keeps its absolute error while its value
shrinks. So a bound is a number of roundings (``U`` each) of the magnitude they act on, never a
flat relative tolerance: ``sum_bound`` for a sum (of the sum of |terms|), ``rounding_bound``
for any function (of its value plus sum |df/dx| |x| over the inputs, the Jacobian from central
differences). A wrong derivative or formula is off by far more than either.

Not a test module: the tests that compare with another library's value use it.
"""
from __future__ import annotations

import warnings

import numpy as np

U = np.finfo(np.float64).eps / 2  # one rounding's relative error
TINY = np.finfo(np.float64).tiny


def sum_bound(terms, axis=None, ops=16):
    """How far two correct evaluations of a sum of `terms` over `axis` may differ, in any order
    and grouping: `ops` roundings of the sum of |terms|."""
    return ops * U * np.sum(np.abs(np.asarray(terms, dtype=np.float64)), axis=axis) + TINY


def assert_within(got, want, bound, err_msg=""):
    """|got - want| <= bound, elementwise (NaN where both are NaN)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    with np.errstate(invalid="ignore"):
        ok = (got == want) | (np.abs(got - want) <= bound) | (np.isnan(got) & np.isnan(want))
    bound = np.broadcast_to(bound, ok.shape)
    assert ok.all(), f"{err_msg} got {got[~ok]}, want {want[~ok]}, bound {bound[~ok]}"


def rounding_bound(f, args, value, ops=64):
    """How far two correct float64 evaluations of f may differ at `args`: `ops` roundings of
    each output's size, and of what rounding each input moves it by (sum over the float inputs
    of |df/dx| |x|, from central differences of f itself)."""
    spread = np.abs(np.asarray(value, dtype=np.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for i, a in enumerate(args):
            if np.asarray(a).dtype.kind != "f":
                continue  # (integers and booleans are exact)
            a = np.asarray(a, dtype=np.float64)
            for k in range(a.size):
                if not np.isfinite(a.flat[k]):
                    continue  # (an infinite input moves nothing by rounding)
                h = 1e-6 * (1.0 + abs(a.flat[k]))
                up, down = a.copy(), a.copy()
                up.flat[k] += h
                down.flat[k] -= h
                fu = np.asarray(f(*args[:i], up, *args[i + 1:]), dtype=np.float64)
                fd = np.asarray(f(*args[:i], down, *args[i + 1:]), dtype=np.float64)
                slope = np.nan_to_num(np.abs(fu - fd) / (2 * h), posinf=0.0)
                spread = spread + slope * abs(a.flat[k])
    return ops * U * spread + TINY

"""Accuracy of the elementwise values tapejit computes itself.

The primitives of ``jit.table.OWN_VALUE`` (the transcendentals, whose NumPy loops differ by CPU)
are computed by the sweep's own loops in eager as in replay (``jit.elementwise``), so eager and
replay agree bit for bit on any CPU. This file checks what those loops promise instead of
NumPy's bits: the error against the exact value (a long double reference) over each domain,
within the bound the README documents, and special values (inf, NaN, signed zeros) as NumPy
gives them. It holds whatever loops NumPy picks (``make test`` runs it again with NumPy's
dispatch lowered).
"""
import numpy as np
import pytest
from numba import config

from jit.table import OPCODE, OWN_VALUE, SPECIAL_ROWS, TABLE
from tape.core.record import own_binary, own_unary

from _op_database import ERROR_BOUND

LD = np.longdouble
EXTENDED = np.finfo(LD).nmant >= 63  # x86 long double: 11 more bits than float64

# ERROR_BOUND (tests/_op_database.py): each own-value row's error bound in ulps.
# (the scipy.special rows: tests/test_special_accuracy.py)
UNARY = sorted(TABLE[c].name for c in OWN_VALUE - SPECIAL_ROWS if TABLE[c].family == "unary")
BINARY = sorted(TABLE[c].name for c in OWN_VALUE - SPECIAL_ROWS if TABLE[c].family == "binary")

pytestmark = [
    pytest.mark.skipif(not EXTENDED, reason="needs x86's 80-bit long double reference"),
    # without the JIT the kernels call NumPy's scalar functions where they call libm
    pytest.mark.skipif(config.DISABLE_JIT, reason="the bounds are the compiled kernels'")]


def test_every_own_primitive_has_a_bound_or_its_own_test():
    assert set(UNARY + BINARY) == set(ERROR_BOUND) | {"logaddexp", "fmax", "fmin"}


def _domain(name, rng, n):
    """Points over the whole domain: magnitudes log-uniform over the float64 range, dense near
    0 and 1, and each function's interesting band (overflow edges, the poles of arctanh)."""
    mag = np.exp(rng.uniform(np.log(1e-300), np.log(1e300), n))
    x = np.concatenate([mag * np.where(rng.random(n) < 0.5, -1.0, 1.0), rng.normal(size=n) * 3,
                        rng.uniform(-1, 1, n)])
    edge = {"exp": 709.7, "expm1": 709.7, "exp2": 1023.9, "sinh": 710.4, "cosh": 710.4}
    if name in edge:
        x = np.concatenate([x[np.abs(x) < edge[name]], rng.uniform(-edge[name], edge[name], n)])
    if name in ("log", "log2", "log10"):
        x = np.abs(x)
    if name == "arccosh":
        x = 1.0 + np.abs(x)
        x = x[x > 1.0]  # (1 + a tiny |x| rounds to 1, where arccosh is 0)
    if name == "log1p":
        x = x[x > -1.0]
    if name in ("arcsin", "arccos", "arctanh"):
        x = np.concatenate([rng.uniform(-1, 1, n), 1.0 - np.exp(rng.uniform(-36, 0, n))])
        x = np.concatenate([x, -x])
    if name in ("sin", "cos", "tan"):
        x = x[np.abs(x) < 1e22]  # (beyond, the long double reference loses its own reduction)
    return x


def _error(got, exact):
    """|got - exact| in ulps of the exact value rounded to float64, where both are finite."""
    ref = exact.astype(np.float64)
    ok = np.isfinite(ref) & np.isfinite(got) & (ref != 0.0)
    ulp = np.spacing(np.abs(ref[ok])).astype(LD)
    return np.abs(got[ok].astype(LD) - exact[ok]) / ulp


@pytest.mark.parametrize("name", UNARY)
def test_unary_error_against_exact(name):
    if name not in ERROR_BOUND:
        pytest.skip("tested below")
    p = TABLE[OPCODE[name]]
    x = _domain(name, np.random.default_rng(OPCODE[name]), 100_000)
    got = own_unary(OPCODE[name], x)
    with np.errstate(all="ignore"):
        exact = p.ufunc(x.astype(LD))
    err = _error(got, exact)
    assert err.size > 0.9 * x.size
    assert err.max() <= ERROR_BOUND[name], (name, float(err.max()), x[np.argmax(err)])


def _binary_domain(name, rng, n):
    if name == "power":  # positive bases (a negative one takes integer exponents only)
        a = np.concatenate([np.exp(rng.uniform(-20, 20, n)), rng.uniform(0, 3, n)])
        b = rng.uniform(-30, 30, 2 * n)
        return np.concatenate([a, -a]), np.concatenate([b, np.round(b)])
    if name == "arctan2":
        a = rng.normal(size=2 * n) * np.exp(rng.uniform(-20, 20, 2 * n))
        return a, rng.normal(size=2 * n)
    return rng.normal(size=2 * n) * 1e3, rng.normal(size=2 * n)  # hypot


@pytest.mark.parametrize("name", ["power", "arctan2", "hypot"])
def test_binary_error_against_exact(name):
    a, b = _binary_domain(name, np.random.default_rng(OPCODE[name]), 50_000)
    got = own_binary(OPCODE[name], a, b)
    with np.errstate(all="ignore"):
        exact = TABLE[OPCODE[name]].ufunc(a.astype(LD), b.astype(LD))
    err = _error(got, exact)
    assert err.size > 0.4 * a.size
    assert err.max() <= ERROR_BOUND[name], (name, float(err.max()))


def test_logaddexp_absolute_error():
    """max(a, b) + log1p(exp(-|a - b|)), NumPy's formula: within 3 ulps of max(|a|, |b|)
    (near a zero result the sum cancels, so the error is not relative to the result; measured
    2.2)."""
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=50_000) * 30, rng.normal(size=50_000) * 30
    got = own_binary(OPCODE["logaddexp"], a, b)
    exact = np.logaddexp(a.astype(LD), b.astype(LD))
    scale = np.spacing(np.maximum(np.abs(a), np.abs(b))).astype(LD)
    assert np.max(np.abs(got.astype(LD) - exact) / scale) <= 3.0


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-310, -1e-310,
                    1.0, -1.0, 0.5, -0.5, 2.0, 1e-20, -1e-20, 709.78, 710.0, -745.2, -746.0,
                    1e300, -1e300, 1e308, np.nextafter(1.0, 0.0), -np.nextafter(1.0, 0.0)])


def _same_special(got, want):
    """Where NumPy gives a special value (NaN, an infinity, a zero), ours is that value with
    its sign; elsewhere the two agree within 4 ulps (both within their bounds of exact)."""
    special = np.isnan(want) | np.isinf(want) | (want == 0.0)
    bad = special & ~((np.isnan(got) & np.isnan(want))
                      | ((got == want) & (np.signbit(got) == np.signbit(want))))
    finite = ~special & np.isfinite(got)
    with np.errstate(invalid="ignore"):
        far = finite & (np.abs(got - want) > 4 * np.spacing(np.abs(want)))
    return bad | far | (~special & ~np.isfinite(got))


@pytest.mark.parametrize("name", UNARY)
def test_unary_special_values_as_numpy(name):
    with np.errstate(all="ignore"):
        got = own_unary(OPCODE[name], SPECIAL)
        want = TABLE[OPCODE[name]].ufunc(SPECIAL)
    bad = _same_special(got, want)
    assert not bad.any(), list(zip(SPECIAL[bad], got[bad], want[bad]))


@pytest.mark.parametrize("name", BINARY)
def test_binary_special_values_as_numpy(name):
    a, b = np.meshgrid(SPECIAL, SPECIAL)
    a, b = a.reshape(-1), b.reshape(-1)
    with np.errstate(all="ignore"):
        got = own_binary(OPCODE[name], a, b)
        want = TABLE[OPCODE[name]].ufunc(a, b)
    bad = _same_special(got, want)
    if name in ("fmax", "fmin"):  # a +0.0 / -0.0 tie: NumPy's loops differ among themselves
        bad &= ~((a == 0.0) & (b == 0.0))
    if name == "power":  # x ** 0.5 is sqrt(x) at every element, as NumPy's loop for a scalar
        bad &= ~((b == 0.5) & ((a == 0.0) | (a == -np.inf)))  # exponent: -0.0 and NaN here
    assert not bad.any(), list(zip(a[bad], b[bad], got[bad], want[bad]))

"""The vectorizable exp, log, log1p and tanh of the array sweeps (jit/_vmath.py, as rendered into
jit/_interp.py): errors against a long double reference bounded, special values NumPy's, close to
whichever loop NumPy runs on this CPU, and the loops over them vectorized."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import config, njit

from jit._interp import _vexp, _vlog, _vlog1p, _vtanh

pytestmark = pytest.mark.skipif(config.DISABLE_JIT, reason="the kernels are Numba code")

LD = np.longdouble
EXTENDED = np.finfo(LD).nmant >= 63  # x86 long double: 11 more bits than float64


def _loop(kernel):
    @njit(error_model="numpy")
    def run(x, y):
        for j in range(x.shape[0]):
            y[j] = kernel(x[j])

    return run


KERNELS = {"exp": (_loop(_vexp), np.exp), "log": (_loop(_vlog), np.log),
           "log1p": (_loop(_vlog1p), np.log1p), "tanh": (_loop(_vtanh), np.tanh)}
# error bounds against the exact value, in ulps (measured maxima: 0.88, 0.80, 0.84, 1.04)
MAX_ERROR = {"exp": 0.9, "log": 0.85, "log1p": 0.9, "tanh": 1.06}
# NumPy's float64 loops differ by CPU (libm's, its own AVX2 / AVX-512 loops, SVML), each within a
# few ulps of the exact value (its SIMD tanh up to 3): the contract is against the exact value
# (MAX_ERROR); this bounds the distance to whichever loop NumPy runs, on any CPU
FROM_NUMPY = 4


def _apply(name, x):
    x = np.ascontiguousarray(x, dtype=np.float64)
    y = np.empty_like(x)
    KERNELS[name][0](x, y)
    return y


def _ulp_distance(a, b):
    """How many float64 values lie between a and b (0: the same value; NaN == NaN)."""
    ia, ib = a.view(np.int64), b.view(np.int64)
    ia = np.where(ia < 0, np.int64(-2**63) - ia, ia)  # monotone order of the bit patterns
    ib = np.where(ib < 0, np.int64(-2**63) - ib, ib)
    d = np.abs(ia - ib)
    both_nan = np.isnan(a) & np.isnan(b)
    return np.where(both_nan, 0, d)


def _domain(name, rng, n):
    """Values over the whole domain: magnitudes log-uniform from 1e-300, and dense around 1."""
    mag = np.exp(rng.uniform(np.log(1e-300), np.log(1e300), n))
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    dense = rng.normal(size=n) * 2.0
    x = np.concatenate([mag * sign, dense, rng.uniform(-1, 1, n)])
    if name == "exp":
        x = np.concatenate([x, rng.uniform(-746, 710, n)])
    if name == "log":
        x = np.abs(x)
    if name == "log1p":
        x = x[x > -1.0]
    if name == "tanh":
        x = np.concatenate([x, rng.uniform(-0.8, 0.8, n), rng.uniform(-20, 20, n)])
    return x


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-310, -1e-310,
                    2.2250738585072014e-308, 1.0, -1.0, 0.75, -0.75, np.nextafter(0.75, 0),
                    0.5, 2.0, 1e-20, -1e-20, 709.78, 709.79, -708.4, -708.5, -745.1, -745.2,
                    -746.0, 710.0, 800.0, -800.0, 1e300, -1e300, np.nextafter(-1.0, 0),
                    -0.9999999999999999, 19.0, -19.0, 355.0, 400.0])


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_close_to_numpys_loop(name):
    x = _domain(name, np.random.default_rng(0), 300_000)
    with np.errstate(all="ignore"):
        y, y0 = _apply(name, x), KERNELS[name][1](x)
    d = _ulp_distance(y, y0)
    assert d.max() <= FROM_NUMPY, (name, x[np.argmax(d)], y[np.argmax(d)], y0[np.argmax(d)])


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_special_values_are_numpys(name):
    """Zeros keep their sign; inf, NaN, overflow, underflow, subnormals and domain edges give
    NumPy's result, or one close to it (FROM_NUMPY) for finite nonzero results."""
    with np.errstate(all="ignore"):
        y, y0 = _apply(name, SPECIAL), KERNELS[name][1](SPECIAL)
    exact = ~np.isfinite(y0) | (y0 == 0)
    np.testing.assert_array_equal(y[exact], y0[exact])
    signed = exact & ~np.isnan(y0)  # a NaN's sign bit means nothing
    assert np.array_equal(np.signbit(y[signed]), np.signbit(y0[signed]))
    assert _ulp_distance(y, y0).max() <= FROM_NUMPY


@pytest.mark.skipif(not EXTENDED, reason="needs an extended long double reference")
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_error_against_exact_value(name):
    x = _domain(name, np.random.default_rng(1), 200_000)
    with np.errstate(all="ignore"):
        y = _apply(name, x)
        ref = KERNELS[name][1](x.astype(LD))  # the long double loop: libm's ...l functions
    with np.errstate(over="ignore"):
        r64 = ref.astype(np.float64)
    ok = np.isfinite(r64) & (r64 != 0) & (np.abs(r64) >= 2.2250738585072014e-308)
    err = np.abs((y[ok].astype(LD) - ref[ok]) / np.spacing(np.abs(r64[ok])).astype(LD))
    assert float(err.max()) <= MAX_ERROR[name], (name, float(err.max()))


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(sorted(KERNELS)))
def test_any_float_close_to_numpy(v, name):
    x = np.array([v])
    with np.errstate(all="ignore"):
        y, y0 = _apply(name, x), KERNELS[name][1](x)
    assert _ulp_distance(y, y0)[0] <= FROM_NUMPY, (v, y[0], y0[0])
    if y0[0] == 0 or not np.isfinite(y0[0]):
        assert y[0] == y0[0] or (np.isnan(y[0]) and np.isnan(y0[0]))
        assert np.signbit(y[0]) == np.signbit(y0[0]) or np.isnan(y0[0])


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_loops_vectorize(name):
    """A loop over the kernel compiles to vector instructions: the kernels exist for this, and a
    branch that LLVM cannot turn into a select would quietly make them scalar again."""
    run = KERNELS[name][0]
    _apply(name, np.ones(4))
    llvm = next(iter(run.inspect_llvm().values()))
    assert " x double>" in llvm

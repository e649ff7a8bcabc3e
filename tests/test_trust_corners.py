"""Corners where a user's trust is won or lost: every values-only function of the coverage table
under tape.compile, special values of power, and the messages of refusals."""
import numpy as np
import pytest

import tape
from tape import _coverage

# -- every values-only and piecewise-constant function of the coverage table under compile -----
#
# A recipe per function: a call on the compiled function's input x (a vector of 6). X0 is the
# recording point, X1 a point where most results differ (a rank-1 block, a zero gone, other
# order), so a guard that does not recompute would hand back X0's result.

X0 = np.array([0.3, -1.2, 2.5, 0.0, 2.5, -0.7])
X1 = np.array([1.0, 2.0, 2.0, 4.0, 3.0, 0.4])
C = np.array([0.3, 2.5, 4.0])


def _square(x):
    return x[:4].reshape(2, 2)


RECIPES = {
    "all": lambda x: np.all(x),
    "allclose": lambda x: np.allclose(x, X0),
    "any": lambda x: np.any(x[3:4]),
    "argmax": lambda x: np.argmax(x),
    "argmin": lambda x: np.argmin(x),
    "argpartition": lambda x: np.argpartition(x, 2),
    "argsort": lambda x: np.argsort(x),
    "argwhere": lambda x: np.argwhere(x),
    "around": lambda x: np.around(x, 1),
    "array_equal": lambda x: np.array_equal(x, X0),
    "array_equiv": lambda x: np.array_equiv(x, X0),
    "ceil": lambda x: np.ceil(x),
    "count_nonzero": lambda x: np.count_nonzero(x),
    "diag_indices_from": lambda x: np.diag_indices_from(_square(x)),
    "digitize": lambda x: np.digitize(x, C),
    "equal": lambda x: np.equal(x, 2.5),
    "flatnonzero": lambda x: np.flatnonzero(x),
    "floor": lambda x: np.floor(x),
    "greater": lambda x: np.greater(x, 0.35),
    "greater_equal": lambda x: np.greater_equal(x, 2.0),
    "histogram2d": lambda x: np.histogram2d(x, x[::-1], bins=2),
    "histogram_bin_edges": lambda x: np.histogram_bin_edges(x, bins=3),
    "histogramdd": lambda x: np.histogramdd(x.reshape(3, 2), bins=2),
    "intersect1d": lambda x: np.intersect1d(x, C),
    "isclose": lambda x: np.isclose(x, 2.5),
    "iscomplex": lambda x: np.iscomplex(x),
    "iscomplexobj": lambda x: np.iscomplexobj(x),
    "isfinite": lambda x: np.isfinite(x),
    "isin": lambda x: np.isin(x, C),
    "isinf": lambda x: np.isinf(x),
    "isnan": lambda x: np.isnan(x),
    "isneginf": lambda x: np.isneginf(x),
    "isposinf": lambda x: np.isposinf(x),
    "isreal": lambda x: np.isreal(x),
    "isrealobj": lambda x: np.isrealobj(x),
    "less": lambda x: np.less(x, 0.35),
    "less_equal": lambda x: np.less_equal(x, 2.0),
    "lexsort": lambda x: np.lexsort((x, x[::-1])),
    "logical_and": lambda x: np.logical_and(x, x[::-1]),
    "logical_not": lambda x: np.logical_not(x),
    "logical_or": lambda x: np.logical_or(x, x[::-1]),
    "logical_xor": lambda x: np.logical_xor(x, x[::-1]),
    "may_share_memory": lambda x: np.may_share_memory(x, x[:2]),
    "nanargmax": lambda x: np.nanargmax(x),
    "nanargmin": lambda x: np.nanargmin(x),
    "ndim": lambda x: np.ndim(x),
    "nextafter": lambda x: np.nextafter(x, 0.0),
    "nonzero": lambda x: np.nonzero(x),
    "not_equal": lambda x: np.not_equal(x, 2.5),
    "round": lambda x: np.round(x, 1),
    "searchsorted": lambda x: np.searchsorted(C, x),
    "setdiff1d": lambda x: np.setdiff1d(x, C),
    "setxor1d": lambda x: np.setxor1d(x, C),
    "shape": lambda x: np.shape(x),
    "shares_memory": lambda x: np.shares_memory(x, x[:2]),
    "sign": lambda x: np.sign(x),
    "signbit": lambda x: np.signbit(x),
    "size": lambda x: np.size(x),
    "tril_indices_from": lambda x: np.tril_indices_from(_square(x)),
    "triu_indices_from": lambda x: np.triu_indices_from(_square(x)),
    "union1d": lambda x: np.union1d(x, C),
    "unique": lambda x: np.unique(x, return_counts=True),
    "unique_all": lambda x: np.unique_all(x),
    "unique_counts": lambda x: np.unique_counts(x),
    "unique_inverse": lambda x: np.unique_inverse(x),
    "unique_values": lambda x: np.unique_values(x),
    "linalg.matrix_rank": lambda x: np.linalg.matrix_rank(_square(x)),
    # piecewise constant (float results, gradient 0)
    "angle": lambda x: np.angle(x, deg=True),
    "fix": lambda x: np.fix(x),
    "floor_divide": lambda x: np.floor_divide(x, 0.7),
    "heaviside": lambda x: np.heaviside(x, 0.5),
    "rint": lambda x: np.rint(x),
    "spacing": lambda x: np.spacing(x),
    "trunc": lambda x: np.trunc(x),
}

GUARDED = [q for q, kind, _ in _coverage.table()[0]
           if kind in (_coverage.VALUES, _coverage.PIECEWISE)]


def _number(r):
    """One float that changes when any element, its position, or the shape of r changes."""
    if isinstance(r, tuple):
        return sum((k + 1) * _number(p) for k, p in enumerate(r))
    a = np.asarray(r, dtype=float).ravel()
    return float(np.sum(a * np.arange(1, a.size + 1))) + 0.5 * a.size


def test_every_guarded_function_of_the_table_has_a_recipe():
    assert sorted(set(GUARDED) - set(RECIPES)) == []
    assert sorted(set(RECIPES) - set(GUARDED)) == []


def _never_stale(call, label, gradient=False):
    """f scaled by a number `call` computes from x: compiled at X0, replayed at X0 and X1 in
    turn, each value (and gradient) is f's at that point, and the replays at the recording
    point hit (the guard recomputes what Python saw)."""
    def f(x):
        return np.sum(x * x) * _number(call(x))

    cf = tape.compile(f, X0)
    for x in (X0, X1, X0, X1):
        np.testing.assert_allclose(cf(x), f(x.copy()), rtol=1e-14, err_msg=label)
        if gradient:
            _, g = cf.value_and_grad(x)
            np.testing.assert_allclose(g, 2 * x * _number(call(x.copy())), rtol=1e-14)
    assert cf.stats()["recordings"] <= 2, (label, cf.stats())


@pytest.mark.parametrize("qualname", GUARDED)
def test_a_values_only_function_under_compile_is_never_stale(qualname):
    _never_stale(RECIPES[qualname], qualname, gradient=True)


# tensors a values-only function reads through a keyword or inside a sequence
FORMS = {
    "keyword": lambda x: np.isin(x, test_elements=x[:2] * 2),
    "list of scalars": lambda x: np.digitize(x, [x[0], x[0] + 1.0]),
    "tuple of keys": lambda x: np.lexsort((x[::-1], x)),
    "coordinate vectors": lambda x: np.histogramdd((x[:3], x[3:]), bins=2),
    "deg=True": lambda x: np.angle(x - 1.0, deg=True),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_guard_recomputes_from_every_tensor_the_call_read(form):
    _never_stale(FORMS[form], form)


def test_a_sequence_of_tensors_of_different_shapes_is_refused_by_name():
    def f(x):
        s = np.sort(x)
        return np.sum(x) * _number(np.histogram2d(x, x, bins=[s[:2], s[1:4]]))

    with pytest.raises(TypeError, match="numpy.histogram2d reads a sequence of tensors"):
        tape.compile(f, X0)


# -- power at special values: NumPy's value for each form of the exponent ------------------------
#
# NumPy's loop takes x * x, sqrt(x), 1 / x, x and 1 for an exponent read at stride 0 (a scalar,
# or one broadcast along the last axis) and calls pow for an exponent with elements of its own;
# they differ at 0.5: (-inf) ** 0.5 is NaN by sqrt, inf by pow; (-0.0) ** 0.5 is -0.0 by sqrt,
# +0.0 by pow.

BASES = np.array([-np.inf, -0.0, 0.0, -8.0, 4.0, 0.25, np.inf, np.nan])
EXPONENTS = np.array([0.5, 1 / 3, -0.5, 2.0, 3.0, -1.0, 1.0, 0.0, -1 / 3, -3.0])


def _same_values(got, want, what):
    got, want = np.asarray(got, float), np.asarray(want, float)
    assert got.shape == want.shape, what
    np.testing.assert_allclose(got, want, rtol=2e-16, atol=0.0, equal_nan=True, err_msg=what)
    zero = want == 0.0
    assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero])), what


def _numpy_power(a, b):
    with np.errstate(all="ignore"):
        return np.power(a, b)


def _grid():
    return np.repeat(BASES, EXPONENTS.size), np.tile(EXPONENTS, BASES.size)


def test_power_with_an_array_exponent_is_numpys_pow_in_eager():
    a, b = _grid()
    _same_values((tape.tensor(a) ** tape.tensor(b)).numpy(), _numpy_power(a, b), "a ** b")
    _same_values(np.power(tape.tensor(a, requires_grad=True), b).detach().numpy(),
                 _numpy_power(a, b), "np.power(leaf, array)")


def test_power_with_a_one_element_exponent_is_numpys_fast_path():
    a = tape.tensor(BASES)
    for e in EXPONENTS:
        _same_values((a ** e).numpy(), _numpy_power(BASES, e), f"x ** {e}")
        _same_values((a ** tape.tensor(e)).numpy(), _numpy_power(BASES, e), f"x ** tensor({e})")
        for x in BASES:  # 0-d rows
            _same_values(float(tape.tensor(x) ** tape.tensor(e)),
                         _numpy_power(np.float64(x), np.float64(e)), f"{x} ** {e}, 0-d")


@pytest.mark.parametrize("shape", [(EXPONENTS.size, 1), (1, EXPONENTS.size)])
def test_power_with_a_broadcast_exponent_is_numpys_pow(shape):
    """An exponent of more than one element broadcast along an axis: pow, as NumPy's buffered
    loop gives for arrays of this size."""
    if shape[1] == 1:
        a = np.tile(BASES, (EXPONENTS.size, 1))
    else:
        a = np.repeat(BASES[:, None], EXPONENTS.size, axis=1)
    b = EXPONENTS.reshape(shape)
    _same_values((tape.tensor(a) ** tape.tensor(b)).numpy(), _numpy_power(a, b), str(shape))


def test_power_at_special_values_replays_as_numpy_and_as_eager():
    a, b = _grid()
    cf = tape.compile(lambda x, p: np.sum(x ** p), np.full(a.shape, 2.0), np.ones(b.shape),
                      argnums=(0, 1))
    cf_each = tape.compile(lambda x, p: x ** p, np.full(a.shape, 2.0), np.ones(b.shape))
    _same_values(cf_each(a, b), _numpy_power(a, b), "replay of x ** p")
    with np.errstate(all="ignore"):
        value, grads = cf.value_and_grad(a, b)
        eager_value, eager_grads = tape.value_and_grad(lambda x, p: np.sum(x ** p),
                                                       argnums=(0, 1))(a, b)
    assert np.array_equal(value, eager_value, equal_nan=True)
    for g, e in zip(grads, eager_grads):
        assert np.array_equal(g, e, equal_nan=True)


# -- refusals name a fix that keeps the gradient ------------------------------------------------

def _refusal(fn, *args):
    with pytest.raises(TypeError) as e:
        fn(*args)
    return str(e.value)


def test_an_in_place_operator_into_a_numpy_array_names_tnp_zeros():
    def fill(x):
        out = np.zeros((2, 3))
        out[0] += x
        return np.sum(out)

    message = _refusal(tape.grad(fill), np.ones(3))
    assert "out[i] += t" in message and "tnp.zeros(shape)" in message
    assert "omit out=" not in message

    def fill_tensor(x):
        out = tape.numpy.zeros((2, 3))
        out[0] += x
        return np.sum(out * out)

    np.testing.assert_allclose(tape.grad(fill_tensor)(np.ones(3)), 2 * np.ones(3))


def test_scipy_logsumexp_without_the_array_api_names_scipy_array_api():
    """In a process without SCIPY_ARRAY_API: the refusal names the variable and when to set it."""
    import os
    import subprocess
    import sys

    pytest.importorskip("scipy")
    code = ("import numpy as np, tape, scipy.special\n"
            "t = tape.tensor(np.ones(3), requires_grad=True)\n"
            "try:\n    scipy.special.logsumexp(t)\n"
            "except TypeError as e:\n    print(e)\n")
    env = {k: v for k, v in os.environ.items() if k != "SCIPY_ARRAY_API"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert "scipy.special.logsumexp follows the array API standard" in out
    assert "SCIPY_ARRAY_API=1 before SciPy is first imported" in out


def test_unsupported_functions_never_suggest_dropping_the_gradient():
    x = tape.tensor(np.ones(8), requires_grad=True)
    fft = _refusal(np.fft.rfft, x)
    assert "x @ np.cos(w)" in fft and "-(x @ np.sin(w))" in fft
    for message in (fft, _refusal(np.roots, x)):
        assert "detach" not in message and ".numpy()" not in message, message
        assert "tape.Function" in message or "np.cos" in message


def test_round_of_a_scalar_tensor_is_np_round_in_eager_and_under_compile():
    x = tape.tensor(np.array([2.5, 1.26]), requires_grad=True)
    assert round(x[0]) == 2 and type(round(x[0])) is int
    assert round(x[1], 1) == round(np.float64(1.26), 1)

    cf = tape.compile(lambda v: np.sum(v * round(v[0])), np.array([2.4, 1.0]))
    for v in (np.array([2.4, 1.0]), np.array([3.6, 1.0]), np.array([2.4, 1.0])):
        value, g = cf.value_and_grad(v)
        assert value == np.sum(v * round(v[0]))
        np.testing.assert_array_equal(g, [round(v[0])] * 2)  # rounding's derivative is 0
    assert "np.round(t, decimals)" in _refusal(round, x)


@pytest.mark.parametrize("form", ["lists", "tuples", "a list of tensors"])
def test_interp_takes_python_sequences_as_numpy_does(form):
    xp = [0.0, 1.0, 2.0]
    x0 = np.array([0.25, 1.5, -1.0, 2.5])

    def samples(x):
        return [0.0, x[0], 4.0] if form == "a list of tensors" else [0.0, 1.0, 4.0]

    def f(x):
        seq = tuple if form == "tuples" else list
        return np.sum(np.interp(x, seq(xp), seq(samples(x))) ** 2)

    value, g = tape.value_and_grad(f)(x0)
    assert value == f(x0.copy())
    h = 1e-6
    fd = [(f(x0 + h * e) - f(x0 - h * e)) / (2 * h) for e in np.eye(x0.size)]
    np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-9)
    cf = tape.compile(f, x0)
    np.testing.assert_allclose(cf.value_and_grad(x0 + 0.1)[1], tape.grad(f)(x0 + 0.1),
                               rtol=1e-14)

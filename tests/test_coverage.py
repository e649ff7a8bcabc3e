"""docs/coverage.md is generated, complete, and true where a smoke call can tell."""
import inspect
import warnings

import numpy as np
import pytest

import tape
from tape import _coverage

ROWS, UNKNOWN = _coverage.table()


def test_every_numpy_callable_is_classified():
    assert not UNKNOWN, f"classify these in tape/_coverage.py: {UNKNOWN}"


def test_the_table_is_fresh():
    """The NumPy part always; the SciPy section where SciPy is installed."""
    with open(_coverage.OUT) as f:
        text = f.read()
    scipy_part = _coverage.render_scipy()
    if not scipy_part:
        cut = text.find("\n" + _coverage.SCIPY_HEADING + "\n")
        text = text if cut < 0 else text[:cut]
    assert text == _coverage.render() + scipy_part, "run python -m tape._coverage"


def _scipy_rows(kind):
    rows = _coverage.scipy_special_table()
    return [] if rows is None else [r[0] for r in rows if r[1] == kind]


@pytest.mark.parametrize("name", _scipy_rows(_coverage.DIFFERENTIABLE))
def test_a_differentiable_scipy_special_function_differentiates(name):
    special = pytest.importorskip("scipy.special")
    x = tape.tensor(np.linspace(0.2, 0.8, 4), requires_grad=True)
    fn = tape.special.polygamma if name == "polygamma" else getattr(special, name)
    args = (1, x) if name == "polygamma" else (x,) * fn.nin if isinstance(fn, np.ufunc) else (x,)
    (g,) = tape.autograd.grad(np.sum(fn(*args)), [x])
    assert np.all(np.isfinite(g))


@pytest.mark.parametrize("name", _scipy_rows(_coverage.NOT_YET))
def test_a_scipy_special_function_not_covered_yet_names_itself(name):
    special = pytest.importorskip("scipy.special")
    fn = getattr(special, name)
    # (an alias such as jn is named as its ufunc is: jv)
    with pytest.raises(TypeError, match=f"scipy.special.{fn.__name__} is not supported"):
        fn(*(_leaf(),) * fn.nin)


def _obj(qualname):
    return dict(_coverage.public_callables())[qualname]


def _leaf():
    return tape.tensor(np.linspace(0.2, 0.8, 12).reshape(3, 4), requires_grad=True)


def _smoke(fn):
    """fn on a leaf tensor (as many as a ufunc takes): the error it raises, or None."""
    x = _leaf()
    args = (x,) * (fn.nin if isinstance(fn, np.ufunc) else 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001
            return e
    return None


@pytest.mark.parametrize("qualname", [r[0] for r in ROWS if r[1] == _coverage.DIFFERENTIABLE])
def test_a_differentiable_function_is_not_refused(qualname):
    """One call on a tensor: it may want more arguments, but never says it is unsupported."""
    fn = _obj(qualname)
    ours = tape.numpy_ops._dispatch.FUNCS.get(fn)
    if getattr(ours, "via", None):
        # NumPy's converts its arguments first and its refusal names ours (whose values and
        # gradients tests/test_polynomials.py checks)
        names = [p.name for p in inspect.signature(fn).parameters.values()
                 if p.default is p.empty]
        dims = len([n for n in names if n in "xyz"])
        ints = {"pow": 2, "deg": 2 if dims == 1 else [1] * dims}
        with pytest.raises(TypeError, match=ours.via.replace(".", r"\.")):
            fn(*[ints.get(n, _leaf()) for n in names])
        return
    err = _smoke(fn)
    assert not (isinstance(err, TypeError) and "not supported" in str(err)
                and qualname.split(".")[-1] in str(err)), err
    assert not (isinstance(err, TypeError) and "converts its arguments" in str(err)), err


@pytest.mark.parametrize("qualname", [r[0] for r in ROWS if r[1] == _coverage.NOT_YET])
def test_a_function_not_covered_yet_refuses_a_gradient(qualname):
    """Never a silent value: a tensor that carries a gradient gets a TypeError, or the call
    fails on its other arguments before any value is computed."""
    fn = _obj(qualname)
    err = _smoke(fn)
    assert err is not None, f"{qualname} returned a value for a tensor with a gradient"
    if isinstance(err, TypeError) and ("missing" in str(err) or "required" in str(err)):
        params = inspect.signature(fn).parameters if not isinstance(fn, np.ufunc) else {}
        assert len([p for p in params.values() if p.default is p.empty]) > 1, err
        return
    assert isinstance(err, TypeError), (qualname, err)

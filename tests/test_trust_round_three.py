"""Copies, pickles, NaN order statistics, masked arrays, formatted values under compile, and
unpack_dual after an unrelated recording: each gives NumPy's value with the right gradient, or
refuses loudly."""
import copy
import pathlib
import pickle
import warnings

import numpy as np
import pytest

import tape
import tape.forward_ad as fwAD

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


# -- copy.deepcopy and pickle -------------------------------------------------------------------

def test_deepcopy_of_a_result_is_a_recorded_copy():
    x = tape.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = copy.deepcopy(x * 3.0)
    np.sum(y * y).backward()
    np.testing.assert_array_equal(x.grad, 18.0 * np.array([1.0, 2.0]))


def test_deepcopy_inside_a_differentiated_and_a_compiled_function():
    def f(x):
        return np.sum(copy.deepcopy(np.sin(x)) * x)

    x = np.array([0.3, -1.2, 2.0])
    want = np.sin(x) + x * np.cos(x)
    np.testing.assert_allclose(tape.grad(f)(x), want, rtol=1e-15)
    np.testing.assert_allclose(tape.compile(f, x).grad(x + 1.0), np.sin(x + 1) +
                               (x + 1) * np.cos(x + 1), rtol=1e-15)


def test_deepcopy_of_a_leaf_is_a_new_leaf_with_its_own_buffer_and_grad():
    x = tape.tensor(np.array([1.0, 2.0]), requires_grad=True)
    np.sum(x * x).backward()
    c = copy.deepcopy(x)
    assert c is not x and c.requires_grad and c.is_leaf
    np.testing.assert_array_equal(c.grad, x.grad)
    np.sum(c).backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])  # the original's gradient is its own
    np.testing.assert_array_equal(c.grad, [3.0, 5.0])


def test_a_pickled_result_comes_back_plain():
    x = tape.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = pickle.loads(pickle.dumps(x * 3.0))
    assert not y.requires_grad and y.is_leaf and "grad_fn" not in repr(y)
    np.testing.assert_array_equal(np.asarray(y), [3.0, 6.0])  # a plain tensor converts freely
    s = pickle.loads(pickle.dumps(np.sum(x)))
    assert s.ndim == 0 and not s.requires_grad


def test_a_pickled_leaf_comes_back_a_leaf_with_its_grad():
    x = tape.tensor(np.array([1.0, 2.0]), requires_grad=True)
    np.sum(x * x).backward()
    y = pickle.loads(pickle.dumps(x))
    assert y.requires_grad and y.is_leaf
    np.testing.assert_array_equal(y.grad, [2.0, 4.0])


# -- NaN in order statistics --------------------------------------------------------------------

A = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0], [np.nan, np.nan, 2.0]])
ORDER_STATS = [(np.median, ()), (np.quantile, ([0.25, 0.5],)), (np.percentile, (40,)),
               (np.nanmedian, ()), (np.nanquantile, (0.3,))]


@pytest.mark.parametrize("fn,args", ORDER_STATS, ids=lambda v: getattr(v, "__name__", ""))
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_a_nan_result_takes_the_gradient_of_the_nan_it_selects(fn, args, axis):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = fn(A, *args, axis=axis)
    x = tape.tensor(A, requires_grad=True)
    y = fn(x, *args, axis=axis)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    np.sum(y).backward()
    g = x.grad
    nan_out = np.isnan(want)
    if nan_out.any():  # never a silent zero: some NaN input carries the NaN output's gradient
        assert np.sum(g[np.isnan(A)]) > 0
    # the weights of each output add up to one, NaN or not
    assert np.sum(g) == pytest.approx(np.size(want))


def test_median_of_a_line_with_a_nan_selects_its_first_nan():
    x = tape.tensor(np.array([1.0, np.nan, 3.0, np.nan]), requires_grad=True)
    m = np.median(x)
    assert np.isnan(m.item())
    m.backward()
    np.testing.assert_array_equal(x.grad, [0.0, 1.0, 0.0, 0.0])


# -- masked arrays ------------------------------------------------------------------------------

MASKED = np.ma.masked_array(np.array([1.0, 5.0, 3.0, 2.0]), mask=[0, 1, 0, 0])


# (op, whether np.ma's own code runs first: on a plain tensor it then gives NumPy's masked result)
MASKED_OPS = [(lambda x: x * MASKED, False), (lambda x: MASKED * x, True),
              (lambda x: np.add(x, MASKED), False), (lambda x: np.where(x > 2, MASKED, x), False),
              (lambda x: MASKED @ x, False), (lambda x: x[0] * MASKED, False),
              (lambda x: tape.tensor(MASKED), False), (lambda x: tape.numpy.asarray(MASKED), False),
              (lambda x: np.ma.sum(x), True)]


@pytest.mark.parametrize("op,numpy_first", MASKED_OPS)
@pytest.mark.parametrize("requires_grad", [True, False])
def test_a_masked_array_is_refused_naming_the_mask(op, numpy_first, requires_grad):
    x = tape.tensor(np.array([1.0, 5.0, 3.0, 2.0]), requires_grad=requires_grad)
    if numpy_first and not requires_grad:
        assert isinstance(op(x), (np.ma.MaskedArray, np.floating))  # the mask honoured
        return
    with pytest.raises(TypeError, match="mask"):
        op(x)


def test_the_masked_mean_the_message_suggests_has_the_right_gradient():
    x = tape.tensor(np.array([1.0, 5.0, 3.0, 2.0]), requires_grad=True)
    w = ~np.ma.getmaskarray(MASKED)
    m = np.sum(w * x) / np.sum(w)
    assert m.item() == pytest.approx(np.ma.mean(np.ma.masked_array(x.detach().numpy(),
                                                                   MASKED.mask)))
    m.backward()
    np.testing.assert_allclose(x.grad, w / 3.0)


# -- formatted values under tape.compile --------------------------------------------------------

def test_formatting_is_no_guard_and_item_is_one_as_the_contract_says():
    def shown(x):
        s = np.sum(x)
        _ = f"{s:.3f}"  # shows the value: no guard, no new recording
        return s * 2.0

    def taken(x):
        return np.sum(x) * np.sum(x).item()

    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    cs, ct = tape.compile(shown, a), tape.compile(taken, a)
    assert cs(b) == 14.0 and ct(b) == 49.0
    assert cs.stats()["recordings"] == 1 and ct.stats()["recordings"] == 2
    text = " ".join(README.read_text().split())
    assert "a number parsed back from it is a constant of the recording" in text


# -- unpack_dual after an unrelated recording ---------------------------------------------------

def test_unpack_dual_gives_plain_pairs_after_an_unrelated_leaf_was_recorded():
    w = tape.tensor(np.ones(3), requires_grad=True)
    r = np.sum(w * 2.0)  # an unrelated recording, earlier in this thread
    x0 = np.array([1.0, 2.0, 3.0])
    with fwAD.dual_level():
        x = fwAD.make_dual(tape.tensor(x0), tape.tensor(np.array([1.0, 0.0, 0.0])))
        p, t = fwAD.unpack_dual(np.sin(x) * x)
        np.testing.assert_array_equal(np.asarray(p), np.sin(x0) * x0)
        np.testing.assert_allclose(np.asarray(t), [np.sin(1.0) + np.cos(1.0), 0.0, 0.0],
                                   rtol=1e-15)
        # a pair that does depend on a leaf keeps its history (its gradient is not lost)
        p2, _ = fwAD.unpack_dual(x * w)
        assert p2.requires_grad
    r.backward()
    np.testing.assert_array_equal(w.grad, [2.0, 2.0, 2.0])

"""``tape.no_grad()`` inside a compiled function: what it computes from the inputs replays.

Eager tapejit does not record under ``no_grad``; a compiled replay runs no Python, so the
values computed there must be rows of the recording (their gradient cut) or a replay would
return the first recording's values. Every case compares a replay at new arguments with eager
differentiation of the same function at those arguments.
"""
import numpy as np
import pytest

import tape

X0 = np.array([1.0, 2.0, 3.0, 4.0])
X1 = np.array([1.0, 1.5, 3.5, 2.0])


def _eager(f, x):
    v, g = tape.value_and_grad(f)(tape.tensor(x))
    return float(v), np.asarray(g)


def _check(f, points=(X1, 2 * X1 - 0.3, -X1)):
    cf = tape.compile(f, X0)
    for x in points:
        v, g = cf.value_and_grad(x)
        ev, eg = _eager(f, x)
        np.testing.assert_allclose(v, ev, rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(g, eg, rtol=1e-14, atol=1e-14)
    return cf


def centred(x):
    with tape.no_grad():
        mu = np.mean(x)
    return np.sum((x - mu) ** 2)


def scaled(x):  # its gradient tells a cut mean (mu) from a differentiated one (2 mu)
    with tape.no_grad():
        mu = np.mean(x)
    return np.sum(x * mu)


def test_issue_reproducer_replays_the_mean_of_the_new_input():
    cf = _check(centred)
    v, g = cf.value_and_grad(X1)
    mu = X1.mean()  # the gradient treats mu as a constant, as eager does
    assert v == pytest.approx(np.sum((X1 - mu) ** 2))
    np.testing.assert_allclose(g, 2 * (X1 - mu))
    assert cf.stats()["recordings"] == 1  # replayed, not recorded again


def test_the_gradient_does_not_flow_through_no_grad_values():
    cf = _check(scaled)
    np.testing.assert_allclose(cf.grad(X1), np.full(4, X1.mean()))


def test_many_op_kinds_inside_no_grad():
    M = np.arange(16.0).reshape(4, 4) / 10 + np.eye(4)

    def f(x):
        with tape.no_grad():
            s = np.exp(x) * 0.5 + x[::-1]
            w = np.where(x > 2.5, s, -s)
            m = M @ w + np.linalg.solve(M, x)
            c = np.cumsum(m)[-1] / np.max(np.abs(x)) + x[2] * x[0]
            scale = np.sqrt(np.sum(w ** 2, axis=0)) + c
        return np.sum(np.sin(x) * scale) + np.sum(w * x)

    _check(f, points=(X1, X1 + 0.25))


def test_results_of_no_grad_are_cut_in_forward_mode_and_higher_order():
    t = np.array([0.5, -1.0, 2.0, 0.25])
    _, jv = tape.compile(scaled, X0).jvp((X1,), (t,))
    np.testing.assert_allclose(jv, X1.mean() * t.sum())
    hv = tape.compile(centred, X0).hvp((X1,), t)
    np.testing.assert_allclose(hv, 2 * t)  # mu constant: the Hessian is 2 I


def test_enable_grad_inside_no_grad_records_a_gradient():
    def f(x):
        with tape.no_grad():
            mu = np.mean(x)
            with tape.enable_grad():
                y = x * mu
        return np.sum(y) + mu

    cf = _check(f)
    v, g = cf.value_and_grad(X1)
    np.testing.assert_allclose(g, np.full(4, X1.mean()))


def test_is_grad_enabled_is_false_inside_no_grad_while_compiling():
    seen = []

    def f(x):
        with tape.no_grad():
            seen.append(tape.is_grad_enabled())
        seen.append(tape.is_grad_enabled())
        return np.sum(x)

    tape.compile(f, X0)
    assert seen[-2:] == [False, True]


def test_a_python_number_taken_under_no_grad_is_guarded():
    def f(x):
        with tape.no_grad():
            k = float(np.max(x))  # a Python float: the replay cannot compute it, a guard can
        return np.sum(x) * k

    cf = _check(f)
    assert cf.stats()["recordings"] >= 2  # each new maximum recorded again: never stale


def test_check_constants_accepts_no_grad_values():
    cf = tape.compile(centred, X0, check_constants=True)
    np.testing.assert_allclose(cf(X1), np.sum((X1 - X1.mean()) ** 2))


def test_saved_and_loaded_recording_keeps_the_cut(tmp_path):
    cf = tape.compile(scaled, X0)
    path = tmp_path / "scaled.npz"
    cf.save(path)
    v, g = tape.load(path).value_and_grad(X1)
    np.testing.assert_allclose(v, X1.sum() * X1.mean())
    np.testing.assert_allclose(g, np.full(4, X1.mean()))


def test_eager_no_grad_records_nothing():
    x = tape.tensor(X0, requires_grad=True)
    with tape.no_grad():
        mu = np.mean(x)
    assert not mu.requires_grad and mu.is_leaf

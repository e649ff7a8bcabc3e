"""A nested transform costs the same at every step of a loop: the rows an inner gradient sweeps
or scans, and the tapes it makes, do not grow with the steps recorded before it.

The shape is GradBench's saddle/particle: an outer derivative of K steps of an inner gradient
descent, ``y = y - 0.1 * inner(x, y)``, with the inner gradient by reverse or forward mode and
the outer one by either. Counters, not timings: a pass over earlier history shows as rows.
"""
import numpy as np
import pytest

import tape
from tape.reverse import backward as _backward, graph_backward as _graph_backward
from tape.core import tape as _tape
from tape.forward.tangent_rules import TapeReader
from tape.core.tape import newest_tape_id

X0 = np.array([0.3, 0.7])
Y0 = np.array([1.0, -0.5])


def f(x, p):
    return np.sum(x * p) - np.sum((x - p) ** 2)


def inner_reverse(x, y):
    return tape.grad(lambda p: -f(x, p))(y)


def inner_forward(x, y):
    return tape.jacfwd(lambda p: -f(x, p))(y)


INNER = {"r": inner_reverse, "f": inner_forward}
OUTER = {"r": tape.grad, "f": tape.jacfwd}


class Counter:
    """Rows given to need passes, rows read by recorded rules and forward scans, tapes made."""

    def __init__(self, monkeypatch):
        self.rows = 0
        plan_need, row = _backward.plan_need, TapeReader.row

        def counted_plan_need(t, A, *args, **kwargs):
            self.rows += len(A.R)
            return plan_need(t, A, *args, **kwargs)

        def counted_row(reader, slot):
            self.rows += 1
            return row(reader, slot)

        monkeypatch.setattr(_backward, "plan_need", counted_plan_need)
        monkeypatch.setattr(_graph_backward, "plan_need", counted_plan_need)
        monkeypatch.setattr(TapeReader, "row", counted_row)
        # (an earlier test in this process may have linked against creation order)
        monkeypatch.setattr(_tape, "_disordered", [False])

    def snapshot(self):
        return self.rows, newest_tape_id()


def run(variant, K, counter=None):
    """The outer derivative of K inner steps; with `counter`, also each inner step's rows and
    tapes."""
    inner, steps = INNER[variant[1]], []

    def body(x):
        y = Y0
        for _ in range(K):
            before = counter.snapshot() if counter else None
            y = y - 0.1 * inner(x, y)
            if counter:
                after = counter.snapshot()
                steps.append((after[0] - before[0], after[1] - before[1]))
        return np.sum(y * y) + np.sum(x)

    return OUTER[variant[0]](body)(X0), steps


def expected(K):
    # -f(x, p) = |x - p|^2 - x.p has gradient 2p - 3x in p: y <- 0.8 y + 0.3 x, so
    # y_K = 0.8^K y0 + 1.5 (1 - 0.8^K) x, and d/dx (|y_K|^2 + sum x) = 3 (1 - 0.8^K) y_K + 1
    a = 0.8 ** K
    yK = a * Y0 + 1.5 * (1 - a) * X0
    return 3 * (1 - a) * yK + 1.0


@pytest.mark.parametrize("variant", ["rr", "rf", "fr", "ff"])
def test_each_inner_step_costs_the_same(variant, monkeypatch):
    counter = Counter(monkeypatch)
    g10, steps10 = run(variant, 10, counter)
    g100, steps100 = run(variant, 100, counter)
    np.testing.assert_allclose(g10, expected(10), rtol=1e-13)
    np.testing.assert_allclose(g100, expected(100), rtol=1e-13)
    # the first step differs (its argument is a plain array: a leaf, not a copy); from the
    # second on, every step sweeps the same rows and makes the same tapes, the 99th as the 2nd
    steady = steps10[1]
    assert steady[0] > 0
    assert set(steps10[1:]) == {steady}, steps10
    assert set(steps100[1:]) == {steady}, sorted(set(steps100[1:]))


@pytest.mark.parametrize("variant", ["rr", "rf", "fr", "ff"])
def test_whole_run_is_linear_in_steps(variant, monkeypatch):
    counter = Counter(monkeypatch)
    per_step = []
    for K in (10, 100):
        start = counter.snapshot()
        run(variant, K)
        end = counter.snapshot()
        per_step.append(((end[0] - start[0]) / K, (end[1] - start[1]) / K))
    (rows10, tapes10), (rows100, tapes100) = per_step
    # the outer derivative's own sweep is linear too: per step, the totals agree up to the
    # steps' fixed ends (the first step, the final sum)
    assert abs(rows100 - rows10) <= 0.1 * rows10, per_step
    assert abs(tapes100 - tapes10) <= 0.1 * tapes10 + 0.5, per_step


def test_inner_gradient_of_a_closure_over_the_loop_state(monkeypatch):
    """An inner gradient with a plain-array argument (a fresh leaf each step) of a function
    closing over the loop's tensors: the backward stops at history older than the leaf."""
    counter = Counter(monkeypatch)
    steps = []

    def body(x, K):
        y = x * 1.0
        for _ in range(K):
            before = counter.snapshot()
            g = tape.grad(lambda p: np.sum(p * y) + np.sum(p * p))(Y0)
            y = y - 0.1 * g
            steps.append(counter.snapshot()[0] - before[0])
        return np.sum(y)

    for K in (10, 60):
        steps.clear()
        got = tape.grad(lambda x: body(x, K))(X0)
        # y <- y - 0.1 (y + 2 y0) = 0.9 y - 0.2 y0: dy_K/dx = 0.9^K
        np.testing.assert_allclose(got, np.full(2, 0.9 ** K), rtol=1e-13)
        assert len(set(steps[1:])) == 1, steps


def test_links_against_creation_order_turn_the_horizon_off(monkeypatch):
    """A tape that links to a newer tape breaks the order the horizon relies on: from then on
    every link is followed, and gradients stay right."""
    monkeypatch.setattr(_tape, "_disordered", [False])
    x = tape.tensor(np.array([1.0, 2.0]), requires_grad=True)
    old = _tape.current_tape()
    a = x * 3.0  # recorded on `old`
    assert a._tape is old
    _tape.state.tape = None
    newer = a * a  # a newer tape (linking to `old`)
    assert newer._tape.id > old.id
    _tape.state.tape = old  # back to the older tape, which now links to the newer one
    y = np.sum(newer * x)
    assert _tape._disordered[0]
    (g,) = tape.autograd.grad([y], [x])
    # y = sum(9 x^3): dy/dx = 27 x^2
    np.testing.assert_allclose(g, 27.0 * np.array([1.0, 2.0]) ** 2, rtol=1e-14)

"""The backward's lean path (``backward._sweep_whole``: a tape its first backward sweeps whole)
against the general path: the same gradients to the bit, the same state of the tape afterwards
(released or not, rows marked swept), the same errors; and the cases it must hand over (hooks,
escapes, retain_graph, rows left unswept, leaves changed in place) still right."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tape
from tape.reverse import backward
from _fd import fd_vjp


@pytest.fixture
def taken(monkeypatch):
    """Records whether each _sweep_whole call swept the tape (False: it returned None, the
    tape handed to the general path)."""
    calls = []
    real = backward._sweep_whole

    def spy(*args):
        r = real(*args)
        calls.append(r is not None)
        return r

    monkeypatch.setattr(backward, "_sweep_whole", spy)
    return calls


def general_only(monkeypatch):
    monkeypatch.setattr(backward, "_sweeps_whole", lambda t: False)


def bits(a):
    return np.asarray(a, np.float64).view(np.int64)


def assert_same_bits(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.shape(x) == np.shape(y)
        np.testing.assert_array_equal(bits(x), bits(y))  # (-0.0 and 0.0 told apart)


def issue_f(p):  # issue 31's 8-op function of a 2-vector
    x, y = p[0], p[1]
    return x * x + 3 * y - x * y + np.sin(x) * np.exp(y) - y * y


def small(x):
    a = x * 2.0
    b = np.sin(a)
    c = b * x
    d = c + 1.0
    e = np.exp(-d)
    h = e * e
    return np.sum(h - x)


def broadcast(x, w):
    return np.sum(np.tanh(x[:, None] * w + 0.5) ** 2) / np.sum(w * w + 1.0)


def two_uses(x):  # one leaf read by many rows, a root that is a 0-d reduction of 0-d rows
    s = np.sum(x)
    return s * s + np.sum(np.abs(x)) * s


def zero_d(x):
    return np.log1p(x * x) * np.cos(x)


FUNCTIONS = [
    (issue_f, [np.array([0.3, 0.7])]),
    (issue_f, [np.array([0.0, -0.0])]),
    (small, [np.array([0.3, 0.7])]),
    (small, [np.linspace(-1.0, 1.0, 7)]),
    (small, [np.array([2.0])]),
    (small, [np.zeros(0)]),
    (broadcast, [np.linspace(-1.0, 1.0, 4), np.arange(1.0, 4.0)]),
    (two_uses, [np.array([1.5, -2.0, 0.0])]),  # abs at 0: the rule's value there, both paths
    (zero_d, [np.float64(0.4)]),
]


@pytest.mark.parametrize("f, args", FUNCTIONS)
def test_same_bits_as_general_path_and_right(f, args, taken, monkeypatch):
    nums = tuple(range(len(args)))
    lean = tape.grad(f, argnums=nums)(*args)
    assert taken and all(taken)  # the lean path swept it
    general_only(monkeypatch)
    assert_same_bits(lean, tape.grad(f, argnums=nums)(*args))
    for i, g in enumerate(lean):
        if np.size(args[i]):
            np.testing.assert_allclose(g, fd_vjp(f, list(args), 1.0, [i])[0], rtol=1e-6,
                                       atol=1e-8)


def test_hand_derived():
    p = np.array([0.3, 0.7])
    x, y = p
    want = [2 * x - y + np.cos(x) * np.exp(y), 3 - x + np.sin(x) * np.exp(y) - 2 * y]
    np.testing.assert_allclose(tape.grad(issue_f)(p), want, rtol=1e-14)


def _backward_state(f, x0, monkeypatch=None, **kw):
    x = tape.tensor(x0, requires_grad=True)
    y = f(x)
    t = y._tape
    y.backward(**kw)
    return x.grad, t


def test_backward_into_grad_releases_the_tape_like_the_general_path(taken, monkeypatch):
    g, t = _backward_state(small, np.array([0.3, 0.7, -1.0]))
    assert taken[-1] and t.released
    general_only(monkeypatch)
    g2, t2 = _backward_state(small, np.array([0.3, 0.7, -1.0]))
    assert t2.released
    assert_same_bits([g], [g2])
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        x = tape.tensor(np.array([0.3]), requires_grad=True)
        y = small(x)
        y.backward()
        y.backward()


def test_backward_twice_same_error_both_paths(monkeypatch):
    def twice():
        x = tape.tensor(np.array([0.3, 0.2]), requires_grad=True)
        y = small(x)
        y.backward()
        with pytest.raises(RuntimeError) as e:
            y.backward()
        return str(e.value)

    lean = twice()
    general_only(monkeypatch)
    assert twice() == lean


def test_rows_left_unswept_hand_over_with_the_same_state(taken, monkeypatch):
    """A row with an operand that this backward does not sweep (an output nobody asked about):
    the tape lives on, its swept rows marked, and the other output's backward still works."""
    def run():
        x = tape.tensor(np.array([0.3, 0.7]), requires_grad=True)
        y = np.sum(np.sin(x))
        z = np.sum(x * x)  # not swept by y's backward
        y.backward()
        t = y._tape
        state = (t.released, t.freed.copy())
        g1 = x.grad.copy()
        z.backward()
        return g1, x.grad, state, t.released

    g1, g2, (rel, freed), rel_after = run()
    assert taken == [False]  # handed over
    assert not rel and freed.any() and not freed.all() and rel_after
    general_only(monkeypatch)
    h1, h2, (rel_b, freed_b), rel_after_b = run()
    assert_same_bits([g1, g2], [h1, h2])
    assert rel == rel_b and rel_after == rel_after_b
    np.testing.assert_array_equal(freed, freed_b)


def test_retain_graph_keeps_the_general_path(taken):
    x = tape.tensor(np.array([0.3, 0.7]), requires_grad=True)
    y = small(x)
    y.backward(retain_graph=True)
    g = x.grad.copy()
    y.backward()
    assert not taken  # retain_graph: never the lean path; the second backward sweeps a built tape
    assert_same_bits([x.grad], [2 * g])


def hooked(x):
    h = np.sin(x) * 2.0
    h.register_hook(lambda g: g * 3.0)
    return np.sum(h * h)


def hooked_np(x):  # the same gradient: the hook triples h's
    return np.sum((2.0 * np.sin(x)) ** 2) * 3.0


def with_inv(x):  # inv: an escape row (its reverse rule runs in NumPy)
    return np.sum(np.linalg.inv(np.outer(x, x) + np.eye(3) * 2.0))


@pytest.mark.parametrize("f, f_np", [(hooked, hooked_np), (with_inv, with_inv)])
def test_hooks_and_escapes_take_the_general_path(f, f_np, taken, monkeypatch):
    x0 = np.array([0.3, -0.7, 1.1])
    g = tape.grad(f)(x0)
    assert not taken  # a tape with hooks or escape rows: never the lean path
    np.testing.assert_allclose(g, fd_vjp(f_np, [x0], 1.0, [0])[0], rtol=1e-6)


def test_leaf_hooks_run_on_the_lean_path(taken, monkeypatch):
    def run():
        x = tape.tensor(np.array([0.3, 0.7]), requires_grad=True)
        seen = []
        x.register_hook(lambda g: seen.append(g.copy()) or g * 2.0)
        small(x).backward()
        return x.grad, seen[0]

    g, seen = run()
    assert taken and taken[-1]
    general_only(monkeypatch)
    g2, seen2 = run()
    assert_same_bits([g, seen], [g2, seen2])
    assert_same_bits([g], [2.0 * seen])


def test_leaf_changed_in_place_hands_over_and_names_the_op(taken):
    x = tape.tensor(np.array([0.3, 0.7]), requires_grad=True)
    y = np.sum(np.sin(x))
    with tape.no_grad():
        x += 1.0
    with pytest.raises(RuntimeError, match="modified by an in-place operation.*'sin'"):
        y.backward()
    assert not taken


def test_several_roots_with_array_seeds(taken, monkeypatch):
    def run():
        x = tape.tensor(np.array([0.3, 0.7, -0.2]), requires_grad=True)
        y1 = np.sin(x) * x
        y2 = np.sum(np.exp(x))
        tape.autograd.backward([y1, y2], [np.array([1.0, -2.0, 0.5]), np.array(3.0)])
        return x.grad

    g = run()
    assert taken[-1]
    general_only(monkeypatch)
    assert_same_bits([g], [run()])


def test_higher_order_same_bits(taken, monkeypatch):
    """grad of grad, hessian, jacfwd of grad and the K-step loop: tapes with links or rows of
    a nested transform go to the general path at once (their outer backward leaves rows
    unswept: no lean attempt for nothing); the same bits with the lean path allowed or not."""
    def f(x, p):
        return np.sum(x * p) - np.sum((x - p) ** 2)

    def steps(x):
        y = np.array([1.0, -0.5])
        for _ in range(5):
            y = y - 0.1 * tape.grad(lambda p: -f(x, p))(y)
        return np.sum(y * y) + np.sum(x)

    x0 = np.array([0.3, 0.7])
    runs = [lambda: tape.grad(lambda x: np.sum(tape.grad(issue_f)(x) ** 2))(x0),
            lambda: tape.hessian(issue_f)(x0),
            lambda: tape.jacfwd(tape.grad(issue_f))(x0),
            lambda: tape.grad(steps)(x0)]
    lean = [r() for r in runs]
    assert not taken
    general_only(monkeypatch)
    for r, want in zip(runs, lean):
        assert_same_bits([r()], [want])
    np.testing.assert_allclose(lean[0], fd_vjp(lambda x: np.sum(tape.grad(issue_f)(x) ** 2),
                                               [x0], 1.0, [0])[0], rtol=1e-6)


def test_create_graph_then_backward_same_bits(taken, monkeypatch):
    """autograd.grad(create_graph=True) records its backward; the second backward over those
    rows goes to the general path at once (Tape.nested): the same bits either way."""
    def run():
        x = tape.tensor(np.array([0.3, -0.7, 1.1]), requires_grad=True)
        y = small(x) * np.sum(x * x)
        (g,) = tape.autograd.grad(y, x, create_graph=True)
        z = np.sum(g * g)
        z.backward()
        return g.detach().numpy(), x.grad

    lean = run()
    assert not taken
    general_only(monkeypatch)
    assert_same_bits(lean, run())
    x0 = np.array([0.3, -0.7, 1.1])
    gx = lambda v: tape.grad(lambda u: small(u) * np.sum(u * u))(v)  # noqa: E731
    np.testing.assert_allclose(lean[1], fd_vjp(lambda v: np.sum(gx(v) ** 2), [x0], 1.0, [0])[0],
                               rtol=1e-5)


def test_vjp_pullback_twice_same_bits(taken, monkeypatch):
    """tape.vjp's pullback keeps the graph (retain_graph): never the lean path, and a second
    pullback gives the same result."""
    def run():
        out, pull = tape.vjp(lambda v: np.sin(v) * v, np.array([0.3, 0.7]))
        return pull(np.array([1.0, -2.0]))[0], pull(np.array([0.5, 0.25]))[0]

    lean = run()
    assert not taken
    general_only(monkeypatch)
    assert_same_bits(lean, run())


# tape.grad of one argument takes backward.grad_of_one: the lean path without the general
# driver, or run() for what it cannot take; the same results and errors either way.
W = np.array([0.4, -1.3])


def grad_both_ways(f, x0, monkeypatch):
    """tape.grad(f)(x0) by grad_of_one's lean path (when it takes the call) and by the general
    path, as (result or exception type) pairs."""
    def call():
        try:
            return tape.grad(f)(x0)
        except Exception as e:  # (compared: the same type and message both ways)
            return (type(e), str(e))
    lean = call()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(backward, "_sweeps_whole", lambda t: False)
        return lean, call()


@pytest.mark.parametrize("x0", [np.float64(0.3), np.array(0.3), np.array([0.3]),
                                np.array([[0.3, -2.0], [1.5, 0.0]]), np.zeros(0)])
def test_grad_of_one_shapes_same_bits(x0, taken, monkeypatch):
    def f(x):
        return np.sum(np.sin(x) * x + 2.0 * x)
    lean, general = grad_both_ways(f, x0, monkeypatch)
    assert taken and taken[0]  # the first call swept by the lean path
    assert_same_bits([lean], [general])
    assert np.shape(lean) == np.shape(x0)
    np.testing.assert_allclose(lean, np.cos(x0) * x0 + np.sin(x0) + 2.0, rtol=1e-14)


def test_grad_of_one_output_is_the_argument(monkeypatch):
    lean, general = grad_both_ways(lambda x: x, np.float64(0.3), monkeypatch)
    assert_same_bits([lean, general], [1.0, 1.0])


def test_grad_of_one_unreached_argument_is_zero_and_keeps_other_leaves(monkeypatch):
    w = tape.tensor(W, requires_grad=True)
    lean, general = grad_both_ways(lambda x: np.sum(w * w), np.array([1.0, 2.0]), monkeypatch)
    assert_same_bits([lean, general], [np.zeros(2), np.zeros(2)])
    assert w.grad is None  # (not asked for)


def test_grad_of_one_of_a_tape_recorded_before_same_results_and_state(monkeypatch):
    """f returns a tensor recorded outside (not on the call's tape, x unused): zero both
    times, the tape built and handed over, not released (no row on a path to x), its root row
    marked swept, so that its own backward then names the second backward, both ways."""
    def run():
        w = tape.tensor(W, requires_grad=True)
        y = np.sum(np.exp(w))

        def f(x):
            return y
        first = tape.grad(f)(np.array([1.0]))
        second = tape.grad(f)(np.array([1.0]))
        t = y._tape
        state = (t.released, t.built is not None)
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward()
        return first, second, state
    lean = run()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(backward, "_sweeps_whole", lambda t: False)
        general = run()
    assert_same_bits(lean[:2], general[:2])
    assert lean[2] == general[2] == (False, True)
    assert_same_bits(lean[:2], [np.zeros(1), np.zeros(1)])


def test_grad_of_one_hook_registered_inside_f_runs(monkeypatch):
    seen = []

    def f(x):
        x.register_hook(lambda g: seen.append(g.copy()) or 3.0 * g)
        return np.sum(x * x)
    x0 = np.array([0.5, -1.0])
    lean, general = grad_both_ways(f, x0, monkeypatch)
    assert_same_bits([lean, general], [6.0 * x0, 6.0 * x0])
    assert len(seen) == 2
    assert_same_bits([seen[0]], [2.0 * x0])


def test_grad_of_one_matches_backward_of_the_same_function(taken):
    x0 = np.array([0.3, 0.7])
    g = tape.grad(issue_f)(x0)
    x = tape.tensor(x0, requires_grad=True)
    issue_f(x).backward()
    assert all(taken)
    assert_same_bits([g], [x.grad])


SHAPES = st.sampled_from([(), (1,), (3,), (2, 3), (0,)])
VALUES = st.floats(-3.0, 3.0, allow_nan=False, allow_subnormal=False)


def mixed(x, w):  # broadcasting, 0-d rows, a reduction, functions with kinks and near-zero cases
    h = np.sqrt(x * x + 1e-3) * np.exp(-np.abs(w)) + np.maximum(x, 0.5) * w
    return np.sum(np.tanh(h) * h) + np.sum(w) * np.sum(x)


@settings(deadline=None, max_examples=40)
@given(data=st.data(), shape_x=SHAPES, shape_w=SHAPES)
def test_lean_and_general_paths_agree_on_random_shapes_and_values(data, shape_x, shape_w):
    try:
        np.broadcast_shapes(shape_x, shape_w)
    except ValueError:
        return
    x = data.draw(hnp.arrays(np.float64, shape_x, elements=VALUES))
    w = data.draw(hnp.arrays(np.float64, shape_w, elements=VALUES))
    calls = []
    real = backward._sweep_whole
    with pytest.MonkeyPatch.context() as m:
        m.setattr(backward, "_sweep_whole", lambda *a: calls.append(real(*a)) or calls[-1])
        lean = tape.grad(mixed, argnums=(0, 1))(x, w)
    assert calls and all(c is not None for c in calls)  # swept by the lean path
    with pytest.MonkeyPatch.context() as m:
        m.setattr(backward, "_sweeps_whole", lambda t: False)
        general = tape.grad(mixed, argnums=(0, 1))(x, w)
    assert_same_bits(lean, general)


def test_reused_work_arrays_same_bits(monkeypatch):
    """Small tapes reuse their work arrays (backward._work_arrays): calls of one size, of
    another, a tape handed over (which keeps its set) and the first size again all give the
    general path's bits."""
    p, q = np.array([0.3, 0.7]), np.array([0.3, 0.7, -1.0])

    def calls():
        out = [tape.grad(issue_f)(p), tape.grad(issue_f)(p * 2.0), tape.grad(small)(q)]
        x = tape.tensor(q, requires_grad=True)
        y, z = np.sum(np.sin(x)), np.sum(x * x)  # z's rows stay unswept: handed over
        y.backward()
        out.append(x.grad.copy())
        out += [tape.grad(issue_f)(p), tape.grad(small)(q * 0.5), tape.grad(issue_f)(-p)]
        return out

    lean = calls()
    assert len(backward._WORK) <= backward._WORK_SETS
    with pytest.MonkeyPatch.context() as m:
        m.setattr(backward, "_sweeps_whole", lambda t: False)
        general = calls()
    assert_same_bits(lean, general)
    assert_same_bits([lean[0]], [lean[4]])

"""Transforms in threads: dual levels and every other "current" state are per thread, so grad,
hvp, jvp, jacfwd, dual levels and compiled replays run in many threads at once with the results
of one thread, and none leaves a level or any other state behind."""
import threading

import numpy as np
import pytest

import tape
from tape.forward import forward_ad as fwAD  # its private state (_active) too
from tape.core.state import state

from _run_threads import run_threads as run_all


def f(x):
    return np.sum(np.sin(x) * x ** 2 + np.exp(-x) * x[::-1])


def g(x):
    return np.tanh(x) * np.roll(x, 1) + x ** 3


X = np.linspace(0.1, 1.3, 6)
V = np.cos(np.arange(6.0))


def _run_threads(workers, timeout=60.0):
    """test_threads' runner, each thread checking that it ended with no level or transform
    left."""
    run_all(workers, timeout, after=_assert_clean)


def _assert_same(a, b, name):
    if isinstance(b, tuple):
        assert isinstance(a, tuple) and len(a) == len(b), name
        for x, y in zip(a, b):
            _assert_same(x, y, name)
    else:
        assert type(a) is type(b), name
        np.testing.assert_array_equal(a, b, err_msg=name)


def _assert_clean():
    assert state.levels == []
    assert state.transforms == 0
    assert state.grad is True
    assert state.guards is None and state.saved_hooks is None


@pytest.fixture(autouse=True)
def clean():
    _assert_clean()
    yield
    _assert_clean()
    assert fwAD._active == {}, "a level is still registered as active"


def test_hvp_in_eight_threads():
    """Reproducer: levels were process-wide, so threads exited each other's levels ("level 9
    is not the innermost active level (11)"), left them active, and a later tape.grad in the
    main thread returned a Tensor."""
    ref = tape.hvp(f, X, V)

    def work():
        for _ in range(40):
            np.testing.assert_array_equal(tape.hvp(f, X, V), ref)

    _run_threads([work] * 8)
    out = tape.grad(f)(X)
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, tape.grad(f)(X.copy()))


def test_grad_in_one_thread_while_another_is_inside_a_dual_level():
    """Reproducer: another thread's active level made tape.grad see itself nested and return
    Tensors."""
    ref = tape.grad(f)(X)
    inside, done = threading.Event(), threading.Event()

    def holder():
        with fwAD.dual_level():
            y = np.sin(fwAD.make_dual(X, V))
            inside.set()
            done.wait(30)
            np.testing.assert_array_equal(fwAD.unpack_dual(y).tangent.numpy(), np.cos(X) * V)

    t = threading.Thread(target=holder)
    t.start()
    try:
        assert inside.wait(30)
        out = tape.grad(f)(X)
        assert type(out) is np.ndarray
        np.testing.assert_array_equal(out, ref)
        assert fwAD.unpack_dual(tape.tensor(1.0)).tangent is None  # no level in this thread
    finally:
        done.set()
        t.join(30)


def test_a_level_of_another_thread_is_named():
    got = []
    entered, done = threading.Event(), threading.Event()

    def holder():
        with fwAD.dual_level() as level:
            got.append(level)
            entered.set()
            done.wait(30)

    t = threading.Thread(target=holder)
    t.start()
    try:
        assert entered.wait(30)
        with pytest.raises(RuntimeError, match=f"dual level {got[0]} belongs to another thread"):
            fwAD.make_dual(X, V, level=got[0])
        with pytest.raises(RuntimeError, match="no dual level is active in this thread"):
            fwAD.exit_dual_level()
    finally:
        done.set()
        t.join(30)


def test_an_exception_leaves_no_level():
    def boom(x):
        fwAD.enter_dual_level()  # entered inside, never exited: the exception passes it by
        raise KeyError("boom")

    with pytest.raises(KeyError):
        tape.jvp(lambda x: boom(x) + x, (X,), (V,))
    with pytest.raises(KeyError):
        with fwAD.dual_level():
            with fwAD.dual_level():
                boom(X)
    with pytest.raises(KeyError):
        tape.hvp(lambda x: boom(x), X, V)
    for bad in (lambda x: np.sum(x) + boom(x), f):
        with pytest.raises(KeyError):
            tape.grad(lambda x: tape.jvp(bad, (x,), (V,))[1] + boom(x))(X)
    assert type(tape.hvp(f, X, V)) is np.ndarray


def test_a_level_left_open_inside_a_block_is_an_error():
    with pytest.raises(RuntimeError, match=r"level\(s\) \[\d+\] entered inside the level \d+ "
                                           "were not exited"):
        with fwAD.dual_level():
            fwAD.enter_dual_level()
    with fwAD.dual_level() as outer:
        with pytest.raises(RuntimeError, match="level \\d+ was exited inside its `with` block"):
            with fwAD.dual_level():
                fwAD.exit_dual_level()
        assert [lv.index for lv in state.levels] == [outer]


def test_rules_of_a_level_own_only_their_threads_tapes(monkeypatch):
    """A tape another thread makes while this thread's level works out tangents is not one of
    the level's own (whose rows carry no tangent at it): a tensor recorded there from this
    thread's dual tensor keeps its tangent."""
    made = []
    real = fwAD.row_tangent

    def rule_while_another_thread_records(*args, **kwargs):
        if not made:
            t = threading.Thread(target=lambda: made.append(x * 3.0))  # a new tape, there
            t.start()
            t.join(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(fwAD, "row_tangent", rule_while_another_thread_records)
    with fwAD.dual_level():
        x = fwAD.make_dual(X, V)
        fwAD.unpack_dual(np.sin(x))
        assert made
        tz = fwAD.unpack_dual(made[0]).tangent
        assert tz is not None
        np.testing.assert_array_equal(tz.numpy(), 3.0 * V)


def test_eight_threads_mix_transforms_and_replays():
    """grad, hvp, jvp, jacfwd, dual levels (nested: forward over forward) and compiled replays
    (one shared compiled tape, one per thread) in 8 threads: the bits of one thread."""
    shared = tape.compile(f, X)

    def dual(x, v):  # forward over forward: d2 g [v, v]
        with fwAD.dual_level() as outer:
            xo = fwAD.make_dual(x, v, level=outer)
            with fwAD.dual_level() as inner:
                xi = fwAD.make_dual(xo, v, level=inner)
                dy = fwAD.unpack_dual(g(xi), level=inner).tangent  # J_g v, dual at outer
            return fwAD.unpack_dual(dy, level=outer).tangent.detach().numpy()

    def jobs(x, cf):
        return {
            "grad": tape.grad(f)(x),
            "value_and_grad": tape.value_and_grad(f)(x),
            "hvp": tape.hvp(f, x, V),
            "jvp": tape.jvp(g, (x,), (V,)),
            "jacfwd": tape.jacfwd(g)(x),
            "jacrev": tape.jacrev(g)(x),
            "hessian": tape.hessian(f)(x),
            "grad_of_jvp": tape.grad(lambda z: np.sum(tape.jvp(g, (z,), (V,))[1] ** 2))(x),
            "dual": dual(x, V),
            "replay": cf.value_and_grad(x),
            "replay_hvp": cf.hvp((x,), V),
            "shared": shared.value_and_grad(x),
        }

    inputs = [X + 0.05 * i for i in range(8)]
    ref = [jobs(x, tape.compile(f, x)) for x in inputs]

    def worker(i):
        def run():
            cf = tape.compile(f, inputs[i])
            for r in range(6):
                k = (i + r) % 8  # each thread meets every input, so threads differ each round
                got = jobs(inputs[k], cf if k == i else tape.compile(f, inputs[k]))
                for name, want in ref[k].items():
                    _assert_same(got[name], want, name)
        return run

    _run_threads([worker(i) for i in range(8)])
    assert type(tape.grad(f)(X)) is np.ndarray

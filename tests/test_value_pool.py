"""Kept value memory (``tape.core.value_pool``): a released tape's large values that nothing else
references go to its thread's next recordings, and nothing that someone can still read is ever
reused. Every check runs a function whose values are large enough to be kept, compares values
and gradients with the pool off (bit for bit), and poisons kept buffers with NaN so that a
result read from a reused buffer before it is fully written, or a reused buffer someone still
sees, shows."""
import gc
import sys
import threading
import weakref

import numpy as np
import pytest

import tape
from tape.core import value_pool

N = value_pool.MIN_CELLS  # a vector this long makes a value large enough to keep
pytestmark = pytest.mark.skipif(value_pool._ALONE is None,
                                reason="this interpreter's reference counts do not show an "
                                       "array's views: nothing is kept")


@pytest.fixture(autouse=True)
def empty_pool():
    value_pool.clear()
    yield
    value_pool.clear()


def pool_off(fn, *args):
    """fn(*args) with nothing given back to the pool (every value newly allocated)."""
    saved = value_pool._ALONE
    value_pool._ALONE = None
    value_pool.clear()
    try:
        return fn(*args)
    finally:
        value_pool._ALONE = saved
        value_pool.clear()


def poison():
    """NaN into every buffer the thread holds: a later result must not show any of it."""
    for lst in value_pool._pool.free.values():
        for buf in lst:
            buf.fill(np.nan)


def mixture(means, x):
    """W2's shape of work in small: a broadcast subtract, a batched product (a BLAS escape), a
    same-shape multiply, a reduction over the last axis, a float times an array, own-value
    unary rows and a full sum."""
    centred = x[None, :, :] - means[:, None, :]           # (k, n, d), broadcast
    q = np.matmul(centred, np.transpose(means[:, None, :] * np.ones((1, 4, 1)), (0, 2, 1)))
    main = -0.5 * np.sum(q * q, axis=2)                    # same shape, reduce, with float
    return np.sum(np.log1p(np.exp(main)) + np.tanh(np.sqrt(q * q + 1.0)).sum(axis=2))


def elementwise(x):
    return np.sum(np.tanh(x) * np.exp(-x * x) + np.log1p(x * x))


def mlp(W, X):
    """A product large enough for BLAS (an escape row, whose reverse rule computes W's adjoint
    through kept memory) with a large constant operand (copied in)."""
    return np.sum(np.tanh(X @ W) * 2.0)


rng = np.random.default_rng(0)
MEANS = rng.uniform(size=(5, 4))
X = rng.normal(size=(N // 4, 4))  # (k, n, d) = (5, N/4, 4): every array value >= N cells
V = np.linspace(-2.0, 2.0, N)
W = rng.normal(size=(256, 128)) / 16.0
XS = rng.normal(size=(256, 256))


@pytest.mark.parametrize("f, args", [(mixture, (MEANS, X)), (elementwise, (V,)), (mlp, (W, XS))])
def test_reused_memory_gives_the_same_bits(f, args):
    vg = tape.value_and_grad(f, argnums=tuple(range(len(args))) if f is mixture else 0)
    want = pool_off(vg, *args)
    got1 = vg(*args)
    assert value_pool.held_cells() >= 2 * N  # the first call's large values were kept
    for _ in range(2):
        poison()
        got = vg(*args)
        assert got[0] == want[0]
        grads = got[1] if type(got[1]) is tuple else (got[1],)
        wants = want[1] if type(want[1]) is tuple else (want[1],)
        assert len(grads) == len(wants)
        for g, w in zip(grads, wants):
            np.testing.assert_array_equal(g, w)
    assert got1[0] == want[0]


def test_a_constant_changed_after_recording_changes_nothing():
    # a large constant is copied into kept memory: the caller's array stays the caller's
    c = np.cos(V)
    x = tape.tensor(V, requires_grad=True)
    y = np.sum(np.sin(x) * c)
    want = np.cos(V) * np.cos(V)
    c[:] = 7.0
    y.backward()
    np.testing.assert_array_equal(x.grad, want)
    poison()
    c2 = np.cos(V)
    x2 = tape.tensor(V, requires_grad=True)
    y2 = np.sum(np.sin(x2) * c2)
    c2[:] = np.nan
    y2.backward()
    np.testing.assert_array_equal(x2.grad, want)


def test_the_buffers_are_the_ones_given_back():
    vg = tape.value_and_grad(elementwise)
    vg(V)
    held = {id(b) for lst in value_pool._pool.free.values() for b in lst}
    seen = []
    take = value_pool.take

    def spy(shape, n):
        y = take(shape, n)
        seen.append(id(y if y.base is None else y.base))
        return y

    value_pool.take = spy
    import tape.core.record as record
    saved = record.take
    record.take = spy
    try:
        vg(V)
    finally:
        record.take = saved
        value_pool.take = take
    assert held & set(seen)  # recordings computed into kept memory


def test_small_values_are_not_kept():
    tape.grad(elementwise)(np.linspace(-1.0, 1.0, 64))
    assert value_pool.held_cells() == 0


def test_values_the_caller_keeps_are_never_reused():
    kept = []

    def f(x):
        y = np.exp(x) * 2.0
        kept.append(y)  # a tensor outliving the call
        view = y.numpy()  # and a read-only view of another value's memory
        kept.append(view)
        return np.sum(np.sin(y) * x)

    x = tape.tensor(V, requires_grad=True)
    f(x).backward()
    y, view = kept
    want_y, want_view = np.array(y.numpy()), view.copy()
    for _ in range(3):
        poison()
        tape.grad(elementwise)(V)  # recordings that take kept memory
        x2 = tape.tensor(V, requires_grad=True)
        np.sum(np.sin(np.exp(x2) * 2.0) * x2).backward()
    np.testing.assert_array_equal(y.numpy(), want_y)
    np.testing.assert_array_equal(view, want_view)


def test_an_aux_output_outlives_later_calls():
    def f(x):
        y = np.exp(x) - 1.0
        return np.sum(y * x), y

    vg = tape.value_and_grad(f, has_aux=True)
    (_, aux), _ = vg(V)
    view = aux.numpy() if hasattr(aux, "numpy") else aux
    want = np.array(view)
    for _ in range(3):
        poison()
        np.testing.assert_array_equal(view, want)
        vg(V)
        tape.grad(elementwise)(V)
    np.testing.assert_array_equal(view, want)


def test_a_view_of_a_value_kept_by_the_caller_keeps_its_owner_out():
    views = []

    def f(x):
        y = np.cos(x) + 1.0
        views.append(y.numpy()[10:20])  # a slice of the value's memory, nothing else
        return np.sum(y * y)

    tape.grad(f)(V)
    want = views[0].copy()
    poison()  # (every kept buffer: the view's memory must not be one)
    np.testing.assert_array_equal(views[0], want)
    for _ in range(3):
        tape.grad(elementwise)(V)  # other values, computed into kept memory
        tape.grad(f)(V)
    np.testing.assert_array_equal(views[0], want)


def test_a_weak_reference_keeps_a_value_out():
    refs = []

    def f(x):
        y = np.exp(x) + 0.5
        refs.append(weakref.ref(y._v))
        return np.sum(y * y)

    tape.grad(f)(V)
    owner = refs[0]()
    if owner is not None:  # (still reachable: then never handed to a recording)
        want = owner.copy()
        poison()
        tape.grad(f)(V)
        np.testing.assert_array_equal(owner, want)
        assert all(b is not owner for lst in value_pool._pool.free.values() for b in lst)


def test_retain_graph_keeps_every_value():
    x = tape.tensor(V, requires_grad=True)
    y = np.sum(np.exp(x) * np.sin(x))
    y.backward(retain_graph=True)
    assert value_pool.held_cells() == 0  # the tape is not released
    g1 = x.grad.copy()
    poison()
    tape.grad(elementwise)(V)
    y.backward()  # reads the same values again
    np.testing.assert_array_equal(x.grad, 2 * g1)


def test_each_thread_has_its_own_pool():
    vg = tape.value_and_grad(elementwise)
    want = pool_off(vg, V)
    vg(V)
    mine = value_pool.held_cells()
    out = {}

    def run():
        out["before"] = value_pool.held_cells()
        for _ in range(3):
            out["got"] = vg(V)
        out["after"] = value_pool.held_cells()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for th in threads:
        th.start()
    for _ in range(3):
        assert vg(V)[0] == want[0]
    for th in threads:
        th.join()
    assert out["before"] == 0 and out["after"] > 0
    assert out["got"][0] == want[0]
    np.testing.assert_array_equal(out["got"][1], want[1])
    assert value_pool.held_cells() == mine


def test_a_backward_inside_a_hook_records_while_the_outer_tape_is_live():
    # the hook's own recordings take kept memory while the outer tape still needs its values
    vg = tape.value_and_grad(elementwise)
    want_inner = pool_off(vg, V)
    vg(V)  # leaves memory for the hook's recording to take
    seen = []

    def hook(g):
        poison()
        seen.append(vg(V))
        return g

    def outer():
        a = tape.tensor(V, requires_grad=True)
        y = np.sin(a) * np.exp(a)
        y.register_hook(hook)
        np.sum(y * np.cos(a)).backward()
        return a.grad

    want_outer = pool_off(outer)
    seen.clear()
    vg(V)
    got = outer()
    np.testing.assert_array_equal(got, want_outer)
    assert seen[-1][0] == want_inner[0]
    np.testing.assert_array_equal(seen[-1][1], want_inner[1])


def test_second_order_gives_the_same_bits():
    def f(x):
        return np.sum(np.exp(np.sin(x)) * x)

    def hvp(x):
        return tape.grad(lambda z: np.sum(tape.grad(f)(z) * np.cos(z)))(x)

    want = pool_off(hvp, V)
    for _ in range(3):
        poison()
        np.testing.assert_array_equal(hvp(V), want)


def test_a_function_saving_a_value_keeps_it():
    class Scale(tape.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 3.0

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3.0 + 0.0 * x

    def f(x):
        return np.sum(Scale.apply(np.exp(x)) * x)

    want = pool_off(tape.value_and_grad(f), V)
    for _ in range(3):
        poison()
        got = tape.value_and_grad(f)(V)
        assert got[0] == want[0]
        np.testing.assert_array_equal(got[1], want[1])


def test_a_list_another_object_holds_is_not_given_back():
    x = tape.tensor(V, requires_grad=True)
    y = np.exp(x) * 2.0
    t = y._tape
    other = t.av  # a second holder of the tape's list
    del y
    t.release()
    assert value_pool.held_cells() == 0
    assert other is not None


def test_the_calibration_tells_sharing_apart():
    alone = value_pool._ALONE
    assert alone is not None and alone[0] >= 2 and alone[1] >= 2
    base = np.zeros(2 * N)
    values = [np.zeros(N), base[:N]]
    del base
    assert len(value_pool._sole_owners(values, alone)) == 2
    extra = (values[0][:1], values[1].base[N:])
    assert value_pool._sole_owners(values, alone) == []
    del extra
    assert len(value_pool._sole_owners(values, alone)) == 2


def test_read_only_and_foreign_memory_is_never_kept():
    ro = np.zeros(N)
    ro.flags.writeable = False
    foreign = np.frombuffer(bytearray(8 * N))
    ints = np.zeros(N, np.int64)
    values = [ro, foreign, ints]
    del ro, foreign, ints
    assert value_pool._sole_owners(values, value_pool._ALONE) == []


def test_the_held_memory_is_bounded(monkeypatch):
    monkeypatch.setattr(value_pool, "MAX_CELLS", 3 * N)
    for _ in range(3):
        tape.grad(elementwise)(V)
        assert value_pool.held_cells() <= 3 * N
    assert value_pool.held_cells() > 0


def test_errors_stay_numpys():
    a = tape.tensor(np.ones((N, 1)), requires_grad=True)
    b = np.ones((1, 3))
    (np.sum(a * b)).backward()  # notes the shapes' result
    tape.grad(lambda z: np.sum(z * b))(np.ones((N, 1)))
    with pytest.raises(ValueError, match="operand shapes"):
        np.ones((N, 2)) - tape.tensor(np.ones((3, N)), requires_grad=True)
    with pytest.raises(ValueError, match="matmul"):
        np.matmul(tape.tensor(np.ones((N, 3)), requires_grad=True), np.ones((4, 2)))


def test_a_dead_tape_without_backward_gives_nothing_back():
    x = tape.tensor(V, requires_grad=True)
    y = np.exp(x) * 2.0
    del y
    gc.collect()
    assert value_pool.held_cells() == 0
    assert sys.getrefcount(x) >= 2


@pytest.mark.parametrize("built", [False, True])
def test_a_released_tape_hands_over_its_large_values_only(built):
    """``Tape.release`` looks at the side rows' sizes (the lists, or the built arrays) and hands
    the pool the large values alone; the pool then keeps them as it would from the whole list."""
    from tape.core import tape as tape_module
    from tape.core.tensor import array_row

    t = tape_module.Tape()
    values = [np.ones(3), np.ones(N), np.ones((2, 2)), np.ones(2 * N), np.ones(N - 1)]
    for v in values:
        array_row(t, tape_module.CONST, -1, -1, v, v.size)
    t.sv.append(1.5)  # a 0-d row between them (no side row)
    t.rows.extend((tape_module.CONST, -1, -1))
    if built:
        t.build()
    large = {id(values[1]), id(values[3])}
    del values
    t.release()
    held = {id(b) for lst in value_pool._pool.free.values() for b in lst}
    assert held == large

"""Assembled arrays (``tape.numpy_ops._assembly``): concatenate, stack, hstack, vstack scatter
each input into a constant base directly when its elements land in their own order, and keep
their placement per shapes. The gradients must be those of the general form (a gather of each
input, then the scatter) bit for bit, and right in every mode."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tape
from tape.numpy_ops import _assembly

from _derivative_checks import check_jvp, check_second
from _fd import check_vjp


def gathered(monkeypatch):
    """Make every placement read its inputs through a gather row (the general form)."""
    real = _assembly._Placement.__init__

    def init(self, fn, xs):
        real(self, fn, xs)
        self.src = [np.arange(x.size) if s is None else s for s, x in zip(self.src, xs)]

    monkeypatch.setattr(_assembly._Placement, "__init__", init)
    monkeypatch.setattr(_assembly, "_PLANS", {})


def gmm_packed(icf, extra):
    d = 4
    diag = np.exp(icf[:, :d])
    packed = np.concatenate([diag, icf[:, d:], np.zeros((icf.shape[0], 1))], axis=1)
    return np.sum(np.cos(packed * extra[:, None]))


CASES = {
    "concatenate-axis1": (gmm_packed, lambda rng: (rng.normal(size=(5, 10)), rng.normal(size=5))),
    "concatenate-none": (lambda a, b: np.sum(np.sin(np.concatenate([a, b], axis=None)) ** 2),
                         lambda rng: (rng.normal(size=(2, 3)), rng.normal(size=4))),
    "stack-last": (lambda a, b: np.sum(np.exp(np.stack([a, b, a], axis=-1)) * 0.5),
                   lambda rng: (rng.normal(size=(3, 2)), rng.normal(size=(3, 2)))),
    "hstack": (lambda a, b: np.sum(np.tanh(np.hstack([a, b, a]))),
               lambda rng: (rng.normal(size=3), rng.normal(size=2))),
    "vstack": (lambda a, b: np.sum(np.vstack([a, b]) ** 3),
               lambda rng: (rng.normal(size=(2, 3)), rng.normal(size=(1, 3)))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_bits_as_gathered_pieces(name, monkeypatch):
    f, make = CASES[name]
    args = make(np.random.default_rng(0))
    nums = tuple(range(len(args)))
    got = tape.grad(f, argnums=nums)(*args)
    with monkeypatch.context() as m:
        gathered(m)
        want = tape.grad(f, argnums=nums)(*args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_mode(name):
    f, make = CASES[name]
    rng = np.random.default_rng(1)
    args = make(rng)
    check_vjp(f, args, rng=rng)
    check_jvp(f, args, rng)
    check_second(f, args, rng)
    cf = tape.compile(f, *args, argnums=tuple(range(len(args))))
    new = make(np.random.default_rng(2))
    v, gs = cf.value_and_grad(*new)
    v2, gs2 = tape.value_and_grad(f, argnums=tuple(range(len(args))))(*new)
    np.testing.assert_allclose(v, v2, rtol=1e-13)
    for g, g2 in zip(gs, gs2):
        np.testing.assert_allclose(g, g2, rtol=1e-12, atol=1e-14)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 4), widths=st.lists(st.integers(0, 3), min_size=1, max_size=4),
       axis=st.sampled_from([0, 1, -1]), grads=st.lists(st.booleans(), min_size=4, max_size=4))
def test_placement_kept_per_shapes_whatever_needs_grad(rows, widths, axis, grads):
    # one kept placement per shapes serves every choice of inputs that need a gradient
    grads = grads[:len(widths)]
    if not any(grads):
        grads[0] = True
    rng = np.random.default_rng(rows * 7 + len(widths))
    xs = [rng.normal(size=(w, rows) if axis == 0 else (rows, w)) for w in widths]
    whose = np.concatenate([np.full(x.shape, i) for i, x in enumerate(xs)], axis=axis)
    ct = rng.normal(size=whose.shape)
    for _ in range(2):  # (the second call reads the kept placement)
        ts = [tape.tensor(x, requires_grad=g) for x, g in zip(xs, grads)]
        y = np.concatenate(ts, axis=axis)
        np.testing.assert_array_equal(np.asarray(y.numpy()), np.concatenate(xs, axis=axis))
        wanted = [i for i, g in enumerate(grads) if g]
        got = tape.autograd.grad(np.sum(y * ct), [ts[i] for i in wanted])
        for i, g in zip(wanted, got):
            np.testing.assert_array_equal(g, ct[whose == i].reshape(xs[i].shape))


def test_out_of_order_placement_reads_through_a_gather():
    # a placement that is not the input's own order (reversed) takes the gather
    x = tape.tensor(np.arange(5.0), requires_grad=True)
    y = _assembly.assemble(lambda xs, fill: xs[0][::-1], [x])
    ct = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    (g,) = tape.autograd.grad(np.sum(y * ct), [x])
    np.testing.assert_array_equal(np.asarray(y.numpy()), np.arange(5.0)[::-1])
    np.testing.assert_array_equal(g, ct[::-1])


def test_kept_placement_is_read_only_and_shared():
    a, b = np.ones((2, 3)), np.zeros((2, 1))
    for _ in range(2):
        tape.grad(lambda a: np.sum(np.concatenate([a, b], axis=1) ** 2))(a)
    place = _assembly._PLANS[(("concatenate", 1), ((2, 3), (2, 1)))]
    assert not place.pos[0].flags.writeable and not place.win[0].flags.writeable


def test_unhashable_axis_gives_numpys_error():
    x = tape.tensor(np.ones((2, 2)), requires_grad=True)
    with pytest.raises(TypeError) as ours:
        np.concatenate([x, x], axis=[0])
    with pytest.raises(TypeError) as numpys:
        np.concatenate([np.ones((2, 2))] * 2, axis=[0])
    assert str(ours.value) == str(numpys.value)


def test_same_sizes_other_shapes_get_their_own_placement():
    rng = np.random.default_rng(4)
    for shape in ((2, 3), (3, 2), (6, 1)):
        a, b = rng.normal(size=shape), rng.normal(size=shape)
        ct = rng.normal(size=(shape[0], 2 * shape[1]))
        ga, gb = tape.grad(lambda a, b: np.sum(np.concatenate([a, b], axis=1) * ct),
                           argnums=(0, 1))(a, b)
        np.testing.assert_array_equal(ga, ct[:, :shape[1]])
        np.testing.assert_array_equal(gb, ct[:, shape[1]:])


def test_large_placements_are_not_kept(monkeypatch):
    monkeypatch.setattr(_assembly, "_PLANS", {})
    monkeypatch.setattr(_assembly, "_kept", [0])
    monkeypatch.setattr(_assembly, "_MAX_KEPT", 100)
    a = np.ones(60)
    tape.grad(lambda a: np.sum(np.concatenate([a, a])))(a)  # 120 elements: not kept
    assert not _assembly._PLANS
    b = np.ones(30)
    tape.grad(lambda b: np.sum(np.concatenate([b, b])))(b)  # 60: kept
    tape.grad(lambda b: np.sum(np.stack([b, b])))(b)  # 60 more: the kept ones dropped first
    assert list(_assembly._PLANS) == [(("stack", 0), ((30,), (30,)))]
    assert _assembly._kept[0] == 60

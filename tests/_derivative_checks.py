"""Forward-mode checks through the public transforms (tape.jvp, tape.vjp, tape.hvp), and
second derivatives three ways (reverse over reverse, forward over reverse, differences of
gradients). Shared by the per-mode suites and the op database's tests.

Not a test module.
"""
from __future__ import annotations

import warnings

import numpy as np

import tape


def _np(f, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(f(*[np.array(a, dtype=np.float64) for a in args]), dtype=np.float64)


def check_jvp(f, args, rng, rtol=1e-6, atol=1e-7, h=1e-6, order2=False):
    """JVP of f at args with random tangents: value, finite differences, dot-product test with
    the VJP; with order2, also the Hessian-vector product of a random projection of f."""
    args = [np.array(a, dtype=np.float64) for a in args]
    us = [rng.normal(size=np.shape(a)) for a in args]
    out, ju = tape.jvp(f, tuple(args), tuple(us))
    out, ju = np.asarray(out), np.asarray(ju)
    np.testing.assert_allclose(out, _np(f, args), rtol=1e-13, atol=0)
    plus = _np(f, [a + h * u for a, u in zip(args, us)])
    minus = _np(f, [a - h * u for a, u in zip(args, us)])
    np.testing.assert_allclose(ju, (plus - minus) / (2 * h), rtol=rtol, atol=atol)
    v = rng.normal(size=out.shape)
    _, pullback = tape.vjp(f, *args)
    jtv = pullback(v)
    lhs = float(np.sum(v * ju))
    terms = [np.sum(np.asarray(g) * u) for g, u in zip(jtv, us)]
    scale = np.sum(np.abs(v * ju)) + sum(np.sum(np.abs(np.asarray(g) * u))
                                         for g, u in zip(jtv, us)) + 1e-300
    assert abs(lhs - float(sum(terms))) <= 1e-10 * scale, (lhs, terms)
    if order2:
        w = rng.normal(size=out.shape)

        def g(*xs):
            return np.sum(f(*xs) * w)

        hv = tape.hvp(g, tuple(args), tuple(us))
        gp = tape.grad(g, argnums=tuple(range(len(args))))(*[a + h * u for a, u in
                                                             zip(args, us)])
        gm = tape.grad(g, argnums=tuple(range(len(args))))(*[a - h * u for a, u in
                                                             zip(args, us)])
        for hvi, p_, m_ in zip(hv, gp, gm):
            np.testing.assert_allclose(hvi, (np.asarray(p_) - np.asarray(m_)) / (2 * h),
                                       rtol=1e-5, atol=1e-6)


def check_second(f, args, rng, h=1e-6, rtol=1e-5, atol=1e-6):
    """H u of g(x) = sum(w * f(x)) three ways: reverse over reverse (create_graph), forward over
    reverse (jvp of grad), and central differences of gradients."""
    args = [np.array(a, dtype=np.float64) for a in args]
    w = rng.normal(size=np.shape(f(*args)))
    us = [rng.normal(size=np.shape(a)) for a in args]
    nums = tuple(range(len(args)))

    def g(*xs):
        return np.sum(f(*xs) * w)

    xs = [tape.tensor(a, requires_grad=True) for a in args]
    gs = tape.autograd.grad(g(*xs), xs, create_graph=True, allow_unused=True)
    s = sum(np.sum(gi * u) for gi, u in zip(gs, us) if gi is not None)
    if isinstance(s, tape.Tensor) and s.requires_grad:
        ror = tape.autograd.grad(s, xs, allow_unused=True)
        ror = [np.zeros(a.shape) if r is None else np.asarray(r) for r, a in zip(ror, args)]
    else:
        ror = [np.zeros(a.shape) for a in args]
    _, fwd = tape.jvp(tape.grad(g, argnums=nums), tuple(args), tuple(us))
    gp = tape.grad(g, argnums=nums)(*[a + h * u for a, u in zip(args, us)])
    gm = tape.grad(g, argnums=nums)(*[a - h * u for a, u in zip(args, us)])
    for r, fo, p, m in zip(ror, fwd, gp, gm):
        np.testing.assert_allclose(r, np.asarray(fo), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(r, (np.asarray(p) - np.asarray(m)) / (2 * h), rtol=rtol,
                                   atol=atol)

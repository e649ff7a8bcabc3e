"""One check per mode for a sample of the op database (tests/_op_database.py).

``check_mode(mode, op, sample, rng)`` is what each per-mode suite runs for each sample it draws,
and what tests/test_op_database.py runs for an op it registers itself: one definition of "this
op works in this mode".

- reverse: eager value against NumPy (without recording too), VJP with a random cotangent
  against central differences (``_fd.check_vjp``);
- replay: the forward value sweep row by row against a fresh eager recording
  (``_replay.check_rows``, ops the sweep computes), and ``tape.compile`` of sum(w * f): value
  and gradient at new inputs against eager there (every op, escapes included);
- tangent: the tangent sweep against differences, by the dot-product test against the reverse
  sweep, k directions against single ones (``_tangent_sweep.check_tangent``);
- forward: tape.jvp against differences and tape.vjp, the Hessian-vector product on small
  samples (``_derivative_checks.check_jvp``);
- higher: H u three ways (``_derivative_checks.check_second``), on a nonlinear composition for an
  op linear in its operands.

Not a test module.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tape
from jit.table import OPCODE

from _derivative_checks import check_jvp, check_second
from _fd import check_vjp
from _op_database import REPLAY_VALUES, SEEDS, ids
from _replay import SCALAR_PATH_ULPS, Replay, check_rows
from _tangent_sweep import check_tangent

# The suites' hypothesis settings (each sets its number of examples)
SUITE = settings(deadline=None, derandomize=False,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def over_ops(ops, max_examples):
    """Run ``test(op, sample, rng)`` for every op in `ops`, on samples hypothesis draws from the
    op's own strategy (``OpInfo.samples``), each with its own random generator: `max_examples`
    of them, scaled by the op's ``examples`` (a costly op draws fewer)."""
    def wrap(test):
        @pytest.mark.parametrize("op", ops, ids=ids(ops))
        def run(op):
            @settings(SUITE, max_examples=max(2, round(max_examples * op.examples)))
            @given(data=st.data(), seed=SEEDS)
            def draw(data, seed):
                test(op, data.draw(op.samples(op), label="sample"), np.random.default_rng(seed))

            draw()

        run.__name__, run.__qualname__, run.__doc__ = test.__name__, test.__qualname__, \
            test.__doc__
        return run

    return wrap


def _value(y):
    return np.asarray(y.numpy() if isinstance(y, tape.Tensor) else y, dtype=np.float64)


def check_reverse(op, s, rng):
    args = s.draw(rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        # the value without recording: NumPy's (operands outside wrt stay NumPy constants)
        plain = s.fn(*[tape.tensor(a) if i in s.wrt else a for i, a in enumerate(args)])
        np.testing.assert_allclose(_value(plain), s.reference(*args), rtol=1e-14, atol=0)
    check_vjp(s.fn, args, wrt=s.wrt, rng=rng, f_np=s.reference, rtol=op.rtol, atol=op.atol)


def check_sweep(op, s, rng):
    """The forward value sweep over a recording of the sample, at new inputs."""
    if op.family == "escape":  # the sweep leaves escape rows to the driver (check_compiled)
        return
    rec = Replay.of(s.fn, s.draw(rng), s.wrt)
    if rec is None:  # nothing to replay: only where the op records no row
        assert not s.row, s
        return
    if s.scalar_path:  # 0-d values are Python floats: no side row, the inline path
        assert rec.A.R[rec.y._slot, 3] < 0
    new = s.draw(rng)
    if op.name in REPLAY_VALUES:
        new = [REPLAY_VALUES[op.name](rng, a.shape) for a in new]
    # the eager 0-d path runs the same formula: bit for bit under the JIT (NumPy's scalar
    # functions stand in for libm without it)
    check_rows(rec, new, ulp=SCALAR_PATH_ULPS if s.scalar_path else None)


def check_compiled(op, s, rng):
    """tape.compile of sum(w * f): value and gradient at new inputs equal eager's there."""
    f, args = s.on(s.draw(rng))
    w = rng.standard_normal(np.shape(s.reference(*s.draw(rng))))

    def loss(*xs):
        return np.sum(f(*xs) * w)

    nums = tuple(range(len(args)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        cf = tape.compile(loss, *args, argnums=nums)
        new = s.on(s.draw(rng))[1]
        value, grads = cf.value_and_grad(*new)
        want_value, want_grads = tape.value_and_grad(loss, argnums=nums)(*new)
    np.testing.assert_allclose(value, want_value, rtol=1e-12, atol=1e-13)
    for g, e in zip(grads, want_grads):
        scale = max(1.0, float(np.max(np.abs(e), initial=0.0)))
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-13 * scale)


def check_tangent_sweep(op, s, rng):
    # operands outside wrt are NumPy constants: only the active operand terms are computed
    rec, _ = check_tangent(s.fn, s.draw(rng), s.wrt, rng, f_np=s.reference,
                           code=OPCODE[op.name] if s.row else None, rtol=op.rtol, atol=op.atol)
    if s.scalar_path:  # 0-d values are Python floats: no side row, the inline path
        assert rec.A.R[rec.y._slot, 3] < 0


def check_forward(op, s, rng):
    f, args = s.on(s.draw(rng))
    check_jvp(f, args, rng, rtol=op.rtol, atol=op.atol,
              order2=max([a.size for a in args]) <= 9)


def nonlinear(op, f):
    """f made nonlinear where op is linear in its operands (its Hessian would be zero)."""
    if op.nonlinear == "square":
        return lambda *xs: f(*[x * x for x in xs])
    if op.nonlinear == "tanh":
        return lambda *xs: np.tanh(f(*xs))
    return f


def check_higher(op, s, rng):
    f, args = s.on(s.draw(rng))
    check_second(nonlinear(op, f), args, rng, rtol=op.rtol2, atol=op.atol2)


CHECKS = {"reverse": (check_reverse,), "replay": (check_sweep, check_compiled),
          "tangent": (check_tangent_sweep,), "forward": (check_forward,),
          "higher": (check_higher,)}


def check_mode(mode, op, s, rng):
    for check in CHECKS[mode]:
        check(op, s, rng)


# ---------------------------------------------------------------------------------------------
# Near-non-differentiable points (OpInfo.kinks): the conventions every mode follows


def kinked(ops):
    """Parametrize a test over the ops in `ops` that declare near-non-differentiable points."""
    ks = [op for op in ops if op.kinks]
    return pytest.mark.parametrize("op", ks, ids=ids(ks))


def grads(f, *vals):
    """Gradient of sum(f(...)) w.r.t. every argument, as NumPy arrays (0-d values enter as
    Python floats, so a 0-d row takes the inline path)."""
    xs = [tape.tensor(float(v) if np.ndim(v) == 0 else np.asarray(v, dtype=np.float64),
                      requires_grad=True) for v in vals]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = f(*xs)
        out = np.sum(out) if out.ndim else out
        return [np.asarray(g) for g in tape.autograd.grad(out, xs)]


def check_reverse_kinks(op):
    """The hand-derived gradients, exactly."""
    for k in op.kinks:
        for g, want in zip(grads(k.fn, *k.args), k.grads):
            np.testing.assert_allclose(g, want, rtol=1e-15, atol=0, err_msg=f"{op}: {k.note}")


def check_tangent_kinks(op):
    """The tangent sweep is the transpose of the reverse rule there: the dot-product test
    holds exactly (no finite differences)."""
    rng = np.random.default_rng(0)
    for k in op.kinks:
        check_tangent(k.fn, [np.asarray(a, dtype=np.float64) for a in k.args],
                      tuple(range(len(k.args))), rng, fd=False)


def check_forward_kinks(op):
    """tape.jvp and tape.vjp agree there: the dot-product test."""
    rng = np.random.default_rng(0)
    for k in op.kinks:
        args = [np.asarray(a, dtype=np.float64) for a in k.args]
        us = [rng.normal(size=np.shape(a)) for a in args]
        with np.errstate(all="ignore"):
            _, ju = tape.jvp(k.fn, tuple(args), tuple(us))
            v = rng.normal(size=np.shape(ju))
            _, pullback = tape.vjp(k.fn, *args)
            lhs = np.sum(v * ju)
            rhs = sum(np.sum(g * u) for g, u in zip(pullback(v), us))
        np.testing.assert_allclose(lhs, rhs, rtol=1e-12, atol=1e-14, err_msg=f"{op}: {k.note}")

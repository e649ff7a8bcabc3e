"""The five reference workloads (asv_bench/benchmarks/workloads.py) against WORKLOADS.md's values.

Value, per-input |grad| and per-input sum(grad) through ``tape.value_and_grad``; the NumPy primal
gives the same value; the hand-written gradients (references.py) agree with tapejit's.
"""
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "asv_bench", "benchmarks"))

import tape  # noqa: E402
from references import REFERENCES  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

RTOL = 1e-9
SUM_ATOL = 1e-11  # per-input sums that are ~0 (1e-13 .. 1e-16 in WORKLOADS.md) are roundoff

NAMES = list(WORKLOADS)


@pytest.fixture(scope="module")
def results():
    """(inputs, value, grads) of each workload, computed once."""
    out = {}
    for name, w in WORKLOADS.items():
        args = w.inputs()
        value, grads = tape.value_and_grad(w.loss, argnums=w.argnums)(*args)
        out[name] = args, value, grads
    return out


@pytest.mark.parametrize("name", NAMES)
def test_value(name, results):
    w = WORKLOADS[name]
    _, value, _ = results[name]
    assert isinstance(value, float)
    assert value == pytest.approx(w.value, rel=RTOL)


@pytest.mark.parametrize("name", NAMES)
def test_primal_matches_taped_value(name, results):
    w = WORKLOADS[name]
    args, value, _ = results[name]
    primal = w.loss(*args)
    assert type(primal) is not tape.Tensor
    assert float(primal) == pytest.approx(value, rel=1e-13)


@pytest.mark.parametrize("name", NAMES)
def test_grad_norms_and_sums(name, results):
    w = WORKLOADS[name]
    args, _, grads = results[name]
    assert len(grads) == len(w.argnums)
    for i, g, norm, total in zip(w.argnums, grads, w.grad_norms, w.grad_sums):
        assert isinstance(g, np.ndarray) and g.dtype == np.float64
        assert g.shape == np.shape(args[i])
        assert np.all(np.isfinite(g))
        assert float(np.linalg.norm(g)) == pytest.approx(norm, rel=RTOL)
        # sums near zero are cancellation noise: compare them on the scale of the gradient
        atol = SUM_ATOL * max(1.0, norm * math.sqrt(g.size))
        assert float(np.sum(g)) == pytest.approx(total, rel=RTOL, abs=atol)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_hand_written_reference_agrees(name, results):
    w = WORKLOADS[name]
    args, value, grads = results[name]
    ref_value, ref_grads = REFERENCES[name](*args)
    assert ref_value == pytest.approx(value, rel=1e-12)
    assert len(ref_grads) == len(grads)
    for g, r in zip(grads, ref_grads):
        scale = max(float(np.max(np.abs(g))), 1e-300)
        np.testing.assert_allclose(r, g, rtol=1e-9, atol=1e-12 * scale)


def test_workload_inputs_are_deterministic():
    for w in WORKLOADS.values():
        a, b = w.inputs(), w.inputs()
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_primal_runs_without_tape_tensors():
    """The losses are plain NumPy: on NumPy inputs they return NumPy/Python scalars."""
    for w in WORKLOADS.values():
        v = w.loss(*w.inputs())
        assert np.ndim(v) == 0 and np.isfinite(v)

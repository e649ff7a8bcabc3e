"""check_constants: values a replay would freeze (random draws, globals) are found by line."""
import inspect

import numpy as np
import pytest

import tape
import tape.numpy as tnp


def _line(fn, text):
    lines, first = inspect.getsourcelines(fn)
    k = next(i for i, s in enumerate(lines) if text in s)
    return f"{inspect.getsourcefile(fn)}:{first + k}"


def test_a_random_draw_inside_f_is_reported_with_its_line():
    rng = np.random.default_rng(0)

    def noisy(w):
        eps = rng.normal(size=2)
        return np.sum((w - eps) ** 2)  # enters

    cf = tape.compile(noisy, np.ones(2))  # (off by default: frozen, as documented)
    assert cf(np.ones(2)) == cf(np.ones(2))
    with pytest.raises(RuntimeError, match="random draw") as e:
        tape.compile(noisy, np.ones(2), check_constants=True)
    assert _line(noisy, "# enters") in str(e.value)


def test_a_scalar_global_that_changes_is_reported():
    state = {"k": 0.0}

    def f(w):
        state["k"] += 1.0
        return tnp.sum(w * state["k"])  # scaled

    with pytest.raises(RuntimeError, match="constants made at") as e:
        tape.compile(f, np.ones(2), check_constants=True)
    assert _line(f, "# scaled") in str(e.value)


def test_control_flow_on_a_draw_is_reported_as_differing_operations():
    draws = iter([0.2, 0.9])

    def f(w):
        return tnp.sum(tnp.sin(w)) if next(draws) < 0.5 else tnp.sum(w * w)

    with pytest.raises(RuntimeError, match="recorded operations"):
        tape.compile(f, np.ones(2), check_constants=True)


def test_a_deterministic_f_passes_and_replays_as_without_the_check():
    c = np.array([1.0, -2.0])

    def f(w, eps):
        return tnp.sum((w - eps) ** 2 * c) + 3.0 * tnp.sum(tnp.exp(w))

    x, eps = np.array([0.5, 0.25]), np.array([0.1, 0.2])
    checked = tape.compile(f, x, eps, check_constants=True)
    plain = tape.compile(f, x, eps)
    np.testing.assert_array_equal(checked.value_and_grad(x, eps)[1],
                                  plain.value_and_grad(x, eps)[1])

"""Hooks in compiled replay: each kind is run as eager runs it, or refused at recording."""
import numpy as np
import pytest

import tape
import tape.numpy as tnp


def _line(fn, text):
    """ "file:line" of the line of fn's source holding `text` (the refusal names it)."""
    import inspect

    lines, first = inspect.getsourcelines(fn)
    k = next(i for i, s in enumerate(lines) if text in s)
    return f"{inspect.getsourcefile(fn)}:{first + k}"


def test_saved_tensors_hooks_inside_f_is_refused_with_its_line():
    def f(x):
        with tape.graph.saved_tensors_hooks(lambda a: a, lambda a: a):
            y = tnp.sin(x * 2.0)  # packed
        return tnp.sum(y * y)

    with pytest.raises(NotImplementedError, match="saved_tensors_hooks") as e:
        tape.compile(f, np.ones(3))
    assert _line(f, "# packed") in str(e.value)


def test_saved_tensors_hooks_around_a_replay_is_refused():
    cf = tape.compile(lambda x: tnp.sum(tnp.sin(x) * x), np.ones(3))
    cf.value_and_grad(np.ones(3))
    with tape.graph.saved_tensors_hooks(lambda a: a, lambda a: a):
        for call in (cf.value_and_grad, cf, cf.grad):
            with pytest.raises(NotImplementedError, match="saved_tensors_hooks"):
                call(np.ones(3))


def test_a_hook_replay_would_not_run_is_refused_with_its_kind_and_line():
    def f(x):
        y = x * 2.0
        y.register_hook(lambda g: g * 0.5)  # hooked
        return tnp.sum(tnp.sin(y))

    with pytest.raises(NotImplementedError, match="register_hook") as e:
        tape.compile(f, np.ones(3))
    assert _line(f, "# hooked") in str(e.value)

"""tapejit's entry points type an exact NumPy array as Numba does, without importing numpy.ma
(jit/_array_typeof.py): the same Numba type for every dtype, dimension count, layout and
read-only flag, Numba's own typing (and errors) for anything else."""
from __future__ import annotations

import os

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1",
                                reason="no dispatchers without the JIT")


def _arrays():
    for dtype in (np.float64, np.float32, np.int64, np.int32, np.uint8, np.bool_,
                  np.complex128, np.dtype("<U3"), np.dtype("M8[s]")):
        base = np.zeros((4, 6, 2), dtype)
        for a in (base, base[0], base[0, :, 0], base[0, 0, 0:1], np.zeros((), dtype),
                  np.zeros(0, dtype), np.zeros((0, 3), dtype), base[:, ::2], base[::-1],
                  np.asfortranarray(base[:, :, 0]), base.transpose(2, 0, 1), base[:, 1:, :]):
            yield a
            frozen = a.view()
            frozen.flags.writeable = False
            yield frozen


def _dispatcher():
    import numba

    from jit._array_typeof import install

    @numba.njit
    def f(x):
        return 0

    install(f)
    return f


def test_same_type_as_numba_for_every_array():
    from numba.core.typing.typeof import Purpose, typeof

    f = _dispatcher()
    seen = 0
    for a in _arrays():
        assert f.typeof_pyval(a) == typeof(a, Purpose.argument), (a.dtype, a.shape, a.strides)
        seen += 1
    assert seen > 200


def test_anything_else_is_numbas_typing():
    from numba.core import types
    from numba.core.typing.typeof import Purpose, typeof

    f = _dispatcher()

    class Sub(np.ndarray):
        pass

    for value in (np.zeros(3).view(Sub), np.ma.masked_array([1.0, 2.0]), 3, 2.5, (1, 2.0),
                  np.zeros(3, object)):
        try:
            expected = typeof(value, Purpose.argument)
        except Exception as e:  # (Numba refuses masked arrays: so does the dispatcher)
            with pytest.raises(type(e)):
                f.typeof_pyval(value)
        else:
            assert f.typeof_pyval(value) == (expected if expected is not None
                                             else types.pyobject)


def test_calls_run_the_compiled_code():
    f = _dispatcher()

    @__import__("numba").njit
    def total(x):
        return x.sum()

    from jit._array_typeof import install

    install(total)
    assert f(np.arange(3.0)) == 0
    assert total(np.arange(4.0).reshape(2, 2)[:, 1]) == 4.0  # (a strided view: layout "A")
    assert total(np.arange(3, dtype=np.int32)) == 3


def test_installed_once_on_the_entry_points():
    import jit
    from jit import _interp

    jit.need_pass  # (loaded by jit._cache.load, which installs it)
    method = _interp.need_pass.__dict__["typeof_pyval"]
    from jit._array_typeof import install

    install(_interp.need_pass)
    assert _interp.need_pass.__dict__["typeof_pyval"] is method

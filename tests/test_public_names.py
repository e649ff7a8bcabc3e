"""``tape``'s public names: those a gradient does not need load on first use (tape/__init__.py's
``_ON_FIRST_USE``), and behave as if ``import tape`` had imported them: the same objects, in
``dir(tape)`` and ``from tape import *``, the same AttributeError for a name that is not there,
and nothing registered by their import that a program not using them would miss."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tape

ROOT = Path(__file__).resolve().parents[1]


def test_every_public_name_resolves_to_its_definition():
    for name, (module, attribute) in tape._ON_FIRST_USE.items():
        defined = importlib.import_module(module)
        assert getattr(tape, name) is (defined if attribute is None else getattr(defined, attribute))
    assert set(tape.__all__) <= set(dir(tape))
    assert set(tape._ON_FIRST_USE) <= set(dir(tape))
    namespace = {}
    exec("from tape import *", namespace)
    assert set(tape.__all__) <= namespace.keys()
    assert namespace["compile"] is tape.compile and namespace["jacfwd"] is tape.jacfwd


def test_a_name_that_is_not_there():
    with pytest.raises(AttributeError, match="^module 'tape' has no attribute 'nothing_here'$"):
        tape.nothing_here
    assert not hasattr(tape, "nothing_here")
    with pytest.raises(ImportError, match="cannot import name 'nothing_here' from 'tape'"):
        from tape import nothing_here  # noqa: F401


_FIRST_GRADIENT = """
import sys
import numpy as np
import tape
from tape.core.tensor import Tensor
from tape.escapes import ESCAPES
from tape.numpy_ops import _dispatch

g = tape.grad(lambda x: (np.sin(x) * x).sum())(np.linspace(0.0, 1.0, 5))
print(repr(float(g.sum())))
lazy = {m for m, _ in tape._ON_FIRST_USE.values()}
print(sorted(m for m in lazy if m in sys.modules) or "-")
before = (sorted(vars(Tensor)), len(_dispatch.FUNCS), len(_dispatch.EXPORTS),
          len(_dispatch.UFUNC_FUNCS), len(_dispatch.SPECIAL_UFUNCS), len(ESCAPES))
for name in tape._ON_FIRST_USE:
    getattr(tape, name)
after = (sorted(vars(Tensor)), len(_dispatch.FUNCS), len(_dispatch.EXPORTS),
         len(_dispatch.UFUNC_FUNCS), len(_dispatch.SPECIAL_UFUNCS), len(ESCAPES))
print(before == after)
"""


def test_a_gradient_loads_none_of_them_and_loading_them_registers_nothing(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", _FIRST_GRADIENT], env=env, capture_output=True,
                       text=True, timeout=900, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    total, loaded, unchanged = r.stdout.split("\n")[:3]
    x = np.linspace(0.0, 1.0, 5)
    assert float(total) == pytest.approx(float((np.cos(x) * x + np.sin(x)).sum()), rel=1e-12)
    assert loaded == "-"
    assert unchanged == "True"

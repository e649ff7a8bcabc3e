"""The generated interpreter matches the table, and each entry point has one signature."""
import subprocess
import sys

import numpy as np
import pytest

import jit
import tape
from jit import _generate


def test_generated_module_is_fresh():
    with open(_generate.OUT) as fh:
        assert fh.read() == _generate.render(), "jit/_interp.py is stale: python -m jit._generate"


def test_generated_module_records_table_hash():
    from jit import _interp

    assert _interp.TABLE_HASH == jit.table_hash()


def test_each_entry_point_has_exactly_one_signature(tmp_path):
    from numba.core.config import DISABLE_JIT
    from numba.core.sigutils import normalize_signature

    if DISABLE_JIT:
        pytest.skip("NUMBA_DISABLE_JIT=1: no signatures")
    from jit import _interp

    # exercise every entry point through the public API (scalar rows, array rows, escapes)
    x = tape.tensor(np.arange(1.0, 7.0).reshape(2, 3), requires_grad=True)
    s = tape.tensor(2.0, requires_grad=True)
    loss = (np.exp(x[:, 1:]) * s).sum() + (x @ x.T).sum() + (s * s) + np.linalg.det(x @ x.T)
    loss.backward()
    tape.grad(lambda v: np.sum(np.sin(v)))(np.ones(3))  # the lean backward: whole_outputs
    # the eager values' entries: unary above; another binary (arctan2, and the eager tier);
    # a + - * / broadcast by strides (a result of 2^15: the strided loop)
    tape.grad(lambda v: np.sum(np.arctan2(v, 2.0)))(np.ones(3))
    b = np.linspace(0.0, 1.0, 256).reshape(1, 16, 16)
    tape.grad(lambda a: np.sum(a - b))(np.ones((128, 1, 16)))
    tape.compile(lambda x: np.sum(np.exp(x)), np.ones(3)).grad(np.ones(3))  # local_pass
    m = np.ones((40, 40))  # run_pass: the forward of a tape with an escape (replay)
    tape.compile(lambda m: np.sum(np.exp(m @ m)), m)(m)
    # reverse_run_pass: the reverse of a tape with an escape, split among threads
    tape.compile(lambda m: np.sum(np.exp(m @ m)), m, threads=2).grad(m)
    # unread_values: a backward that leaves rows of its tape unswept
    y = np.sin(tape.tensor(np.ones(3), requires_grad=True))
    first, other = np.sum(y * 2.0), np.sum(y * 3.0)  # noqa: F841 (other's rows stay unswept)
    first.backward()
    # data_pointers: a loaded recording's value addresses
    cf = tape.compile(lambda x: np.sum(np.sin(x)), np.ones(3))
    cf.grad(np.ones(3))
    path = tmp_path / "sin.npz"
    cf.save(path)
    tape.load(path).grad(np.ones(3))
    for name in jit.ENTRY_POINTS:
        fn = getattr(_interp, name)
        expected = getattr(_interp, "SIG_" + name.upper())
        assert len(fn.signatures) == 1, (name, fn.signatures)
        args, _ = normalize_signature(expected)
        fn.compile(tuple(args))  # the declared signature is the one already compiled: no new one
        assert len(fn.signatures) == 1, (name, fn.signatures)
    from jit import _plan

    for name in jit.PLANS:  # every eager backward's
        fn = getattr(_plan, name)
        assert len(fn.signatures) == 1, (name, fn.signatures)
        args, _ = normalize_signature(getattr(_plan, "SIG_" + name.upper()))
        fn.compile(tuple(args))
        assert len(fn.signatures) == 1, (name, fn.signatures)


def test_jit_does_not_import_tape():
    code = "import sys, jit, jit.table, jit._generate; assert 'tape' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_special_sweep_is_fresh():
    from jit import _generate_special

    with open(_generate_special.OUT) as fh:
        assert fh.read() == _generate_special.render(), \
            "jit/_special_sweep.py is stale: python -m jit._generate_special"


def test_special_sweep_records_table_hash():
    from jit import _special_sweep

    assert _special_sweep.TABLE_HASH == jit.table_hash()


def test_main_sweeps_do_not_hold_the_special_rows():
    """The scipy.special rows are escapes of the main interpreters: their kernels are only in
    jit/_special_sweep.py, so a first compile without them does not pay for them."""
    from jit import _generate_tangent
    from jit.table import SPECIAL_ROWS, TABLE

    main = _generate.render() + _generate_tangent.render()
    assert all(TABLE[c].family == "escape" for c in SPECIAL_ROWS)
    for name in ("_digamma", "_erfcx", "_bessel_i", "_log_ndtr", "_betaln"):
        assert f"def {name}(" not in main, name


def test_a_gradient_without_special_rows_never_loads_their_kernels():
    code = ("import sys, numpy as np, tape\n"
            "x = tape.tensor(np.linspace(0.1, 1.0, 5), requires_grad=True)\n"
            "tape.grad(lambda x: np.sum(np.exp(x) * np.tanh(x)))(x)\n"
            "tape.compile(lambda x: np.sum(np.log(x)), np.ones(3)).grad(np.ones(3))\n"
            "assert 'jit._special_sweep' not in sys.modules\n"
            "import scipy.special as sc\n"
            "tape.grad(lambda x: np.sum(sc.gammaln(x)))(x)\n"
            "assert 'jit._special_sweep' in sys.modules\n")
    pytest.importorskip("scipy.special")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_special_entry_points_have_exactly_one_signature():
    from numba.core.config import DISABLE_JIT
    from numba.core.sigutils import normalize_signature

    if DISABLE_JIT:
        pytest.skip("NUMBA_DISABLE_JIT=1: no signatures")
    sc = pytest.importorskip("scipy.special")
    from jit import _special_sweep

    x = tape.tensor(np.array([0.5, 1.5]), requires_grad=True)
    tape.grad(lambda x: np.sum(sc.xlogy(x, 2.0 * x) + sc.gammaln(x)))(x)
    for name in jit.SPECIAL:
        fn = getattr(_special_sweep, name)
        assert len(fn.signatures) == 1, (name, fn.signatures)
        args, _ = normalize_signature(getattr(_special_sweep, "SIG_" + name.upper()))
        fn.compile(tuple(args))
        assert len(fn.signatures) == 1, (name, fn.signatures)

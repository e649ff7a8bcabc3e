"""A warm process start (jit/_cache_load.py): a new process whose kernels are in the cache loads
them without installing Numba's typing and lowering registries (only a compile reads them) and
without importing ``numba.np.arraymath`` (its import runs Numba's BLAS check, which imports
``scipy.linalg``, ~0.3 s), ``numba.np.arrayobj`` (its kernels allocate nothing) or ``numpy.ma``
(jit/_array_typeof.py); a cached object is linked only once every symbol it uses is in the
process, else after Numba's registries load, with the BLAS check deferred to the first compile
(jit/_blas_check.py); and a later compile finds Numba as it would have been (registries, the real
BLAS answer)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_LORENZ = """
import sys
import numpy as np, tape

def lorenz(p):
    sigma, rho, beta = p[0], p[1], p[2]
    x = y = z = 1.0
    for _ in range(1000):
        dx = sigma * (y - x)
        dy = x * (rho - z) - y
        dz = x * y - beta * z
        x = x + 0.001 * dx
        y = y + 0.001 * dy
        z = z + 0.001 * dz
    return x * x + y * y + z * z

g = tape.grad(lorenz)(np.array([10.0, 28.0, 8.0 / 3.0]))
print(repr(float(np.linalg.norm(g))), repr(float(g.sum())))
print("scipy.linalg" in sys.modules, "numba.np.npyimpl" in sys.modules)  # (registries: npyimpl)
print("numba.np.arraymath" in sys.modules)
print("numba.np.arrayobj" in sys.modules, "numpy.ma" in sys.modules)
"""

_REFRESHED = """
from jit import _cache_load
_cache_load._all_here = lambda names, engine: False  # as if a symbol were missing: a refresh
"""

_COMPILE_AFTER_LOAD = """
import sys
import numba, numpy as np
import jit
jit.need_pass  # a load (or compile) of one of tapejit's kernels first
from numba.np import arraymath

@numba.njit
def convolved(a, b):  # an inner product Numba types by its BLAS check
    return np.convolve(a, b).sum()

print(convolved(np.arange(3.0), np.ones(3)))
print(arraymath._HAVE_BLAS, "scipy.linalg" in sys.modules)
"""


def _run(code, where, env=None):
    script = where / "script.py"
    script.write_text(code)
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, str(script)], env=full, capture_output=True,
                          text=True, timeout=900, cwd=where)


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="nothing is compiled")
def test_a_warm_w1_gradient_does_not_import_scipy(tmp_path):
    first = _run(_LORENZ, tmp_path)  # fills the cache if it is not warm yet
    assert first.returncode == 0, first.stderr
    r = _run(_LORENZ, tmp_path)
    assert r.returncode == 0, r.stderr
    norm, total, scipy_imported, registries, arraymath, arrayobj, masked = r.stdout.split()
    assert float(norm) == pytest.approx(3.353406921145e+02, rel=1e-10)  # docs' W1 values
    assert float(total) == pytest.approx(3.523801831415e+02, rel=1e-10)
    assert scipy_imported == "False"
    assert registries == "False"
    assert arraymath == "False"  # (nor its BLAS check, deferred or not)
    # the kernels of a first gradient allocate nothing (an allocating kernel's cached code names
    # Numba's allocation module, which its load imports: ~30 ms), and their array arguments are
    # typed without numpy.ma (jit/_array_typeof.py: ~25 ms)
    assert (arrayobj, masked) == ("False", "False")
    assert r.stderr == ""  # and silently: a load, no compile


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="nothing is compiled")
@pytest.mark.parametrize("load", ["linked", "after a refresh"])
def test_a_later_compile_runs_numbas_real_blas_check(tmp_path, load):
    """Whether the load imported ``numba.np.arraymath`` (a refresh, its check deferred) or not."""
    pytest.importorskip("scipy")
    r = _run((_REFRESHED if load == "after a refresh" else "") + _COMPILE_AFTER_LOAD, tmp_path)
    assert r.returncode == 0, r.stderr
    value, line = r.stdout.split("\n")[:2]
    assert float(value) == 9.0
    assert line == "True True"  # BLAS found, by importing scipy.linalg as Numba does


_NO_SCIPY = """
import sys
class _Hide:  # SciPy absent, as on an install without it
    def find_spec(self, name, path=None, target=None):
        if name == "scipy" or name.startswith("scipy."):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, _Hide())
"""


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="nothing is compiled")
def test_without_scipy_numba_finds_no_blas(tmp_path):
    r = _run(_NO_SCIPY + _COMPILE_AFTER_LOAD, tmp_path)
    assert r.returncode == 0, r.stderr
    value, line = r.stdout.split("\n")[:2]
    assert float(value) == 9.0  # Numba's own loop
    assert line == "False False"


_EVERY_ENTRY = """
import importlib, sys
import jit
from jit import _cache, _cache_load
from numba.core.registry import cpu_target
refreshes = []
real = cpu_target.target_context.refresh
cpu_target.target_context.refresh = lambda: refreshes.append(1) or real()
loaded = 0
for module, name in jit.WARMUP:
    fn, args = _cache.entry(importlib.import_module(module), name)
    loaded += _cache_load.load_cached(fn, args)  # (False: not cached; nothing compiled)
from numba.core.runtime.nrt import rtsys
print(loaded, len(refreshes), "numba.np.npyimpl" in sys.modules, rtsys._init)
print("numba.np.arraymath" in sys.modules, "scipy.linalg" in sys.modules)
"""


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="nothing is compiled")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF object files")
def test_every_cached_entry_links_without_numbas_registries(tmp_path):
    """What tapejit's kernels call is in the process once Numba's contexts are made and NRT's C
    functions registered: no entry of the warm-up needs the registries' refresh to load (a kernel
    that starts calling a symbol registered by a registry would load after a refresh, and fail
    this test)."""
    r = _run(_EVERY_ENTRY, tmp_path)
    assert r.returncode == 0, r.stderr
    loaded, refreshes, registries, nrt_compiled, arraymath, scipy_linalg = r.stdout.split()
    assert int(loaded) >= 1  # (the W1 test above fills the cache of its entries)
    assert (refreshes, registries) == ("0", "False")
    assert nrt_compiled == "False"  # (NRT's LLVM functions: inlined in each entry's code)
    # no entry's environments name numba.np.arraymath (a kernel calling np.max or an array's
    # .sum() would: then every load of it imports SciPy's BLAS, ~0.3 s, unless jit/_blas_check.py
    # defers the check on the fast path too)
    assert (arraymath, scipy_linalg) == ("False", "False")


_UNLINKABLE = """
import sys
import numpy as np, tape
from jit import _cache_load
_cache_load._all_here = lambda names, engine: False  # as if a symbol were missing
""" + _LORENZ.split("import numpy as np, tape", 1)[1]


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="nothing is compiled")
def test_an_entry_needing_a_missing_symbol_loads_after_the_registries(tmp_path):
    first = _run(_LORENZ, tmp_path)
    assert first.returncode == 0, first.stderr
    r = _run(_UNLINKABLE, tmp_path)
    assert r.returncode == 0, r.stderr
    norm, total, scipy_imported, registries, arraymath = r.stdout.split()[:5]
    assert float(norm) == pytest.approx(3.353406921145e+02, rel=1e-10)
    assert registries == "True"  # Numba's refresh ran before the load
    assert (arraymath, scipy_imported) == ("True", "False")  # its BLAS check deferred
    assert r.stderr == ""  # still a load


def _object_file(ir):
    llvm = pytest.importorskip("llvmlite.binding")
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine()
    return machine.emit_object(llvm.parse_assembly(ir))


_IR = """
@counter = global i64 0
declare double @tapejit_test_absent(double)
declare double @exp(double)
define internal double @helper(double %x) {
  %y = call double @exp(double %x)
  ret double %y
}
define double @f(double %x) {
  %y = call double @tapejit_test_absent(double %x)
  %z = call double @helper(double %y)
  ret double %z
}
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF object files")
def test_the_symbols_of_an_object_file():
    from numba.core.registry import cpu_target

    from jit._cache_load import _all_here, _object_symbols
    from jit._elf import symbols

    cpu_target.target_context  # (its execution engine makes the process's symbols visible)
    obj = _object_file(_IR)
    defined, undefined = symbols(obj)
    assert undefined == {"tapejit_test_absent", "exp"}
    assert defined == {"f", "helper", "counter"}

    class Engine:  # the symbols defined by code already loaded: none
        def is_symbol_defined(self, name):
            return False

    assert not _all_here(undefined, Engine())  # tapejit_test_absent is nowhere
    assert _all_here({"exp"}, Engine())  # libm's, in the process
    assert _object_symbols((("lib", "object", (obj, b"")), None)) == (defined, undefined)
    assert symbols(b"\xcf\xfa\xed\xfe" + bytes(60)) is None  # Mach-O: not known
    for broken in (obj[:70], obj[:len(obj) // 2], b""):  # truncated: not known, no exception
        assert symbols(broken) is None
    assert _object_symbols((("lib", "bitcode", b""),)) is None
    assert _object_symbols(((),)) is None


_LINKED_INTO_A_COMPILE = """
import numba, numpy as np
import jit
from tape.core.arrays import _FIELD  # (where an array object holds its data pointer)

data_pointers = jit.data_pointers  # loaded from the cache, its bitcode not parsed
library = data_pointers.overloads[next(iter(data_pointers.overloads))].library
print(sum(1 for f in library._shared_module.functions if not f.is_declaration))

@numba.njit
def first_pointer(ids, field, out):  # links data_pointers' library into its own
    data_pointers(ids, field, out)
    return out[0]

x = np.arange(3.0)
print(first_pointer(np.array([id(x)]), _FIELD, np.zeros(1, np.int64)) == x.ctypes.data)
print(sum(1 for f in library._shared_module.functions if not f.is_declaration) > 0)
"""


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="nothing is compiled")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF object files")
def test_a_compile_calling_a_loaded_entry_links_its_real_bitcode(tmp_path):
    """The bitcode a load skipped is parsed before a later compile links the library: the
    caller's code then holds the callee's (as Numba's own load would give it), rather than a call
    to a symbol only this process defines."""
    r = _run(_LINKED_INTO_A_COMPILE, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "True", "True"]


_NUMBAS_OWN_LOAD = """
import sys
from jit import _cache_load
_cache_load.load_cached = lambda fn, args: False  # a Numba without the internals it uses
import jit
jit.need_pass  # Numba's own compile: it refreshes, then finds the entry in its cache
print("numba.np.arraymath" in sys.modules, "scipy.linalg" in sys.modules)
"""


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="nothing is compiled")
def test_numbas_own_load_defers_the_blas_check_too(tmp_path):
    first = _run(_LORENZ, tmp_path)  # (need_pass in the cache)
    assert first.returncode == 0, first.stderr
    r = _run(_NUMBAS_OWN_LOAD, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False"]


_NO_PASS_EVENTS = """
import sys
from jit import _blas_check
from numba.np import linalg

refused = []

def refuse(kind, listener):
    refused.append(kind)
    raise ValueError(kind)

_blas_check.event.register = refuse  # a Numba without pass events: nothing to defer the check to
_blas_check.defer()
from numba.np import arraymath
print(refused, arraymath.ensure_blas is linalg.ensure_blas, arraymath._HAVE_BLAS,
      "scipy.linalg" in sys.modules)
"""


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="nothing is compiled")
def test_with_no_event_to_wait_for_the_real_check_runs_at_once(tmp_path):
    pytest.importorskip("scipy")
    r = _run(_NO_PASS_EVENTS, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["['numba:run_pass']", "True", "True", "True"]

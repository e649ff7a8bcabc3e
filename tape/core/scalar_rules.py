"""Scalar forward functions for 0-d values (Python floats), built from the same formulas as the
kernels (Python's math calls the libm that the kernels call); NumPy takes over where Python raises
(x/0, overflow, domain), whose results are special values (inf, nan, a signed zero) that every
NumPy loop agrees on. ``SCALAR[code]`` is the function of opcode ``code``."""
from __future__ import annotations

import math
import operator

import numpy as np

from jit.table import HELPERS, OPCODE, TABLE


def _libm(name, nargs):
    """A libm function by ctypes: the one the kernels call, where Python's math has none (cbrt
    before 3.11) or its own (math.hypot is CPython's algorithm, an ulp from libm's)."""
    import ctypes

    try:  # the process's own symbols, where LLVM finds the kernels' libm calls (no search for
        library = ctypes.CDLL(None)  # libm's file, which runs `ldconfig` in a subprocess)
        fn = getattr(library, name)
    except (TypeError, OSError, AttributeError):  # (Windows: no handle for the process)
        import ctypes.util

        fn = getattr(ctypes.CDLL(ctypes.util.find_library("m")), name)
    fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_double] * nargs
    return fn


def python_scalar_namespace():
    ns = {name: getattr(math, name) for name in dir(math) if not name.startswith("_")}
    if "cbrt" not in ns:  # math.cbrt is Python 3.11+
        ns["cbrt"] = _libm("cbrt", 1)
    ns["hypot"] = _libm("hypot", 2)
    ns.update(LN2=math.log(2.0), LN10=math.log(10.0), njit=lambda **kw: (lambda f: f), np=np)
    exec(HELPERS, ns)  # the same helper source the kernels use, as plain Python
    return ns


def _scalar_fn(p, ns):
    args = "x" if p.family == "unary" else "a, b"
    f = eval(f"lambda {args}: {p.f}", ns)
    ufunc = p.ufunc

    def fn(*v):
        try:
            y = f(*v)
            if type(y) is float:
                return y
        except (ArithmeticError, ValueError):
            pass
        return float(ufunc(*v))

    return fn


def _scalar_table():
    ns = python_scalar_namespace()
    fns = [None] * len(TABLE)
    for code, p in enumerate(TABLE):
        if p.family in ("unary", "binary"):
            fns[code] = _scalar_fn(p, ns)
    # float arithmetic that cannot raise: call the operator directly
    fns[OPCODE["add"]] = operator.add
    fns[OPCODE["subtract"]] = operator.sub
    fns[OPCODE["multiply"]] = operator.mul
    fns[OPCODE["neg"]] = operator.neg
    return fns


SCALAR = _scalar_table()

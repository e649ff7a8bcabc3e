"""The conversion contract: a tensor that carries a gradient never becomes a plain value silently.

``float(t)``, ``math.exp(t)``, ``'%f' % t``, ``out[i] = t`` into a NumPy array, ``np.asarray(t)``
and the like hand Python a value with no history: every gradient through it would come out zero
with no error. Those conversions of a tensor that requires grad raise the ``TypeError`` built
here, which names the idiom and what to write instead; the explicit accessors (``t.item()``,
``t.tolist()``, ``t.numpy()``, ``t.detach()``) say in their names that the value leaves the tape.
docs/porting.md lists the same idioms with runnable fixes.
"""
from __future__ import annotations

import sys

from .state import state

_CARRIES = "a tensor that carries a gradient (it requires grad: a leaf, a result with history, " \
           "a dual number)"
_LOST = "would lose the gradient silently"

_WHAT = {
    "float": f"float(t) on {_CARRIES} {_LOST}; math.exp(t), math.sqrt(t), ..., '%f' % t and "
             "out[i] = t into a NumPy array call it too.",
    "int": f"int(t) on {_CARRIES} {_LOST}.",
    "index": f"{_CARRIES} used as an integer (an index, range(t), a shape) {_LOST}.",
    "bool": f"bool(t) on {_CARRIES} (`if t:`, `t or ...`) {_LOST}.",
    "tensor": f"tape.tensor(t) of {_CARRIES} {_LOST}: it makes a new tensor without "
              "history.",
    "array": f"{_CARRIES} turned into a NumPy array (np.asarray(t), np.array([t0, t1]), "
             f"out[a:b] = t into a NumPy array) {_LOST}.",
}

_MATH = "math.exp(t), math.sqrt(t), ...   ->  np.exp(t), np.sqrt(t), ... (or tnp.*), which record"
_BUFFER = "out = np.zeros(n); out[i] = t    ->  out = tnp.zeros(n), whose item assignment " \
          "records (or collect a list and np.stack it)"
_STACK = "np.array([t0, t1])               ->  np.stack([t0, t1]) or tnp.array([t0, t1])"
_TEST = "a test like float(loss) < tol    ->  compare the tensor itself: `if loss < tol:`"
_VALUE = "a plain value really wanted      ->  t.item() (an array: t.detach().numpy())"
_COPY = "a copy that keeps the gradient   ->  t.copy() (or tnp.asarray(t), which is t)"
_DETACH = "a new leaf from the values only  ->  tape.tensor(t.detach(), requires_grad=...)"
_INT = "an integer really wanted         ->  int(t.item())"

_FIXES = {
    "float": (_MATH, _BUFFER, _TEST, _VALUE),
    "int": (_TEST, _INT),
    "index": (_INT,),
    "bool": (_TEST, _VALUE),
    "array": (_STACK, _BUFFER, _VALUE),
    "tensor": (_COPY, _DETACH),
}

_IN_COMPILE = ("Inside tape.compile every float or float-array argument of f is an input that "
               "requires grad, data arguments included; t.item() there is a guard (a replay that "
               "reads another value records f again).")


def conversion_error(kind):
    """The TypeError for converting a tensor that requires grad (`kind`: a key of ``_WHAT``):
    what was attempted, what to write instead, and under tape.compile why data arguments count
    too."""
    caller = _library_caller()
    if caller is not None:
        lines = [_library_line(caller, kind)]
    else:
        lines = [f"{_WHAT[kind]} Write instead:"]
        lines += [f"  {fix}" for fix in _FIXES[kind]]
    lines.append("(docs/porting.md lists these idioms and their fixes.)")
    if state.guards is not None:
        lines.append(_IN_COMPILE)
    return TypeError("\n".join(lines))


_LIBRARIES = ("numpy", "scipy")


def _library_caller():
    """The NumPy or SciPy functions the user's call went through before one converted the
    tensor, outermost first, as (module, name); None for the user's own conversion."""
    f = sys._getframe(2)
    while f is not None and f.f_globals.get("__name__", "").split(".")[0] == "tape":
        f = f.f_back
    names = []
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        if mod.split(".")[0] not in _LIBRARIES:
            break
        code = f.f_code
        name = getattr(code, "co_qualname", code.co_name)
        inner = f.f_locals.get("f") if code.co_name == "wrapper" else None  # SciPy's batching
        if callable(inner) and getattr(inner, "__module__", "").startswith("scipy."):
            mod, name = inner.__module__, inner.__name__
        names.append((mod, name))
        f = f.f_back
    return names[::-1] or None


# Tensor versions of library functions, registered by the layers that hold them (tape/scipy/
# linalg.py, tape/numpy_ops/_polynomials.py): hint(module, name) gives the message naming the tensor
# version of the function `name` of `module`, or None.
LIBRARY_HINTS = []


def _follows_array_api(mod, name):
    """Whether SciPy's function `name` of `mod` supports the array API standard while that
    support is off (SCIPY_ARRAY_API unset when SciPy was imported): with it on, the function
    takes tensors' namespace (tape.array_api) instead of converting them."""
    support = sys.modules.get("scipy._lib._array_api")
    if support is None or getattr(support, "SCIPY_ARRAY_API", True) or "." in name:
        return False
    fn = getattr(sys.modules.get(mod), name, None)
    capabilities = getattr(support, "xp_capabilities_table", {})
    return fn is not None and fn in capabilities and not capabilities[fn].get("np_only", False)


def _library_line(names, kind):
    """What converted (the outermost public function) and the tensor version, if tapejit has
    one: tape.scipy.linalg's or tnp.polynomial.polynomial's."""
    for mod, name in names:
        for hint in LIBRARY_HINTS:
            line = hint(mod, name)
            if line is not None:
                return line
        if mod.startswith("numpy.ma"):
            return ("numpy.ma converts its operands to NumPy arrays, which would lose the "
                    "gradient, and tensors have no mask. Write the mask out: m.filled(fill) for "
                    "the values, and a 0/1 weight array w = ~np.ma.getmaskarray(m) where masked "
                    "elements must not count, e.g. np.sum(w * x) / np.sum(w) for a masked mean.")
        if mod.startswith("scipy.stats."):
            return ("scipy.stats' distributions convert their arguments with np.asarray, which "
                    "would lose the gradient: call tape.stats (the same calls, e.g. "
                    "tape.stats.norm.logpdf(x, loc, scale); docs/special.md lists them), which "
                    "records.")
        if mod.startswith("scipy.special") and name == "polygamma":
            return ("scipy.special.polygamma converts its arguments with np.asarray, which would "
                    "lose the gradient: call tape.special.polygamma(n, x), which records.")
        if _follows_array_api(mod, name):
            public = mod.split("._")[0]
            return (f"{public}.{name} follows the array API standard, but SciPy's support for "
                    "it is off, so it converts its arguments with np.asarray, which would lose "
                    "the gradient. Set SCIPY_ARRAY_API=1 before SciPy is first imported "
                    "(SCIPY_ARRAY_API=1 python script.py, or os.environ[\"SCIPY_ARRAY_API\"] = "
                    f"\"1\" before any import of scipy) and {public}.{name} records on tensors "
                    "(docs/array_api.md).")
    mod, name = next(((m, n) for m, n in names if not n.split(".")[-1].startswith("_")
                      and n != "wrapper"), names[0])
    public = mod.split("._")[0]
    return (f"{public}.{name} converts its arguments to NumPy arrays, which would lose the "
            f"gradient of {_CARRIES}. docs/coverage.md lists the functions that differentiate "
            f"(tape.scipy.linalg and tnp.polynomial.polynomial hold tensor versions of some); "
            f"any other can be written with np.* calls on tensors, or wrapped in a tape.Function "
            f"(docs/porting.md).")

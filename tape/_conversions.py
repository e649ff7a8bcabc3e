"""The conversion contract: a tensor that carries a gradient never becomes a plain value silently.

``float(t)``, ``math.exp(t)``, ``'%f' % t``, ``out[i] = t`` into a NumPy array, ``np.asarray(t)``
and the like hand Python a value with no history: every gradient through it would come out zero
with no error. Those conversions of a tensor that requires grad raise the ``TypeError`` built
here, which names the idiom and what to write instead; the explicit accessors (``t.item()``,
``t.tolist()``, ``t.numpy()``, ``t.detach()``) say in their names that the value leaves the tape.
docs/porting.md lists the same idioms with runnable fixes.
"""
from __future__ import annotations

from ._state import state

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

# SciPy functions that start with np.asarray, and their tensor counterparts
_SCIPY_HINTS = (
    ("scipy.stats", "scipy.stats.D.logpdf(x, ...) ->  tape.stats.D.logpdf(x, ...): the same "
                    "signature, on tensors (scipy.stats converts its arguments to arrays)"),
    ("scipy.special", "scipy.special.polygamma(n, x) ->  tape.special.polygamma(n, x) (the "
                      "special functions that are ufuncs work on tensors as they are)"),
)


def _scipy_caller():
    """The hint for the SciPy module that asked for the conversion, if one did."""
    import sys

    frame = sys._getframe(2)
    for _ in range(12):
        if frame is None:
            return None
        module = frame.f_globals.get("__name__", "")
        for prefix, hint in _SCIPY_HINTS:
            if module.startswith(prefix):
                return hint
        frame = frame.f_back
    return None


_IN_COMPILE = ("Inside tape.compile every float or float-array argument of f is an input that "
               "requires grad, data arguments included; t.item() there is a guard (a replay that "
               "reads another value records f again).")


def conversion_error(kind):
    """The TypeError for converting a tensor that requires grad (`kind`: a key of ``_WHAT``):
    what was attempted, what to write instead, and under tape.compile why data arguments count
    too."""
    lines = [f"{_WHAT[kind]} Write instead:"]
    scipy = _scipy_caller() if kind == "array" else None
    if scipy is not None:
        lines.append(f"  {scipy}")
    lines += [f"  {fix}" for fix in _FIXES[kind]]
    lines.append("(docs/porting.md lists these idioms and their fixes.)")
    if state.guards is not None:
        lines.append(_IN_COMPILE)
    return TypeError("\n".join(lines))

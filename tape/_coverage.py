"""The coverage table: every public callable of numpy, numpy.linalg and numpy.polynomial.polynomial,
classified from tapejit's own registries, rendered into docs/coverage.md.

    python -m tape._coverage          # write docs/coverage.md
    python -m tape._coverage --check  # exit 1 if it is stale

``tests/test_coverage.py`` fails when the file is stale, when NumPy has a callable this module
does not classify, and when a smoke call contradicts a claim of support. Differentiable functions
come from the registries (``tape/numpy_ops/_dispatch.py``'s ``FUNCS``, the ufunc tables); the hand-written lists below
say why the others are not differentiable, or why they are not covered yet.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from .numpy_ops import _dispatch as impl

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                   "coverage.md")

DIFFERENTIABLE = "differentiable"
VALUES = "values only"
PIECEWISE = "piecewise constant"
BY_NATURE = "not differentiable by nature"
NOT_YET = "not yet"
MODES = "eager, replay, forward mode, higher order"

_CONVERSION = "a conversion to a NumPy array: refused for a tensor that carries a gradient " \
              "(docs/porting.md); tnp.asarray / np.stack keep it"
_INTEGER = "integer and bit operations"
_DISPLAY = "text for display"
_CONSTRUCTOR = "builds an array from sizes or a function, not from differentiable values"
_IO = "files, buffers and I/O"
_CONFIG = "configuration and introspection"
_DTYPE = "dtypes and type promotion"
_DATETIME = "dates and times"
_INDICES = "integer index arrays from shapes"
_COMPLEX = "complex results"

BY_NATURE_WHY = {
    **dict.fromkeys(["array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray",
                     "asarray_chkfinite", "asmatrix", "require", "astype", "bmat",
                     "from_dlpack"], _CONVERSION),
    **dict.fromkeys(["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_invert",
                     "bitwise_left_shift", "bitwise_right_shift", "bitwise_count", "invert",
                     "left_shift", "right_shift", "gcd", "lcm", "packbits", "unpackbits",
                     "base_repr", "binary_repr"], _INTEGER),
    **dict.fromkeys(["array2string", "array_repr", "array_str", "format_float_positional",
                     "format_float_scientific"], _DISPLAY),
    **dict.fromkeys(["arange", "empty", "eye", "full", "identity", "ones", "zeros", "tri",
                     "bartlett", "blackman", "hamming", "hanning", "kaiser", "fromfunction",
                     "fromiter", "frompyfunc"], _CONSTRUCTOR),
    **dict.fromkeys(["frombuffer", "fromfile", "fromregex", "fromstring", "genfromtxt", "load",
                     "loadtxt", "save", "savetxt", "savez", "savez_compressed"], _IO),
    **dict.fromkeys(["get_include", "get_printoptions", "getbufsize", "geterr", "geterrcall",
                     "info", "printoptions", "set_printoptions", "setbufsize", "seterr",
                     "seterrcall", "show_config", "show_runtime", "test", "isfortran",
                     "isscalar", "iterable",
                     "nested_iters", "broadcast_shapes", "einsum_path", "linalg.test"],
                    _CONFIG),
    **dict.fromkeys(["can_cast", "common_type", "min_scalar_type", "mintypecode",
                     "promote_types", "result_type", "isdtype", "issubdtype", "typename"],
                    _DTYPE),
    **dict.fromkeys(["busday_count", "busday_offset", "is_busday", "isnat",
                     "datetime_as_string", "datetime_data"], _DATETIME),
    **dict.fromkeys(["diag_indices", "indices", "ix_", "mask_indices", "ravel_multi_index",
                     "unravel_index", "tril_indices", "triu_indices"], _INDICES),
    **dict.fromkeys(["sort_complex", "linalg.eig", "linalg.eigvals"], _COMPLEX),
    "polynomial.polyline": _CONSTRUCTOR,
    "polynomial.polytrim": "drops trailing coefficients by value",
}

NOT_YET_WHY = {
    "roots": "needs eigenvalues of a general matrix",
}
NOT_YET_WHY["polynomial.polyroots"] = "needs eigenvalues of a general matrix"

_SPECIAL_UFUNCS = {np.matmul, np.deg2rad, np.radians, np.rad2deg, np.degrees, np.remainder,
                   np.fmod}


def namespaces():
    import numpy.polynomial.polynomial as poly

    return (("", np), ("linalg.", np.linalg), ("polynomial.", poly))


def public_callables():
    """(qualified name, object) of every public callable of the namespaces (classes excluded)."""
    out = []
    for prefix, mod in namespaces():
        for name in sorted(dir(mod)):
            obj = getattr(mod, name)
            if name.startswith("_") or not callable(obj) or isinstance(obj, type):
                continue
            out.append((prefix + name, obj))
    return out


def classify(qualname, obj):
    """(kind, detail): detail is the modes of a differentiable function, else why."""
    fn = impl.FUNCS.get(obj)
    if fn is not None:
        if getattr(fn, "values_only", False):
            return VALUES, "integer, boolean or index results; no gradient"
        if getattr(fn, "zero_grad", False):
            return PIECEWISE, "gradient 0"
        via = getattr(fn, "via", None)  # NumPy's own converts to an array: ours has this name
        return DIFFERENTIABLE, MODES if via is None else f"{MODES}; as `{via}`"
    if isinstance(obj, np.ufunc):
        if obj in impl.PLAIN:
            return VALUES, "boolean results"
        if obj in impl.ZERO_GRAD:
            return PIECEWISE, "gradient 0"
        if obj in impl.UFUNC_CODE or obj in impl.UFUNC_FUNCS or obj in _SPECIAL_UFUNCS:
            return DIFFERENTIABLE, MODES
    if qualname in BY_NATURE_WHY:
        return BY_NATURE, BY_NATURE_WHY[qualname]
    if qualname in NOT_YET_WHY:
        return NOT_YET, NOT_YET_WHY[qualname]
    return None, None


def table():
    rows, unknown = [], []
    for qualname, obj in public_callables():
        kind, detail = classify(qualname, obj)
        if kind is None:
            unknown.append(qualname)
        else:
            rows.append((qualname, kind, detail))
    return rows, unknown


def render():
    rows, unknown = table()
    if unknown:
        raise SystemExit("unclassified (add them to tape/_coverage.py): " + ", ".join(unknown))
    counts = {}
    for _, kind, _ in rows:
        counts[kind] = counts.get(kind, 0) + 1
    lines = [
        "# NumPy coverage",
        "",
        "Generated by `python -m tape._coverage` from tapejit's registries and NumPy "
        f"{np.__version__}; `tests/test_coverage.py` fails when it is stale, when NumPy has a "
        "callable it does not classify, and when a smoke call contradicts a claim.",
        "",
        "- **differentiable**: records on the tape; gradients in eager, in compiled replay, in "
        "forward mode and to higher order.",
        "- **values only**: integer, boolean or index results (plain NumPy values; guarded in "
        "replay).",
        "- **piecewise constant**: a float result whose gradient is 0 (a constant of the "
        "recording, guarded in replay).",
        "- **not differentiable by nature**: with why.",
        "- **not yet**: with why; called on a tensor that carries a gradient it raises a "
        "`TypeError` (naming the function where NumPy dispatches it to tapejit; "
        "`numpy.polynomial`'s functions fail on their conversion to an array), never a silent "
        "value. [porting.md](porting.md) shows how to wrap one in a `tape.Function`.",
        "",
        "| kind | functions |",
        "|---|---|",
    ]
    for kind in (DIFFERENTIABLE, VALUES, PIECEWISE, BY_NATURE, NOT_YET):
        lines.append(f"| {kind} | {counts.get(kind, 0)} |")
    lines += ["", "| function | kind | modes, or why |", "|---|---|---|"]
    for qualname, kind, detail in rows:
        lines.append(f"| `numpy.{qualname}` | {kind} | {detail} |")
    return "\n".join(lines) + "\n"


# -- SciPy (rendered when SciPy is importable; the NumPy part above stands alone without it) --

SCIPY_HEADING = "## SciPy"
# scipy.special functions that are not ufuncs, and how they do on tensors
SCIPY_FUNCTIONS = {
    "polygamma": (DIFFERENTIABLE, "as `tape.special.polygamma(n, x)` (SciPy's calls "
                                  "np.asarray first): " + MODES + ", in x"),
    "softplus": (DIFFERENTIABLE, MODES + " (SciPy's is np.logaddexp(0, x))"),
}
# the incomplete gamma and beta ufuncs: escapes of their own (tape/_incomplete.py)
INCOMPLETE = "eager, replay, forward mode; higher order in x and mixed (not twice in a shape)"
SCIPY_FUNCTIONS.update({name: (DIFFERENTIABLE, f"{INCOMPLETE} (row `{row}`)")
                        for name, row in (("gammainc", "gammainc"), ("gammaincc", "gammainc"),
                                          ("betainc", "betainc"), ("betaincc", "betainc"))})
# scipy.stats distribution -> the methods tape.stats has for it
STATS = {
    **{name: "logpdf, pdf, logcdf, cdf, logsf, sf" for name in
       ("norm", "t", "gamma", "beta", "expon", "cauchy", "lognorm")},
    **{name: "logpmf, pmf, logcdf, cdf, logsf, sf (k integer data)" for name in
       ("poisson", "binom", "nbinom")},
    "multivariate_normal": "logpdf, pdf",
}


def scipy_special_table():
    """(name, kind, detail) for every public ufunc of scipy.special and the functions above;
    None without SciPy."""
    try:
        import scipy.special as special
    except ImportError:
        return None
    from jit.table import SCIPY_SPECIAL

    from .special import register_scipy

    register_scipy()
    rows = []
    for name in sorted(dir(special)):
        obj = getattr(special, name)
        if name.startswith("_"):
            continue
        if name in SCIPY_FUNCTIONS:
            rows.append((name,) + SCIPY_FUNCTIONS[name])
        elif isinstance(obj, np.ufunc):
            if name in SCIPY_SPECIAL:
                rows.append((name, DIFFERENTIABLE, f"{MODES} (row `{SCIPY_SPECIAL[name]}`)"))
            else:
                rows.append((name, NOT_YET, "no row yet: a TypeError names it"))
    return rows


def render_scipy():
    rows = scipy_special_table()
    if rows is None:
        return ""
    import scipy

    done = sum(1 for r in rows if r[1] == DIFFERENTIABLE)
    lines = [
        "", SCIPY_HEADING, "",
        f"SciPy {scipy.__version__} (rendered when SciPy is installed; `import tape` never imports "
        "it). scipy.special's ufuncs reach `Tensor.__array_ufunc__`: those below marked "
        "differentiable are table rows with tapejit's own kernels (accuracy against SciPy: "
        "[special.md](special.md)). scipy.stats' distributions call `np.asarray` on their "
        "arguments; `tape.stats` has the same calls on tensors.",
        "", f"### scipy.special ({done} of {len(rows)} differentiable)", "",
        "| function | kind | modes, or why |", "|---|---|---|"]
    for name, kind, detail in rows:
        lines.append(f"| `scipy.special.{name}` | {kind} | {detail} |")
    lines += ["", "### scipy.stats", "",
              "| distribution | `tape.stats` methods (differentiable in every argument) |",
              "|---|---|"]
    for name, methods in STATS.items():
        lines.append(f"| `scipy.stats.{name}` | {methods} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    text = render() + render_scipy()
    if "--check" in argv:
        with open(OUT) as f:
            if f.read() != text:
                print(f"{OUT} is stale: run python -m tape._coverage")
                return 1
        return 0
    with open(OUT, "w") as f:
        f.write(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    import tape  # noqa: F401  (registers every implementation)

    sys.exit(main())

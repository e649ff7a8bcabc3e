"""One module per op family of the swept rows: its attribute layout (encode / decode, for the
recorder, the kernels and the file validator) and its kernel bodies for every mode (forward
values, reverse adjoints, tangents), as ordinary functions that ``jit/_assemble.py`` copies
verbatim into the generated interpreters. The escape families' rules are NumPy code in
``tape/escapes/`` (``jit`` never imports ``tape``).
(The package imports its family modules on demand: ``families.layouts`` is plain Python,
which ``tape`` reads at import without loading Numba.)
"""


def family_modules():
    """Family name (``jit.table.FAMILIES``) -> its module, for the swept families."""
    from . import elementwise, gather, matmul, reduce, scan, where

    return {"unary": elementwise, "binary": elementwise, "select": where, "reduce": reduce,
            "scan": scan, "gather": gather, "scatter": gather, "matmul": matmul}


def layout_decoders():
    """The decoders of the families' attribute layouts that kernels call, each once (rendered,
    jitted, into every generated interpreter)."""
    seen = []
    for module in family_modules().values():
        seen += [fn for fn in getattr(module, "LAYOUTS", ()) if fn not in seen]
    return seen

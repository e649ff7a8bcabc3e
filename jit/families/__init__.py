"""One module per op family of the swept rows: its attribute layout (encode / decode, for the
recorder, the kernels and the file validator) and its kernel bodies for every mode (forward
values, reverse adjoints, tangents), as ordinary functions that ``jit/_assemble.py`` copies
verbatim into the generated interpreters. The escape families' rules are NumPy code in
``tape/escapes/`` (``jit`` never imports ``tape``).
"""
from . import elementwise, gather, matmul, reduce, scan, where

# family name (jit.table.FAMILIES) -> its module
FAMILY_MODULES = {"unary": elementwise, "binary": elementwise, "select": where,
                  "reduce": reduce, "scan": scan, "gather": gather, "scatter": gather,
                  "matmul": matmul}

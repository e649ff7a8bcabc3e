"""Where the user's code called into tapejit: the first frame outside the ``tape`` package, for
messages and guards that name the line that recorded something."""
from __future__ import annotations

import os
import sys

# tape/, the root of every module of the package (tape/core/callsite.py is two levels down)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _inside(filename):
    path = os.path.abspath(filename)
    return path.startswith(_PACKAGE + os.sep)


def caller(depth=2):
    """"file:line" of the first frame, from `depth` frames up, that is not in the package."""
    f = sys._getframe(depth)
    while f is not None and _inside(f.f_code.co_filename):
        f = f.f_back
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "?"

"""Text helpers shared by the interpreter generators (``_generate``, ``_generate_forward``,
``_generate_tangent``): indentation, operand use in a formula, raw-address arena access, and the
check behind the branchless 0-d arithmetic path."""
from __future__ import annotations

import re

from .table import TABLE


def _uses(expr: str, name: str) -> bool:
    return re.search(rf"\b{name}\b", expr) is not None


def _indent(lines, n):
    return "\n".join((" " * n + ln) if ln else "" for ln in lines)


def arithmetic_codes():
    """The opcodes of add, subtract and multiply, which the 0-d paths of the sweeps run without
    a data-dependent branch: on scalar loops (W1) the jump to a row's body is mispredicted
    more often than not (measured: 6 ns/row with the jump, 2.5 with one opcode throughout),
    and these three are most of such code. They must stay consecutive, with these formulas."""
    names = [p.name for p in TABLE]
    add = names.index("add")
    expected = {"add": ("a + b", ("1.0", "1.0")), "subtract": ("a - b", ("1.0", "-1.0")),
                "multiply": ("a * b", ("b", "a"))}
    for code, name in enumerate(("add", "subtract", "multiply"), start=add):
        p = TABLE[code]
        if p.name != name or (p.f, tuple(p.d)) != expected[name]:
            raise ValueError("the table's add, subtract and multiply rows must be consecutive "
                             "with formulas a + b, a - b, a * b (the branchless 0-d path in "
                             "jit/_generate.py assumes it)")
    return add, add + 1, add + 2


_INDEX = r"((?:[^\[\]]|\[[^\[\]]*\])+)"  # an index, which may itself index once: IA[...]
_LOAD = r"_ld({}, \1)"


def raw_access(line, array, pointer):
    """Rewrite one generated line's element accesses of the float64 arena `array` by raw
    address (`pointer` = ``_addr(array)``): ``X[i] += v`` becomes ``_st(p, i, _ld(p, i) + (v))``,
    ``X[i] = v`` becomes ``_st(p, i, v)`` and a read ``X[i]`` becomes ``_ld(p, i)``: the same
    arithmetic. Indexing with a signed integer makes Numba wrap negative indices element by
    element, which keeps LLVM from vectorising the loop: a 250,000-element multiply adjoint took
    305 us indexed and 86 us by address."""
    item = re.compile(rf"\b{array}\[" + _INDEX + r"\]")
    load = _LOAD.format(pointer)
    m = re.match(rf"^(\s*){array}\[" + _INDEX + r"\] (\+?)= (.+)$", line)
    if m:
        indent, i, plus, v = m.groups()
        v = item.sub(load, v)
        value = f"_ld({pointer}, {i}) + ({v})" if plus else v
        line = f"{indent}_st({pointer}, {i}, {value})"
    line = item.sub(load, line)
    if re.search(rf"\b{array}\[", line):
        raise ValueError(f"cannot rewrite the access to {array} in {line.strip()!r}")
    return line

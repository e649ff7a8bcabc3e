"""The one code-generation skeleton of the generated interpreters.

Kernel code is ordinary Python: the family modules of ``jit/families/`` hold each family's
kernel bodies as functions (importable, linted, runnable under ``NUMBA_DISABLE_JIT=1``), and
modules such as ``jit/_raw.py`` and ``jit/_vmath.py`` hold helpers below a marker line. The
generators (``_generate.py`` for ``_interp.py``, ``_generate_tangent.py`` for ``_tangent.py``)
copy that text verbatim into one file per interpreter, because Numba's on-disk cache only
notices changes to the file that holds a jitted entry point.

``family_kernels`` is the skeleton every mode shares: per swept family, one ``@njit`` kernel
``_{mode}_{family}(args)`` whose body is ``op = code & 255``, the family's prologue for the
mode, an if/elif chain over the family's opcodes (rows with the same body share a branch: less
code to compile) and the family's epilogue; and the sweep's dispatch, one call per row. Splitting
by family keeps each function small: Numba's front end grows faster than linearly with function
size.
"""
from __future__ import annotations

import ast
import inspect
import os
import re
import textwrap
from dataclasses import dataclass, field

from .table import FAMILIES, TABLE, VMATH_MARKER


SWEEPS = os.path.join(os.path.dirname(__file__), "sweeps")


def rendered_part(module) -> str:
    """The text of a real module (or of a file of ``jit/sweeps/``, by name) below its marker
    line, as rendered into the interpreters."""
    path = module.__file__ if hasattr(module, "__file__") else os.path.join(SWEEPS, module)
    with open(path) as fh:
        return fh.read().split(VMATH_MARKER, 1)[1]


def fill(text: str, parts: dict) -> str:
    """text with each insertion line ``# <name>`` (at the start of a line) replaced by
    parts[name]; every insertion point must be filled, and every part used."""
    used = set()

    def put(m):
        name = m.group(1)
        if name not in parts:
            raise KeyError(f"no part for the insertion point # <{name}>")
        used.add(name)
        value = parts[name]
        return value if value.endswith("\n") else value + "\n"

    out = re.sub(r"^# <(\w+)>\n", put, text, flags=re.M)
    if used != set(parts):
        raise KeyError(f"parts without an insertion point: {sorted(set(parts) - used)}")
    return out


def function_source(fn) -> str:
    """A whole module-level function (decorators included), verbatim."""
    return textwrap.dedent(inspect.getsource(fn)).rstrip() + "\n"


def body_lines(fn) -> list[str]:
    """The statements of fn's body after its docstring, verbatim (comments kept), dedented:
    what the skeleton pastes into a family kernel's branch. Every kernel body has a docstring
    (it says what the body computes; the generated branch is labelled by its row instead). A
    final ``return`` (a prologue's: the names its branches read) is not copied."""
    lines, _ = inspect.getsourcelines(fn)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    func = tree.body[0]
    doc = func.body[0] if func.body else None
    if not (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
            and isinstance(doc.value.value, str)) or len(func.body) < 2:
        raise ValueError(f"kernel body {fn.__module__}.{fn.__name__} needs a docstring and "
                         "at least one statement")
    end = func.end_lineno
    if isinstance(func.body[-1], ast.Return):  # a prologue returns the names its branches read
        end = func.body[-1].lineno - 1
    body = textwrap.dedent("".join(lines[doc.end_lineno:end]))
    return [ln for ln in body.rstrip("\n").split("\n")]


def assigned_names(lines) -> set[str]:
    """The names the statements in lines assign (a prologue's outputs)."""
    names = set()
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def uses(expr: str, name: str) -> bool:
    """Whether the formula expr reads the variable name."""
    return re.search(rf"\b{name}\b", expr) is not None


def indent(lines, n):
    return "\n".join((" " * n + ln) if ln else "" for ln in lines)


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
        ind, i, plus, v = m.groups()
        v = item.sub(load, v)
        value = f"_ld({pointer}, {i}) + ({v})" if plus else v
        line = f"{ind}_st({pointer}, {i}, {value})"
    line = item.sub(load, line)
    if re.search(rf"\b{array}\[", line):
        raise ValueError(f"cannot rewrite the access to {array} in {line.strip()!r}")
    return line


@dataclass(frozen=True)
class Mode:
    """One sweep's family kernels: name (forward, reverse, tangent), the kernels' arguments,
    their docstring (with {family}), the kernel a family's rows are dispatched to when it is
    not ``_{name}_{family}`` itself, lines after the dispatch, and the arena whose accesses
    go by raw address (``raw_access``), if any."""
    name: str
    args: str
    doc: str
    call: dict = field(default_factory=dict)
    after_calls: tuple = ()
    raw: str = ""

    def scope(self, prologue) -> set[str]:
        """The names a body may read: the kernel's arguments, op and the prologue's outputs."""
        return {a.strip() for a in self.args.split(",")} | {"op"} | assigned_names(prologue)


def _chain(rows, case):
    """An if/elif chain over the rows' opcodes, with case(p) as each body; rows with the same
    body share one branch."""
    bodies = {}  # body text -> (codes, names, lines), in table order
    for code, p in rows:
        lines = case(p)
        entry = bodies.setdefault("\n".join(lines), ([], [], lines))
        entry[0].append(code)
        entry[1].append(p.name)
    out = []
    for j, (codes, names, lines) in enumerate(bodies.values()):
        test = " or ".join(f"op == {c}" for c in codes)
        out.append(f"{'if' if j == 0 else 'elif'} {test}:  # {', '.join(names)}")
        out += ["    " + ln if ln else "" for ln in lines]
    return out


def family_kernels(mode: Mode, modules, dispatch=None):
    """(the kernels' source, the sweep's dispatch lines indented for its row loop); ``modules``
    maps each family name to its module (``jit.families.family_modules()``). ``dispatch(fam,
    call)``, if given, returns the lines that take a row of family `fam` (the call by default)."""
    kernels, calls = [], []
    for fi, fam in enumerate(FAMILIES):
        rows = [(c, p) for c, p in enumerate(TABLE) if p.family == fam]
        if fam not in modules or not rows:
            continue
        name = f"_{mode.name}_{fam}"
        call = f"{mode.call.get(fam, name)}({mode.args})"
        calls += [f"{'if' if not calls else 'elif'} fam == {fi}:  # {fam}"]
        calls += ["    " + ln for ln in (dispatch(fam, call) if dispatch else [call])]
        kernels.append(_kernel(mode, modules[fam], fam, rows, name, mode.doc.format(family=fam)))
    calls += list(mode.after_calls)
    return "\n\n\n".join(kernels), indent(calls, 8)


def subset_kernel(mode: Mode, modules, fam: str, names, name: str, doc: str) -> str:
    """The source of kernel `name`: family `fam`'s kernel for `mode` with the branches of the
    rows named in `names` only (the same prologue, bodies and epilogue, so the same arithmetic
    for those rows), for an entry point that needs no other row of the family: a smaller
    function to compile."""
    rows = [(c, p) for c, p in enumerate(TABLE) if p.family == fam and p.name in names]
    missing = set(names) - {p.name for _, p in rows}
    if missing:
        raise KeyError(f"no {fam} rows named {sorted(missing)}")
    return _kernel(mode, modules[fam], fam, rows, name, doc)


def _kernel(mode, module, fam, rows, name, doc):
    prologue = _prologue(module, mode.name, fam)
    scope = mode.scope(prologue)

    def case(p):
        lines = _case(module, mode.name, p, scope)
        if lines is None:
            raise KeyError(f"row {p.name!r} (family {fam}) has no {mode.name} kernel body: "
                           f"add one to {os.path.relpath(module.__file__)}")
        return lines

    body = ["op = code & 255"] + prologue + _chain(rows, case)
    if hasattr(module, "epilogue"):
        body += module.epilogue(mode.name, fam)
    if mode.raw:
        body = [f"p{mode.raw} = _addr({mode.raw})"] + [raw_access(ln, mode.raw, "p" + mode.raw)
                                                      for ln in body]
    return (f'@njit(error_model="numpy")\ndef {name}({mode.args}):\n'
            f'    """{doc}"""\n' + indent(body, 4))


# A family module either generates its branches (``case(mode, p, scope)``, with ``prologue`` and
# ``epilogue`` functions: elementwise rows, from the table's formulas) or holds them as body
# functions: ``KERNELS[mode][row name]``, ``SAME`` (rows that share another row's reverse and
# tangent bodies) and ``PROLOGUE`` (one body function whose lines open every kernel).


def _prologue(module, mode, fam):
    if hasattr(module, "prologue"):
        return module.prologue(mode, fam)
    return body_lines(module.PROLOGUE) if hasattr(module, "PROLOGUE") else []


def _case(module, mode, p, scope):
    if hasattr(module, "case"):
        return module.case(mode, p, scope)
    bodies = module.KERNELS[mode]
    fn = bodies.get(p.name) or bodies.get(getattr(module, "SAME", {}).get(p.name))
    if fn is None:
        return None
    params = set(inspect.signature(fn).parameters)
    if not params <= scope:
        raise ValueError(f"kernel body {fn.__module__}.{fn.__name__} takes "
                         f"{sorted(params - scope)}, which its kernel does not have "
                         f"(it has {sorted(scope)})")
    return body_lines(fn)

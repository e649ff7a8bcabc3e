"""The import graph of ``tape/`` and ``jit/``: no cycles, ``jit`` never imports ``tape``, and each
layer of ``tape/`` imports only from the layers below it (docs/design.md, "Where things live").

The graph is read from the source with ``ast``, not from ``sys.modules``: every ``import`` and
``from ... import`` counts, at module level and inside functions alike, so an import moved into a
function to dodge a cycle is still a cycle here. Importing a package's submodule counts as an
edge to the submodule only (the package's ``__init__`` running first is Python's doing, not a
dependency the importer chose).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Bottom to top. A module belongs to the first layer whose name is a prefix of its own: the
# modules directly in tape/ (tape/__init__.py, the namespaces, the thin public modules such as
# tape/autograd.py, tape/_coverage.py) and tape/array_api/ are the top layer, "tape".
LAYERS = (
    "jit",
    "tape.parallel",      # worker threads and native BLAS pieces: no tape knowledge
    "tape.core",          # thread state, the tape, Tensor, recording of every family, guards
    "tape.escapes",       # BLAS/LAPACK and scipy.special rows: value, reverse and forward rules
    "tape.forward",       # tangent rules on tensors, dual numbers, the jitted tangent program
    "tape.reverse",       # backward drivers, vjp rules, split backward, custom Functions
    "tape.transforms",    # grad / vjp / jacobians / gradcheck / checkpoint
    "tape.numpy_ops",     # NumPy's functions on tensors, registered for NumPy's dispatch
    "tape.scipy",         # scipy.linalg on tensors
    "tape.replay",        # tape.compile: planning, execution, hooks in replay, save and load
    "tape.integrations",  # optimize, pipelining, distributed
    "tape",               # the public modules and namespaces: tape/__init__.py, tape.numpy,
    #                       tape.special, tape.stats, tape.array_api, the thin public modules
)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def import_graph(root: Path, packages=("tape", "jit")):
    """{module: {imported module: [line, ...]}} over the packages' modules, for imports of
    modules of those packages (a name imported from a package resolves to its submodule when
    there is one, else to the package)."""
    files = {module_name(p, root): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}
    graph = {}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        edges = graph.setdefault(module, {})
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, is_package, node.level, node.module)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base
                           for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != module:
                    edges.setdefault(target, []).append(node.lineno)
    return graph


def find_cycle(graph):
    """One import cycle as a list of modules [m0, m1, ..., m0], or None."""
    color = {}  # absent: unseen, 1: on the current path, 2: done
    for start in sorted(graph):
        if start in color:
            continue
        path, stack = [start], [iter(sorted(graph.get(start, ())))]
        color[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                color[path.pop()] = 2
                stack.pop()
            elif color.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in color:
                color[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def layer_of(module, layers=LAYERS):
    for i, name in enumerate(layers):
        if module == name or module.startswith(name + "."):
            return i
    raise KeyError(module)


def layer_violations(graph, layers=LAYERS):
    """Imports of a module of a higher layer: [(importer, imported, lines)]."""
    return [(m, t, lines) for m, edges in sorted(graph.items()) for t, lines in sorted(edges.items())
            if layer_of(t, layers) > layer_of(m, layers)]


def _describe(graph, cycle):
    return " -> ".join(f"{a} (line {graph[a][b][0]})" for a, b in zip(cycle, cycle[1:])) \
        + f" -> {cycle[-1]}"


@pytest.fixture(scope="module")
def graph():
    return import_graph(ROOT)


def test_no_import_cycle(graph):
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + _describe(graph, cycle)


def test_jit_never_imports_tape(graph):
    bad = [(m, t) for m, edges in graph.items() if m.split(".")[0] == "jit" for t in edges
           if t.split(".")[0] == "tape"]
    assert not bad, f"jit/ imports tape: {bad}"


def test_every_module_has_a_layer(graph):
    for module in graph:
        layer_of(module)  # KeyError names a module outside every declared layer


def test_layers_import_only_downward(graph):
    bad = layer_violations(graph)
    assert not bad, "imports of a higher layer:\n" + "\n".join(
        f"  {m} (layer {LAYERS[layer_of(m)]}) imports {t} (layer {LAYERS[layer_of(t)]}) at "
        f"line {lines[0]}" for m, t, lines in bad)


def test_the_checks_fail_on_a_synthetic_graph(tmp_path):
    """The checks themselves can fail: a package written to disk with a cycle through a
    function-level import, and an import from a lower layer to a higher one."""
    pkg = tmp_path / "tape"
    (pkg / "core").mkdir(parents=True)
    (pkg / "replay").mkdir()
    (pkg / "__init__.py").write_text("from .replay import compiled\n")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "record.py").write_text("from . import tensor\n")
    (pkg / "core" / "tensor.py").write_text(
        "def backward():\n    from .record import x  # dodges the cycle at import time\n")
    (pkg / "replay" / "__init__.py").write_text("")
    (pkg / "replay" / "compiled.py").write_text("from ..core.record import x\n")
    (pkg / "core" / "hooks.py").write_text("def f():\n    from ..replay.compiled import y\n")
    g = import_graph(tmp_path, packages=("tape",))
    assert g["tape.core.tensor"] == {"tape.core.record": [2]}
    cycle = find_cycle(g)
    assert cycle is not None and set(cycle) == {"tape.core.record", "tape.core.tensor"}
    layers = ("tape.core", "tape.replay", "tape")
    assert layer_violations(g, layers) == [("tape.core.hooks", "tape.replay.compiled", [2])]
    # and a graph without those edges passes both checks
    (pkg / "core" / "tensor.py").write_text("X = 1\n")
    (pkg / "core" / "hooks.py").write_text("from .tensor import X\n")
    g = import_graph(tmp_path, packages=("tape",))
    assert find_cycle(g) is None and layer_violations(g, layers) == []


def _code_lines(path):
    """Lines of real code: neither blank, nor comments, nor docstrings."""
    tree = ast.parse(path.read_text())
    doc = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                doc.update(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(1 for i, line in enumerate(path.read_text().splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and i not in doc)


def test_no_tape_module_over_700_lines_of_code():
    long = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / "tape").rglob("*.py"))
            if (n := _code_lines(p)) > 700}
    assert not long, f"split these by purpose: {long}"


def test_tensor_gets_each_layers_methods_once():
    """The layers above the Tensor type give it their methods through ``tensor.install`` when
    ``import tape`` imports them; a second definition of a name is refused, not silently won."""
    import tape
    from tape.core.tensor import Tensor, install

    for name, layer in (("__add__", "tape.core.tensor_ops"), ("__getitem__", "tape.core.tensor_ops"),
                        ("__array_ufunc__", "tape.numpy_ops._dispatch"),
                        ("sum", "tape.numpy_ops._impl"), ("backward", "tape.reverse.autograd"),
                        ("__array_namespace__", "tape")):
        assert getattr(Tensor, name).__module__ == layer, name

    class Again:
        def backward(self):
            pass

    with pytest.raises(RuntimeError, match="Tensor.backward is defined twice"):
        install(Again)
    assert Tensor.backward.__module__ == "tape.reverse.autograd"
    assert isinstance(tape.tensor(1.0) + 1.0, Tensor)

"""Every notebook in notebooks/ runs top to bottom without a cell error (cells assert results).

A notebook that imports an optional dependency (SciPy, Matplotlib, Dask: the ``demo`` and
``dask`` extras) skips where it is not installed, so ``make test`` also passes without them."""
import ast
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
OPTIONAL = ("scipy", "matplotlib", "dask")


def imported_packages(nb):
    """The top-level packages the notebook's code cells import (IPython magics skipped)."""
    names = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(ln for ln in cell.source.splitlines()
                            if not ln.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    for name in sorted(imported_packages(nb) & set(OPTIONAL)):
        pytest.importorskip(name, reason=f"{path.name} imports {name}")
    # "python3" is ipykernel's own kernel: jupyter_client starts it with sys.executable, i.e.
    # the interpreter running pytest (the venv's), so the notebook sees this tapejit install.
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, with the cell and traceback, on any error


def test_notebooks_are_stored_without_outputs():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, \
                    f"{path.name} cell {i} has stored outputs; clear them before committing"

"""Every notebook under examples/notebooks runs, top to bottom, in a fresh
Jupyter kernel (nbclient) started in the notebook's directory; the
notebooks assert on what they compute, so a wrong result fails here. The
kernel starts as a user's would: no PYSPARK_PYTHON, and the virtualenv's
bin directory not on the PATH. Cells tagged `plot` must render a PNG, and
cells tagged `progress` (batch runs) draw the progress bar's widget. A
notebook that needs external services names them in its metadata
(`beam_spark_runner.services`: "postgresql", "nats", ...)."""

import glob
import os
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from tests import services

NOTEBOOKS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "notebooks", "*.ipynb")))


def _user_kernel_env():
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    venv_bin = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks under examples/notebooks"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs_and_its_assertions_hold(path, request):
    notebook = nbformat.read(path, as_version=4)
    for service in notebook.metadata.get("beam_spark_runner", {}).get("services", []):
        services.require(request, services.BY_NAME[service])
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), (
        "%s is committed with outputs" % path
    )
    directory = os.path.dirname(os.path.abspath(path))
    # A hung cell, not a slow one: the percentile notebook's feeding cell
    # waits for 40 micro-batches, which took over 600 s on a loaded 2-core
    # machine; the examples' own waits end as soon as their batch ran.
    client = NotebookClient(notebook, timeout=1800, kernel_name="python3", resources={"metadata": {"path": directory}})
    client.execute(env=_user_kernel_env())
    plots = 0
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        if cell.source.startswith("ib.show("):
            assert any(o.output_type == "display_data" for o in cell.outputs), "ib.show displayed nothing"
        if "progress" in cell.metadata.get("tags", []):  # a batch run: auto draws tqdm's widget
            widgets = [o for o in cell.outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
            assert widgets, "cell %d of %s drew no progress bar" % (index, os.path.basename(path))
        if "plot" in cell.metadata.get("tags", []):
            plots += 1
            images = [o for o in cell.outputs if "image/png" in o.get("data", {})]
            assert images, "plot cell %d of %s rendered no PNG" % (index, os.path.basename(path))
    if "%matplotlib" in "".join(c.source for c in notebook.cells if c.cell_type == "code"):
        assert plots, "%s plots but tags no cell `plot`" % os.path.basename(path)

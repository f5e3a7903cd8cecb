"""Every notebooks/*.ipynb runs top to bottom, is stored without outputs and installs on Colab."""

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# The first code cell of every notebook, exactly.
INSTALL_CELL = """\
# On Colab, install warca_jax first: set REPO_URL to where this repository is hosted.
import subprocess
import sys

if "google.colab" in sys.modules:
    REPO_URL = "https://github.com/<owner>/warca_jax"  # edit: your copy of this repository
    if "<owner>" in REPO_URL:
        raise RuntimeError("set REPO_URL to the git URL of this repository first")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"git+{REPO_URL}"], check=True)"""


def test_there_are_notebooks():
    names = {p.name for p in NOTEBOOKS}
    assert {"quickstart.ipynb", "gradient_check.ipynb"} <= names


def _read(path):
    return nbformat.read(path, as_version=4)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_stored_without_outputs_and_installs_on_colab(path):
    nb = _read(path)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{path.name} has no code cell"
    assert code[0].source == INSTALL_CELL, f"{path.name}: first code cell is not the install cell"
    stored = [i for i, c in enumerate(code) if c.outputs or c.execution_count is not None]
    assert not stored, f"{path.name} is stored with outputs in code cells {stored}"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


# jupyter_client and jupyter_core may warn about their own coming changes while a kernel starts
# and stops (paths, zmq, utcnow); those are not the notebooks' warnings.
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Jupyter is migrating its paths:DeprecationWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning:jupyter_client")
@pytest.mark.filterwarnings("ignore::DeprecationWarning:jupyter_core")
@pytest.mark.filterwarnings("ignore::DeprecationWarning:zmq")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_runs_top_to_bottom(path, tmp_path):
    before = sorted(p.name for p in (ROOT / "notebooks").iterdir())
    nb = _read(path)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        pytest.fail(f"{path.name} failed in a cell:\n{e}", pytrace=False)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sorted(p.name for p in (ROOT / "notebooks").iterdir()) == before, (
        f"{path.name} wrote into notebooks/ instead of its working directory"
    )

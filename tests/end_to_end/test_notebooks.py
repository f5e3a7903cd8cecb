"""Every notebooks/*.ipynb runs top to bottom from a clone, is stored without outputs and sets
itself up on Colab (clone, install, change into the clone)."""

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# The first code cell of every notebook, exactly: it works from a clone (see its comments).
SETUP_CELL = """\
# Work from a clone of this repository: configs/ and data/ are read from its root. On Colab,
# set REPO_URL: this cell clones the repository, installs it and changes into the clone.
# Elsewhere, start Jupyter in the clone (its root or notebooks/) or in the folder holding it.
import os
import subprocess
import sys
import tempfile

if "google.colab" in sys.modules and not os.path.isdir("warca_jax/configs"):
    REPO_URL = "https://github.com/<owner>/warca_jax"  # edit: your copy of this repository
    if "<owner>" in REPO_URL:
        raise RuntimeError("set REPO_URL to the git URL of this repository first")
    subprocess.run(["git", "clone", "-q", REPO_URL, "warca_jax"], check=True)
    # JAX with its accelerator plugin, upgraded together (jax alone would leave an older
    # CUDA plugin behind): the cuda12 extra on a GPU runtime, tpu on a TPU one.
    gpu, tpu = os.path.exists("/dev/nvidia0"), "TPU_NAME" in os.environ
    extra = "[cuda12]" if gpu else "[tpu]" if tpu else ""
    pip = [sys.executable, "-m", "pip", "install", "-q", "-e"]
    subprocess.run([*pip, f"warca_jax{extra}"], check=True)
# The clone's root, changed into before anything imports warca_jax: from the folder holding
# a clone named warca_jax, "import warca_jax" would find that folder instead of the package.
for root in (".", "..", "warca_jax"):
    if os.path.isfile(os.path.join(root, "configs", "warca.py")):
        os.chdir(root)
        break
else:
    raise RuntimeError(f"no clone of the repository at or around {os.getcwd()}")
if "warca_jax" in sys.modules and not getattr(sys.modules["warca_jax"], "__file__", None):
    raise RuntimeError("warca_jax was imported from the clone's folder: restart the kernel")
OUT = tempfile.mkdtemp(prefix="warca_jax_notebooks_")  # this run's files, a new folder
print("working in", os.getcwd())"""


def test_there_are_notebooks():
    names = {p.name for p in NOTEBOOKS}
    assert {"quickstart.ipynb", "gradient_check.ipynb"} <= names


def _read(path):
    return nbformat.read(path, as_version=4)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_stored_without_outputs_and_sets_up_from_a_clone(path):
    nb = _read(path)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{path.name} has no code cell"
    assert code[0].source == SETUP_CELL, f"{path.name}: first code cell is not the set-up cell"
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
def test_runs_top_to_bottom(path):
    """Started in notebooks/, as Jupyter opened in a clone does; it writes nothing there."""
    before = _listing()
    nb = _read(path)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        pytest.fail(f"{path.name} failed in a cell:\n{e}", pytrace=False)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert _listing() == before, f"{path.name} wrote into the clone instead of its OUT folder"


def _listing() -> list[str]:
    """The clone's top level and notebooks/ (what a notebook must not write into)."""
    return sorted(p.name for p in ROOT.iterdir()) + sorted(
        p.name for p in (ROOT / "notebooks").iterdir()
    )


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Jupyter is migrating its paths:DeprecationWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning:jupyter_client")
@pytest.mark.filterwarnings("ignore::DeprecationWarning:jupyter_core")
@pytest.mark.filterwarnings("ignore::DeprecationWarning:zmq")
def test_set_up_from_the_folder_holding_a_clone_named_warca_jax(tmp_path):
    """Jupyter started beside a clone named warca_jax (Colab's /content after a git clone):
    the set-up cell changes into the clone before anything imports the package, so
    ``import warca_jax`` is the package, not the clone's folder as a namespace."""
    (tmp_path / "warca_jax").symlink_to(ROOT, target_is_directory=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP_CELL),
        nbformat.v4.new_code_cell(
            "import warca_jax\n"
            "from warca_jax.data import dataset_arrays\n"
            "assert warca_jax.__file__, 'the clone folder was imported as a namespace'\n"
            "assert hasattr(dataset_arrays, 'validated_dataset')\n"
            "print(os.getcwd())"
        ),
    ]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    client = nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        pytest.fail(f"the set-up from the clone's parent failed:\n{e}", pytrace=False)
    printed = "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert os.path.samefile(printed.strip(), tmp_path / "warca_jax"), printed  # the clone

"""Nothing is read or written outside the folders given, with real links, FIFOs and devices.

* Writes never follow a symbolic link: a link planted at the lock (``W/.lock``) is refused
  before any work in one line naming it, its target untouched; a link at a file written
  whole (a results file, ``metrics.jsonl``, a feature-cache entry) is replaced by the file,
  never written through; appending never follows one.
* Reads are of regular files only: an image that is a link to ``/dev/zero``, a FIFO, a
  dangling or a looping link, and a feature file that is a FIFO or a device, are refused
  in one line naming the file, never opened (a FIFO would block the run).
* A MATLAB v7.3 (HDF5) file whose data would come from another file (external storage,
  an external link, a virtual dataset) is refused naming the file and the dataset.

Every test that could block on a FIFO runs its call in a thread with a time limit
(``_within``), so a regression fails the test instead of hanging the suite.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading

import fixture_trees
import numpy as np
import pytest
from cli_exits import one_line_exit
from processes import ROOT, cpu_env
from repo_configs import config_module

from experiments import main as _main  # noqa: F401 - defines the --config flag cli reads
from warca_jax import datasets, features
from warca_jax.datasets import hdf5
from warca_jax.io import reads, run_files, writes
from warca_jax.io.workdir_lock import LOCK_FILE, WorkdirLock
from warca_jax.runs import pipeline

PRECIOUS = "the user's own file: never to be written by a run\n"


def _within(fn, seconds: float = 30.0, fifo=None):
    """``fn()``'s exception (None if it returned), failing the test if it has not ended
    after ``seconds`` (blocked on a FIFO: then ``fifo`` is opened to release it)."""
    out = {}

    def target():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if fifo is not None:
            for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
                try:
                    os.close(os.open(fifo, flags))
                except OSError:
                    pass
        pytest.fail(f"still running after {seconds} s: blocked on a FIFO?")
    return out.get("error")


def _config(method="nn"):
    c = config_module(method).get_config("small")
    c.unlock()
    c.data.num_splits = 1
    if method == "warca":
        c.method.num_iters, c.method.log_every = 20, 10
    return c


def _no_data(*args, **kwargs):
    raise AssertionError("data loaded although the workdir was refused")


@pytest.fixture
def precious(tmp_path):
    """A file of the user's outside every folder a run is given."""
    path = tmp_path / "outside" / "precious.txt"
    path.parent.mkdir()
    path.write_text(PRECIOUS)
    return path


# ------------------------------------------------------------------- writes: the lock


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
def test_a_link_at_the_lock_is_one_line_before_any_work(
    tmp_path, precious, capsys, monkeypatch, dangling
):
    monkeypatch.setattr(datasets, "from_config", _no_data)
    target = tmp_path / "outside" / "new.txt" if dangling else precious
    wd = tmp_path / "w"
    wd.mkdir()
    (wd / LOCK_FILE).symlink_to(target)
    line = one_line_exit(capsys, lambda: pipeline.train_and_evaluate(_config(), str(wd)))
    assert line == (
        f"error: cannot write {wd / LOCK_FILE}: it is a symbolic link (to {target}); "
        "expected a regular file or no file there (a run never writes through a link or "
        "into a special file): remove it or use another folder"
    )
    assert precious.read_text() == PRECIOUS and not (tmp_path / "outside" / "new.txt").exists()
    assert (wd / LOCK_FILE).is_symlink() and os.listdir(wd) == [LOCK_FILE]


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_fifo_or_folder_at_the_lock_is_refused_without_blocking(tmp_path, kind):
    lock = tmp_path / LOCK_FILE
    os.mkfifo(lock) if kind == "fifo" else lock.mkdir()
    what = "a FIFO (named pipe)" if kind == "fifo" else "a folder"
    for call in (WorkdirLock(tmp_path).acquire, WorkdirLock(tmp_path).check_free):
        error = _within(call, fifo=lock)
        assert isinstance(error, writes.InTheWayError), error
        assert str(error).startswith(f"cannot write {lock}: it is {what}; expected a regular")


@pytest.mark.slow
def test_the_entry_point_refuses_a_link_at_the_lock_in_one_line(tmp_path, precious):
    wd = tmp_path / "w"
    wd.mkdir()
    (wd / LOCK_FILE).symlink_to(precious)
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.main", "--config=configs/warca.py:small",
         f"--workdir={wd}", "--verbosity=-1"],
        cwd=ROOT, env=cpu_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"error: cannot write {wd / LOCK_FILE}: it is a symbolic link (to ")
    assert precious.read_text() == PRECIOUS and os.listdir(wd) == [LOCK_FILE]


# ------------------------------------------------------ writes: files written whole


def _plant_links(wd, names, precious, gone):
    """Links at ``names`` in ``wd``: the first to the user's file, the others dangling (to
    ``gone``, which following them would create)."""
    wd.mkdir()
    for i, name in enumerate(names):
        (wd / name).symlink_to(precious if i == 0 else gone)


def _replaced(wd, names, caplog) -> None:
    for name in names:
        assert not (wd / name).is_symlink() and (wd / name).is_file(), name
        assert f"{wd / name} was a symbolic link" in caplog.text, name
    assert not [n for n in os.listdir(wd) if ".tmp" in n]


@pytest.mark.slow
def test_links_at_the_results_are_replaced_never_written_through(tmp_path, precious, caplog):
    wd, gone = tmp_path / "w", tmp_path / "outside" / "gone.json"
    names = ("results.json", "split_0.json", "cmc.png")
    _plant_links(wd, names, precious, gone)
    with caplog.at_level(logging.WARNING):
        res = pipeline.train_and_evaluate(_config(), str(wd))
    assert precious.read_text() == PRECIOUS and not gone.exists()
    _replaced(wd, names, caplog)
    assert json.loads((wd / "results.json").read_text())["mean"] == res["mean"]


@pytest.mark.slow
def test_a_finished_split_behind_a_link_is_not_read_but_redone(tmp_path, caplog):
    # a split_0.json planted as a link to a file outside the workdir (here a sound result
    # of another run): a rerun never reads through it, it redoes the split
    first = pipeline.train_and_evaluate(_config(), str(tmp_path / "a"))
    outside = tmp_path / "outside.json"
    outside.write_text((tmp_path / "a" / "split_0.json").read_text())
    wd = tmp_path / "b"
    pipeline.train_and_evaluate(_config(), str(wd))
    (wd / "split_0.json").unlink()
    (wd / "split_0.json").symlink_to(outside)
    with caplog.at_level(logging.WARNING):
        again = pipeline.train_and_evaluate(_config(), str(wd))
    assert "is a symbolic link" in caplog.text and "redo" in caplog.text.lower()
    assert not (wd / "split_0.json").is_symlink()
    assert again["mean"]["rank1"] == first["mean"]["rank1"]
    assert again["mean"]["mAP"] == first["mean"]["mAP"]


@pytest.mark.slow
def test_a_link_at_metrics_jsonl_is_replaced_never_appended_to(tmp_path, precious, caplog):
    wd, gone = tmp_path / "w", tmp_path / "outside" / "gone.jsonl"
    _plant_links(wd, ("metrics.jsonl", "model_split0.npz"), precious, gone)
    with caplog.at_level(logging.WARNING):
        pipeline.train_and_evaluate(_config("warca"), str(wd))
    assert precious.read_text() == PRECIOUS and not gone.exists()
    _replaced(wd, ("metrics.jsonl", "model_split0.npz"), caplog)
    rows = [json.loads(r) for r in (wd / "metrics.jsonl").read_text().splitlines()]
    assert rows and {r["split"] for r in rows} == {0}


def test_makedirs_enters_no_link_below_the_folder_it_is_given(tmp_path):
    """``writes.makedirs(path, within=root)``: a link at ``path`` or at any folder between
    ``root`` and it is refused naming it, nothing made in its target; links above ``root``
    are the user's (a workdir on a linked disk)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    os.symlink(outside, root / "a" / "b")
    for path in (root / "a" / "b", root / "a" / "b" / "c"):
        with pytest.raises(writes.InTheWayError, match=f"cannot write into {root / 'a' / 'b'}"):
            writes.makedirs(path, within=root)
        with pytest.raises(writes.InTheWayError):
            writes.makedirs(path, within=root / "a")
    assert os.listdir(outside) == []
    with pytest.raises(writes.InTheWayError):  # without a root: the folder itself
        writes.makedirs(root / "a" / "b")
    os.symlink(root, tmp_path / "linked_root")
    writes.makedirs(tmp_path / "linked_root" / "x" / "y", within=tmp_path / "linked_root")
    assert (root / "x" / "y").is_dir()


def test_a_link_at_a_temporary_name_is_never_opened(tmp_path, precious, monkeypatch):
    names = iter(["aaaaaaaa", "bbbbbbbb"])
    monkeypatch.setattr(writes.secrets, "token_hex", lambda n: next(names))
    taken = tmp_path / f".r.{os.getpid()}.aaaaaaaa.tmp.json"
    taken.symlink_to(precious)  # the first name tried: O_EXCL refuses it, the next is used
    run_files.write_json(str(tmp_path / "r.json"), {"a": 1})
    assert precious.read_text() == PRECIOUS and taken.is_symlink()
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": 1}
    assert sorted(os.listdir(tmp_path)) == sorted([taken.name, "outside", "r.json"])


@pytest.mark.parametrize("kind", ["link", "dangling", "fifo"])
def test_appending_never_follows_a_link_nor_opens_a_fifo(tmp_path, precious, kind):
    path = tmp_path / "metrics.jsonl"
    gone = tmp_path / "outside" / "gone.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(precious if kind == "link" else gone)

    def append():
        with writes.appending(str(path)) as write:
            write('{"step": 1}\n')

    error = _within(append, fifo=path)
    assert isinstance(error, writes.InTheWayError), error
    what = "a FIFO (named pipe)" if kind == "fifo" else "a symbolic link (to "
    assert str(error).startswith(f"cannot write {path}: it is {what}"), error
    assert precious.read_text() == PRECIOUS and not gone.exists()


def _images(folder, n=3):
    from PIL import Image

    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        paths.append(str(folder / f"img{i}.png"))
        Image.fromarray(rng.integers(0, 255, (32, 16, 3), dtype=np.uint8)).save(paths[-1])
    return paths


def test_links_at_a_feature_cache_entry_are_replaced_never_written_through(
    tmp_path, precious, caplog
):
    paths = _images(tmp_path)
    cache = tmp_path / "cache"

    def extract():
        return features.extract(paths, height=32, width=16, batch_size=4, cache_dir=cache)

    first = extract()
    entry = sorted(os.listdir(cache))
    gone = tmp_path / "outside" / "gone.npy"
    for name in entry:  # the array a link to the user's file, the record a dangling link
        os.remove(cache / name)
        (cache / name).symlink_to(precious if name.endswith(".json") else gone)
    with caplog.at_level(logging.WARNING):
        again = extract()
    np.testing.assert_array_equal(again, first)
    assert precious.read_text() == PRECIOUS and not gone.exists()
    assert sorted(os.listdir(cache)) == entry
    assert not any((cache / n).is_symlink() for n in entry)
    np.testing.assert_array_equal(extract(), first)  # the rewritten entry is read back


def test_a_fifo_at_a_feature_cache_entry_is_recomputed_not_opened(tmp_path, caplog):
    paths = _images(tmp_path)
    cache = tmp_path / "cache"

    def extract():
        return features.extract(paths, height=32, width=16, batch_size=4, cache_dir=cache)

    first = extract()
    (array,) = [cache / n for n in os.listdir(cache) if n.endswith(".npy")]
    os.remove(array)
    os.mkfifo(array)
    out = {}
    with caplog.at_level(logging.WARNING):
        error = _within(lambda: out.update(again=extract()), fifo=array)
    assert error is None, error
    np.testing.assert_array_equal(out["again"], first)
    assert "is a FIFO (named pipe), not a regular file" in caplog.text
    assert array.is_file()  # replaced by the recomputed array


# ----------------------------------------------------------- reads: regular files only


def _viper(tmp_path):
    root = fixture_trees.viper(tmp_path / "viper")
    return root, root / "cam_a" / "005_0.bmp", root / "cam_b" / "006_0.bmp"


@pytest.mark.parametrize(
    "make, which, error, problem",
    [
        (lambda a, b: a.symlink_to("/dev/zero"), 0, reads.NotARegularFileError,
         "(a symbolic link to /dev/zero) is a character device, not a regular file"),
        (lambda a, b: os.mkfifo(b), 1, reads.NotARegularFileError,
         "is a FIFO (named pipe), not a regular file"),
        (lambda a, b: a.symlink_to(a), 0, reads.NotARegularFileError,
         "is a symbolic link that loops"),
        (lambda a, b: b.symlink_to(b.parent / "nothing.bmp"), 1, FileNotFoundError,
         "is a dangling symbolic link (to "),
    ],
    ids=["link-to-dev-zero", "fifo", "looping-link", "dangling-link"],
)  # fmt: skip
def test_an_image_that_is_not_a_regular_file_is_refused_naming_it(
    tmp_path, make, which, error, problem
):
    root, cam_a, cam_b = _viper(tmp_path)
    make(cam_a, cam_b)
    bad = (cam_a, cam_b)[which]
    raised = _within(lambda: datasets.load("viper", root, num_test_ids=4), fifo=bad)
    assert isinstance(raised, error), raised
    message = str(raised)
    assert message.startswith(f"VIPeR: image {bad}") and problem in message, message
    assert message.endswith("expected a regular image file") and "\n" not in message


def test_a_fifo_given_as_an_image_is_refused_before_any_is_decoded(tmp_path):
    paths = _images(tmp_path)
    os.mkfifo(tmp_path / "pipe.png")
    paths.insert(1, str(tmp_path / "pipe.png"))
    error = _within(lambda: features.extract(paths, height=32, width=16), fifo=paths[1])
    assert isinstance(error, reads.NotARegularFileError), error
    assert str(error) == (
        f"image file {paths[1]} is a FIFO (named pipe), not a regular file; expected a "
        "regular image file"
    )


@pytest.mark.parametrize("ext", [".npz", ".mat", ".json"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_feature_file_that_is_not_a_regular_file_is_refused(tmp_path, ext, kind):
    path = tmp_path / f"features{ext}"
    os.mkfifo(path) if kind == "fifo" else path.symlink_to("/dev/zero")
    error = _within(lambda: datasets.load("features", path), fifo=path)
    assert isinstance(error, reads.NotARegularFileError), error
    what = "a FIFO (named pipe)" if kind == "fifo" else "a character device"
    assert str(error).startswith(f"feature file {path}") and f"is {what}, not a" in str(error)


def test_a_fifo_as_data_path_is_one_line_from_the_driver(tmp_path, capsys):
    path = tmp_path / "features.npz"
    os.mkfifo(path)
    c = _config()
    c.data.name, c.data.path = "npz", str(path)
    out = {}

    def run():
        out["line"] = one_line_exit(capsys, lambda: pipeline.train_and_evaluate(c, str(tmp_path)))

    assert _within(run, fifo=path) is None
    assert out["line"] == (
        f"error: feature file {path} is a FIFO (named pipe), not a regular file; expected a "
        "regular .npz file"
    )


# ------------------------------------------------- HDF5: no data from another file


def _v73(path, h5py, *, features=None):
    """A MATLAB v7.3-like feature file; ``features(f, array)`` stores its features."""
    labels = np.repeat(np.arange(1, 9), 4)
    feats = np.random.default_rng(1).normal(size=(len(labels), 5))
    with h5py.File(path, "w", userblock_size=512) as f:
        if features is None:
            f["features"] = feats.T
        else:
            features(f, feats.T)
        f["labels"] = labels[None].astype(np.float64)
        f["cams"] = (np.arange(len(labels)) % 2)[None].astype(np.float64)
    fixture_trees.matlab73_header(path)
    return feats


def _other_file(tmp_path, h5py, array):
    other = tmp_path / "outside" / "other.h5"
    other.parent.mkdir(exist_ok=True)
    with h5py.File(other, "w") as f:
        f["secret"] = array
    return other


def _external_storage(tmp_path, h5py):
    raw = tmp_path / "outside" / "secret.bin"
    raw.parent.mkdir(exist_ok=True)

    def store(f, array):
        raw.write_bytes(np.ascontiguousarray(array).tobytes())
        f.create_dataset(
            "features",
            shape=array.shape,
            dtype=array.dtype,
            external=[(str(raw), 0, raw.stat().st_size)],
        )

    return store, f"keeps its data in 1 external file(s), the first {raw}"


def _external_link(tmp_path, h5py):
    def store(f, array):
        other = _other_file(tmp_path, h5py, array)
        f["features"] = h5py.ExternalLink(str(other), "/secret")

    other = tmp_path / "outside" / "other.h5"
    return store, f"is an external link to '/secret' in the file {other}"


def _virtual(tmp_path, h5py):
    def store(f, array):
        other = _other_file(tmp_path, h5py, array)
        layout = h5py.VirtualLayout(shape=array.shape, dtype=array.dtype)
        layout[:] = h5py.VirtualSource(str(other), "secret", shape=array.shape)
        f.create_virtual_dataset("features", layout)

    return store, f"is a virtual dataset reading {tmp_path / 'outside' / 'other.h5'}"


def _soft_to_external(tmp_path, h5py):
    def store(f, array):
        other = _other_file(tmp_path, h5py, array)
        f["elsewhere"] = h5py.ExternalLink(str(other), "/secret")
        f["features"] = h5py.SoftLink("/elsewhere")

    return store, "is an external link to '/secret' in the file"


@pytest.mark.parametrize(
    "make, name",
    [(_external_storage, "/features"), (_external_link, "/features"), (_virtual, "/features"),
     (_soft_to_external, "/elsewhere")],
    ids=["external-storage", "external-link", "virtual-dataset", "soft-link-to-external"],
)  # fmt: skip
def test_a_v73_mat_that_reads_another_file_is_refused(tmp_path, make, name):
    h5py = pytest.importorskip("h5py")
    store, how = make(tmp_path, h5py)
    path = tmp_path / "f.mat"
    _v73(path, h5py, features=store)
    with pytest.raises(hdf5.ExternalDataError) as info:
        datasets.load("features", path, num_test_ids=4)
    message = str(info.value)
    assert message.startswith(f"{path}: {name!r} {how}"), message
    assert "expected a self-contained MATLAB v7.3 (HDF5) file" in message and "\n" not in message


def test_a_v73_mat_with_an_in_file_soft_link_still_loads(tmp_path):
    h5py = pytest.importorskip("h5py")

    def soft(f, array):
        f.create_group("data")["x"] = array
        f["features"] = h5py.SoftLink("/data/x")

    feats = _v73(tmp_path / "soft.mat", h5py, features=soft)
    ds = datasets.load("features", tmp_path / "soft.mat", num_test_ids=4)
    np.testing.assert_allclose(ds.features, feats.astype(np.float32))
    plain = _v73(tmp_path / "plain.mat", h5py)
    ds = datasets.load("features", tmp_path / "plain.mat", num_test_ids=4)
    np.testing.assert_allclose(ds.features, plain.astype(np.float32))


def test_a_classic_cuhk03_image_read_from_another_file_is_refused_before_any_is_written(
    tmp_path,
):
    h5py = pytest.importorskip("h5py")
    mat = tmp_path / "cuhk-03.mat"
    fixture_trees.cuhk03_classic_mat(mat)
    with h5py.File(mat, "r+") as f:  # one image cell now points at a virtual dataset
        cells = f["labeled_2"]
        image = f[cells[0, 0]]
        other = _other_file(tmp_path, h5py, image[()])
        layout = h5py.VirtualLayout(shape=image.shape, dtype=image.dtype)
        layout[:] = h5py.VirtualSource(str(other), "secret", shape=image.shape)
        virtual = f["#refs#"].create_virtual_dataset("stolen", layout)
        cells[0, 0] = virtual.ref
    with pytest.raises(hdf5.ExternalDataError, match=r"'/#refs#/stolen' is a virtual dataset"):
        datasets.load("cuhk03", tmp_path, protocol="classic")
    assert not (tmp_path / "images_labeled").exists()

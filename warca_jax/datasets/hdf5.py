"""MATLAB v7.3 (HDF5) files are read only when self-contained: nothing in them reads another file.

HDF5 lets an object of one file take its bytes from others: a dataset with external
storage (the raw bytes of another file, from an offset), an external link (a name that
opens an object of another file) and a virtual dataset (a view assembled from datasets of
other files). h5py follows all three without a word, so a `.mat` file could make the
bytes of any file the user can read (``/etc/passwd``, another user's data) the features
of a run. A `.mat` file that MATLAB writes uses none of them, so every object is checked
before any of its data is read, and each of the three is refused with an
``ExternalDataError`` naming the `.mat` file, the object and the file it would read.

* ``item(group, name, path)`` opens ``group[name]`` once every link on the way to it has
  been checked (``check_links``): hard links and soft links, which stay inside the file,
  are followed; an external link is refused before it is opened;
* ``deref(file, ref, path)`` opens the object an HDF5 object reference points to (one
  inside the file, as references always are);
* both check a dataset with ``check_dataset``: external storage
  (``get_external_count() > 0``) or a virtual layout (``is_virtual``) is refused.
"""

from __future__ import annotations

import posixpath

# Soft links followed on the way to one object before they count as a loop.
MAX_SOFT_LINKS = 32


class ExternalDataError(ValueError):
    """An HDF5 object that would read another file: refused, naming both files."""


def _refusal(path, name: str, how: str) -> ExternalDataError:
    return ExternalDataError(
        f"{path}: {name!r} {how}; expected a self-contained MATLAB v7.3 (HDF5) file whose "
        "data are all inside it: refusing to read another file through it"
    )


def check_links(file, name: str, path, *, followed: int = 0) -> None:
    """Checks every link from the root of ``file`` to ``name`` (a path in it), opening none.

    Raises:
      ExternalDataError: a link on the way is an external link (or of a kind h5py does
        not know), or soft links that loop.
    """
    import h5py

    here = "/"
    for part in name.split("/"):
        if part in ("", "."):
            continue
        target = posixpath.normpath(posixpath.join(here, part))
        link = file.get(target, getlink=True)
        if link is None or isinstance(link, h5py.HardLink):
            here = target  # a missing one: the caller's own lookup says so
        elif isinstance(link, h5py.ExternalLink):
            raise _refusal(
                path, target, f"is an external link to {link.path!r} in the file {link.filename}"
            )
        elif isinstance(link, h5py.SoftLink):
            if followed >= MAX_SOFT_LINKS:
                raise _refusal(path, target, f"is a soft link in a loop (to {link.path!r})")
            dest = posixpath.normpath(posixpath.join(here, link.path))
            check_links(file, dest, path, followed=followed + 1)
            here = dest
        else:
            raise _refusal(path, target, f"is a link of another kind ({type(link).__name__})")


def check_dataset(dataset, path, name: str | None = None) -> None:
    """Refuses a dataset that keeps its data in other files; reads none of its data.

    Raises:
      ExternalDataError: a virtual dataset, or one with external storage (both name the
        file it would read).
    """
    name = dataset.name if name is None else name
    if dataset.is_virtual:
        sources = sorted({source.file_name for source in dataset.virtual_sources()})
        raise _refusal(path, name, f"is a virtual dataset reading {', '.join(sources)}")
    plist = dataset.id.get_create_plist()
    count = plist.get_external_count()
    if count > 0:
        first = plist.get_external(0)[0]
        first = first.decode("utf-8", "replace") if isinstance(first, bytes) else str(first)
        raise _refusal(path, name, f"keeps its data in {count} external file(s), the first {first}")


def _checked(obj, path, name: str):
    import h5py

    if isinstance(obj, h5py.Dataset):
        check_dataset(obj, path, name)
    return obj


def item(group, name: str, path):
    """``group[name]`` once the links to it are checked, a dataset checked too (module
    docstring); ``path`` names the file in messages."""
    full = posixpath.join(group.name, name)
    check_links(group.file, full, path)
    return _checked(group[name], path, full)


def deref(file, ref, path):
    """``file[ref]`` (an object reference), a dataset checked (module docstring)."""
    obj = file[ref]
    return _checked(obj, path, obj.name or "an unnamed object")

"""Every file of a checkpoint, confined to the checkpoint's directory.

A checkpoint is a directory a user may receive from someone else, so its
contents are untrusted: a leaf's ``file`` in ``metadata.json`` may say
``../other``, a chunk or a leaf folder may be a symbolic link to a file
elsewhere (``/etc/passwd``), a FIFO would block a reader. Before anything is
opened, each path a restore (or ``save(force=True)``) reads is resolved, links
included: it must stay inside the checkpoint directory (links between files of
the checkpoint are fine) and be a regular file or a folder, or the checkpoint
is refused with an error naming the entry. Nothing outside is ever opened.
"""

from __future__ import annotations

import os
import stat

from jaxpp_mlir.errors import CheckpointError


def _inside(root: str, real: str) -> bool:
    """Whether the resolved path ``real`` is ``root`` or below it (``root`` resolved too)."""
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _refuse(what: str, entry: str, why: str) -> CheckpointError:
    return CheckpointError(
        f"{what}: {entry} {why}; a checkpoint's files all live inside its directory, so it is "
        f"refused before anything is read (it was changed after the save, or made by hand)"
    )


def _checked(path: str, root: str, entry: str, what: str, *, folder: bool = False) -> str:
    """``entry`` (relative to the checkpoint ``path``) resolved, once it is a regular file (a
    folder with ``folder``) inside the checkpoint; raises ``CheckpointError`` otherwise."""
    full = os.path.join(path, entry)
    real = os.path.realpath(full)
    if not _inside(root, real):
        link = "is a symbolic link to" if os.path.islink(full) else "resolves to"
        raise _refuse(what, entry, f"{link} {real}, outside the checkpoint directory")
    try:
        mode = os.stat(real).st_mode
    except OSError:
        return real  # missing: the reader names it
    if folder and not stat.S_ISDIR(mode):
        raise _refuse(what, entry, "is not a folder")
    if not folder and not stat.S_ISREG(mode):
        raise _refuse(what, entry, "is not a regular file (a FIFO, device or folder)")
    return real


def checkpoint_file(path: str, name: str, what: str) -> str:
    """The checkpoint's own file ``name`` (``metadata.json``...), resolved inside ``path``."""
    return _checked(path, os.path.realpath(path), name, what)


def leaf_files(path: str, folder: object, what: str) -> dict[str, str]:
    """Every file under a leaf's ``folder`` (its ``file`` in the metadata), by its path
    relative to ``path``, each resolved inside the checkpoint; raises ``CheckpointError``
    naming the first entry that is not (links are followed, each folder once)."""
    root = os.path.realpath(path)
    if not isinstance(folder, str) or not folder or os.path.isabs(folder):
        raise _refuse(what, repr(folder), "is not a folder inside the checkpoint")
    parts = os.path.normpath(folder).split(os.sep)
    if ".." in parts or parts == ["."]:
        raise _refuse(what, repr(folder), "is not a folder inside the checkpoint")
    top = _checked(path, root, folder, what, folder=True)
    if top == root:
        raise _refuse(what, repr(folder), "is the checkpoint directory itself")
    files: dict[str, str] = {}
    seen = {top}
    pending = [folder]
    while pending:
        current = pending.pop()
        try:
            names = sorted(os.listdir(os.path.join(path, current)))
        except OSError:
            continue  # missing: the manifest check or the reader names it
        for name in names:
            entry = os.path.join(current, name)
            full = os.path.join(path, entry)
            if os.path.isdir(full):
                real = _checked(path, root, entry, what, folder=True)
                if real not in seen:
                    seen.add(real)
                    pending.append(entry)
            else:
                files[os.path.normpath(entry)] = _checked(path, root, entry, what)
    return files


def replaceable(path: str, name: str) -> bool:
    """Whether the checkpoint's file ``name`` is a regular file of its own (no link), one
    that ``save(force=True)`` may read to decide that ``path`` is a checkpoint."""
    full = os.path.join(path, name)
    try:
        return stat.S_ISREG(os.lstat(full).st_mode)
    except OSError:
        return False

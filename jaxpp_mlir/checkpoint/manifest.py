"""A checkpoint's manifest: every file it holds and its checksum, written last.

Each process lists the files of the leaves it wrote (``checksums``);
process 0, once the metadata is written, writes ``manifest.json`` with every
process's list and the metadata's own checksum. A save interrupted
part-way has no manifest; a file deleted, edited or corrupted after the save
no longer matches it. ``verify_metadata`` and ``verify_leaf`` check that before
anything is read, and name the file, the leaf and the checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from jaxpp_mlir.checkpoint import confine
from jaxpp_mlir.errors import CheckpointError

MANIFEST = "manifest.json"
ALGORITHM = "sha256"


def _digest(file: str) -> str:
    with open(file, "rb") as handle:
        return hashlib.file_digest(handle, ALGORITHM).hexdigest()


def checksums(path: str, folders: list[str]) -> dict[str, str]:
    """The checksum of every file under ``folders`` (relative to the checkpoint ``path``)."""
    found = {}
    for folder in folders:
        for root, _, files in os.walk(os.path.join(path, folder)):
            for name in files:
                file = os.path.join(root, name)
                found[os.path.relpath(file, path)] = _digest(file)
    return found


def write(path: str, files: dict[str, str], metadata: str) -> None:
    """Writes the manifest of ``files`` and the metadata file: the save's last write."""
    manifest = {"algorithm": ALGORITHM, "metadata": _digest(os.path.join(path, metadata))}
    manifest["files"] = dict(sorted(files.items()))
    temporary = os.path.join(path, MANIFEST + ".tmp")
    with open(temporary, "w") as handle:
        json.dump(manifest, handle, indent=1)
    os.replace(temporary, os.path.join(path, MANIFEST))


def read(path: str) -> dict[str, Any]:
    """The manifest of the checkpoint at ``path``; raises ``CheckpointError`` when it has none."""
    file = os.path.join(path, MANIFEST)
    confine.checkpoint_file(path, MANIFEST, f"the checkpoint {path}")
    if not os.path.exists(file):
        what = "an incomplete checkpoint" if os.path.isdir(path) else "no checkpoint"
        raise CheckpointError(
            f"{path} is {what}: it has no {MANIFEST} (the save's last write; a save "
            f"interrupted part-way leaves none)"
        )
    try:
        with open(file, "rb") as handle:
            manifest = json.loads(handle.read().decode("utf-8"))
        if manifest.get("algorithm") != ALGORITHM or not isinstance(manifest.get("files"), dict):
            raise ValueError(f"not a {ALGORITHM} manifest")
    except (ValueError, AttributeError) as e:
        raise CheckpointError(f"{file} of the checkpoint {path} is unreadable: {e}") from None
    return manifest


def verify_metadata(path: str, manifest: dict[str, Any], metadata: str) -> None:
    real = confine.checkpoint_file(path, metadata, f"the checkpoint {path}")
    if _digest(real) != manifest.get("metadata"):
        raise CheckpointError(
            f"{os.path.join(path, metadata)} does not match its checksum in {MANIFEST}: the "
            f"checkpoint {path} was changed or damaged after it was saved"
        )


def verify_leaf(
    path: str, manifest: dict[str, Any] | None, item: dict[str, Any], present: dict[str, str]
) -> None:
    """Every file the save wrote for leaf ``item`` is there, unchanged, and no other
    (``present``: the files of its folder, by path relative to ``path``, each resolved
    inside the checkpoint). A version-1 checkpoint has no manifest (``None``): nothing to
    check against."""
    if manifest is None:
        return
    folder = os.path.normpath(item["file"]) + "/"
    expected = {f: c for f, c in manifest["files"].items() if f.startswith(folder)}
    leaf = f"leaf {item['path']} of the checkpoint {path}"
    if not expected:
        raise CheckpointError(f"{leaf}: {MANIFEST} lists no file of it ({folder})")
    for file, checksum in expected.items():
        if file not in present:
            raise CheckpointError(
                f"{leaf}: its file {file} is missing ({len(expected)} files were saved for it)"
            )
        if _digest(present[file]) != checksum:
            raise CheckpointError(
                f"{leaf}: its file {file} does not match its checksum in {MANIFEST} (changed "
                f"or damaged after the save)"
            )
    extra = sorted(set(present) - set(expected))
    if extra:
        raise CheckpointError(f"{leaf}: its folder holds {extra[0]}, which the save did not write")

"""The captured lowerings in tests/lit/inputs/ are what tests/lit/regenerate_inputs.py writes
on the running jax: a rerun on any supported jax leaves ``git diff`` empty (no absolute
paths of a checkout, no stale attribute)."""

from __future__ import annotations

import importlib.util
import os
import pathlib

import jax
import pytest

REPOSITORY_ROOT = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = REPOSITORY_ROOT / "tests" / "lit" / "regenerate_inputs.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("regenerate_inputs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


regenerate_inputs = _load_script()


@pytest.mark.parametrize("name", sorted(regenerate_inputs.CAPTURES))
def test_committed_capture_is_what_the_script_writes(name, monkeypatch):
    monkeypatch.chdir(REPOSITORY_ROOT)  # as the script does: locations relative to the root
    folder = regenerate_inputs.inputs_dir_for(jax.__version__)
    if not (folder / name).exists():
        folder = regenerate_inputs.INPUTS_DIR  # this jax lowers like the oldest one
    text = regenerate_inputs.CAPTURES[name]().as_text()
    committed = (folder / name).read_text()
    assert os.fspath(REPOSITORY_ROOT) not in text, "an absolute path of the checkout"
    assert text == committed, (
        f"{folder / name} is not what `python tests/lit/regenerate_inputs.py` writes on "
        f"jax {jax.__version__}: rerun it and review the diff"
    )

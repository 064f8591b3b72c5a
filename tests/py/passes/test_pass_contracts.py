"""What the pipeline trusts a pass to say about its run holds on every captured module.

Two shortcuts of ``run_pipeline`` rest on a pass's word:

- a pass that returns ``UNCHANGED`` is not followed by the verifier: the module must
  print exactly as it did before the pass;
- a ``requires`` entry that already ran in the same pipeline run is not looked for
  again: that pass's ``unfinished`` must indeed find nothing when it is skipped.

Both are checked here on every module captured in tests/lit/inputs/, partitioned as
users do (``partition`` on the module text), by recording each pass run.
"""

from __future__ import annotations

import dataclasses
import pathlib
import warnings
from collections.abc import Iterator

import pytest
import toolkit

import jaxpp_mlir as pp
from jaxpp_mlir.passes import base

INPUTS = sorted((pathlib.Path(__file__).resolve().parents[2] / "lit" / "inputs").glob("*.mlir"))
MPMD_DIM = 3
# Passes that only check the module: they must say so on every input.
CHECKS = ("jaxpp-check-host-callbacks", "jaxpp-verify-markers", "jaxpp-verify-program")
# Passes with nothing to do on a program without the form they rewrite (none of the
# captures has a layer scan split into stages): they must say so, changing nothing.
NOTHING_TO_DO = ("jaxpp-split-stacked-values",)


@dataclasses.dataclass
class Recorded:
    name: str
    changed: bool
    before: str
    after: str
    # Required passes not looked for again, and what their ``unfinished`` finds anyway.
    skipped_requirements: dict[str, base.Evidence | None]


@pytest.fixture
def recorded_runs(monkeypatch) -> Iterator[list[Recorded]]:
    runs: list[Recorded] = []
    original = base.PassRun.__call__

    def recording_call(self: base.PassRun, module, pass_) -> None:
        before = module.get_asm(enable_debug_info=True)
        original(self, module, pass_)
        skipped = {
            name: base.get_pass_class(name).unfinished(module)
            for name in self.pass_.requires
            if name in self.completed
        }
        after = module.get_asm(enable_debug_info=True)
        runs.append(Recorded(self.pass_.name, self.changed, before, after, skipped))

    monkeypatch.setattr(base.PassRun, "__call__", recording_call)
    yield runs


@pytest.mark.parametrize("path", INPUTS, ids=[path.stem for path in INPUTS])
def test_passes_keep_their_word(path: pathlib.Path, recorded_runs: list[Recorded]):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pp.PartitionWarning)
        pp.partition(path.read_text(), mesh=toolkit.lit_input_mesh(path, MPMD_DIM))
    assert recorded_runs, "no jaxpp pass ran"
    for run in recorded_runs:
        if not run.changed:
            assert run.after == run.before, f"{run.name} returned UNCHANGED but changed the IR"
        for required, evidence in run.skipped_requirements.items():
            assert evidence is None, (
                f"{run.name} skipped looking for {required}'s unfinished work, but there is "
                f"some: {evidence.what}"
            )
    unchanged = {run.name for run in recorded_runs if not run.changed}
    assert set(CHECKS) <= unchanged, f"checks that did not say UNCHANGED: {set(CHECKS) - unchanged}"
    idle = set(NOTHING_TO_DO)
    assert idle <= unchanged, (
        f"passes that changed a program they had nothing to do on: {idle - unchanged}"
    )
    assert any(run.skipped_requirements for run in recorded_runs), "no requirement was skipped"

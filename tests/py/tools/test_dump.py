"""``JAXPP_MLIR_DUMP_DIR``: partition() writes the IR before and after every pass and the program.

The step is the captured treduce MLP of the lit tests (2 stages, a microbatch
loop), partitioned over 2 ranks with the default schedule.
"""

from __future__ import annotations

import pathlib

import jax
import numpy as np
import pytest

import jaxpp_mlir as pp
from jaxpp_mlir.partition_options import DUMP_DIR
from jaxpp_mlir.passes.pipelines import default_pipeline

STEP = pathlib.Path(__file__).resolve().parents[2] / "lit" / "inputs" / "treduce_mlp.mlir"
NUM_RANKS = 2


@pytest.fixture(scope="module")
def dumped(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, pp.PartitionedProgram]:
    """Partitions the step with dump_dir=None and the environment variable set."""
    path = tmp_path_factory.mktemp("dump") / "nested" / "dir"  # created by partition
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:NUM_RANKS]), ("stage",)), "stage")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(DUMP_DIR.env, str(path))
        program = pp.partition(STEP.read_text(), mesh=mesh, dump_dir=None)
    return path, program


def test_writes_input_and_ir_after_every_pass_in_order(dumped):
    path, _ = dumped
    names = [element.name for element in default_pipeline(mpmd_dim=NUM_RANKS)]
    expected = ["00_input.mlir"] + [
        f"{index:02d}_after_{name}.mlir" for index, name in enumerate(names, start=1)
    ]
    assert sorted(p.name for p in path.iterdir() if p.is_file()) == expected
    texts = {name: (path / name).read_text() for name in expected}
    assert "module @jit_step" in texts["00_input.mlir"]
    assert 'jaxpp.marker = "loop"' in texts["00_input.mlir"]
    assert "func.call" not in texts[expected[names.index("jaxpp-inline-calls") + 1]]
    assert '"jaxpp.task"' not in texts["00_input.mlir"]
    outlined = names.index("jaxpp-outline-stages") + 1
    assert '"jaxpp.task"' in texts[expected[outlined]]
    assert '"jaxpp.task"' not in texts[expected[outlined - 1]]
    assert '"jaxpp.send"' in texts[expected[-1]]


def test_writes_the_program(dumped):
    path, program = dumped
    files = sorted(p.name for p in (path / "program").iterdir())
    stage_files = [f"{name}.mlir" for name in program.stage_modules]
    assert len(stage_files) >= NUM_RANKS
    assert files == sorted([*stage_files, "task_graph.mlir", "schedule.txt"])
    assert (path / "program" / "task_graph.mlir").read_text() == program.ir()
    assert (path / "program" / "schedule.txt").read_text() == program.schedule_text()
    for name, text in program.stage_modules.items():
        assert (path / "program" / f"{name}.mlir").read_text() == text


def test_dump_dir_argument_wins_over_the_environment(tmp_path, monkeypatch):
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:NUM_RANKS]), ("stage",)), "stage")
    monkeypatch.setenv(DUMP_DIR.env, str(tmp_path / "from_env"))
    pp.partition(STEP.read_text(), mesh=mesh, dump_dir=tmp_path / "from_argument")
    assert (tmp_path / "from_argument" / "00_input.mlir").is_file()
    assert not (tmp_path / "from_env").exists()

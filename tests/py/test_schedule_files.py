"""Schedule files in PyTorch pipelining's CSV action format (schedules/csv_format.py).

The files under tests/py/data were written by torch 2.13.0's own exporter
(``PipelineScheduleMulti._dump_csv`` of ``Schedule1F1B``/``ScheduleGPipe``'s
``_get_pipeline_order`` and ``ScheduleInterleaved1F1B``'s per-rank operations) for 4
ranks and 8 microbatches.
"""

from __future__ import annotations

import pathlib

import jax
import pytest
import toolkit

import jaxpp_mlir as pp
from jaxpp_mlir.schedules.csv_format import schedule_from_csv, schedule_to_csv

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

DATA = pathlib.Path(__file__).parent / "data"

ANY_COUNT = (4, 8, 9)
BUILT_IN = [  # (schedule, microbatch counts it runs)
    (pp.GPipe(4), ANY_COUNT),
    (pp.Std1F1B(4), ANY_COUNT),
    (pp.Eager1F1B(4), ANY_COUNT),
    (pp.Interleaved1F1B(8, 4), (4, 8)),  # a multiple of the rank count
    (pp.Interleaved1F1B(8, 4, fuse_steady_state=True), (4, 8)),
    (pp.ZeroBubble(4), ANY_COUNT),
    (pp.DualPipeV(8, 4), (8, 9)),  # at least the stage count
    (pp.DualPipeV(8, 4, split_backward=False), (8, 9)),
    (pp.DualPipeV(8, 4, fuse_overlapped=True), (8, 9)),
    (pp.Std1F1B(1), ANY_COUNT),
]
CASES = [(schedule, n) for schedule, counts in BUILT_IN for n in counts]


@pytest.mark.parametrize("schedule, num_microbatches", CASES, ids=[f"{s!r}-{n}" for s, n in CASES])
def test_every_built_in_round_trips(schedule, num_microbatches, tmp_path):
    expected = schedule.tasks(num_microbatches)
    path = tmp_path / "schedule.csv"
    text = schedule_to_csv(schedule, num_microbatches, path)
    assert path.read_text() == text
    loaded = schedule_from_csv(path)
    assert loaded.tasks(num_microbatches) == expected
    assert [loaded.stage_rank(s) for s in range(schedule.num_stages)] == [
        schedule.stage_rank(s) for s in range(schedule.num_stages)
    ]


def test_cells_follow_pytorch_action_names():
    text = schedule_to_csv(pp.ZeroBubble(2), 2)
    cells = {cell for line in text.splitlines() for cell in line.split(",") if cell}
    assert {"0F0", "1F0", "1I0", "1W0", "0I1", "0W1"} <= cells
    rows = text.splitlines()
    assert rows[1].startswith(",")  # rank 1 idles first, as in PyTorch's own orders
    fused = schedule_to_csv(pp.DualPipeV(4, 2, fuse_overlapped=True), 4)
    assert "OVERLAP_F_B" in fused and fused.count("(") == fused.count(")OVERLAP_F_B")


def test_a_pytorch_gpipe_file_is_our_gpipe():
    loaded = schedule_from_csv(DATA / "torch_gpipe_4ranks_8mb.csv")  # REDUCE_GRAD skipped
    assert loaded.num_microbatches == 8 and loaded.num_stages == 4
    assert loaded.tasks(8) == pp.GPipe(4).tasks(8)


def test_a_pytorch_interleaved_file_places_stages_round_robin():
    loaded = schedule_from_csv(DATA / "torch_interleaved1f1b_4ranks_8stages_8mb.csv")
    assert loaded.num_stages == 8 and loaded.mpmd_dim == 4
    assert [loaded.stage_rank(s) for s in range(8)] == [s % 4 for s in range(8)]


def test_a_pytorch_1f1b_file_with_a_wrong_microbatch_is_rejected():
    # torch 2.13's Schedule1F1B order for the last rank skips microbatch 0 and uses 8.
    with pytest.raises(pp.ScheduleError, match=r"(?s)torch_1f1b.*missing fwd_3__0"):
        schedule_from_csv(DATA / "torch_1f1b_4ranks_8mb.csv")


def test_a_pytorch_interleaved_file_runs_like_jit():
    schedule = schedule_from_csv(DATA / "torch_interleaved1f1b_4ranks_8stages_8mb.csv")
    # toolkit's MLP step, inputs from numpy: the stages and the jitted step are those of
    # the other tests of Interleaved1F1B(8, 4) over 8 microbatches (compiled once a run).
    params, batch = toolkit.mlp_params(8), toolkit.mlp_batch(8)
    lowered = toolkit.lower_cached(toolkit.mlp_train_step, params, batch)
    program = pp.partition(lowered, mesh=toolkit.make_mesh(4), schedule=schedule)
    got = program.compile()(params, batch)
    expected = jax.jit(toolkit.mlp_train_step)(params, batch)
    # Same ops per stage and gradients summed in microbatch order: bit for bit.
    toolkit.assert_matches_reference(got, expected, toolkit.SEPARATE_PROGRAMS)


@pytest.mark.parametrize(
    "text, message",
    [
        ("0F0,0X0\n", r"row 1 \(rank 0\), column 2: '0X0' is not a pipeline action"),
        ("0F0,F0\n", r"column 2: 'F0' is not a pipeline action"),
        ("0F,0B0\n", r"column 1: '0F' is not a pipeline action"),
        ("(0F0;zz)OVERLAP_F_B\n", r"'\(0F0;zz\)OVERLAP_F_B' is not a pipeline action"),
        ("\n\n", "holds no actions"),
        ("0F0,0B0\n1F0\n", r"(?s)incomplete schedule.*missing bwd_1__0"),
        ("0F0,0F0,0B0\n1F0,1B0\n", r"fwd_0__0: duplicate"),
        ("0B0,0F0\n1F0,1B0\n", "broken dependency order"),
        ("0F0,0B0,0F1,0B1\n1F0,1F1,1B0,1B1\n", "deadlock"),
        ("0F0,1B0\n1F0,0B0\n", "stage 1 appears on rank 0 and on rank 1"),
    ],
)
def test_malformed_files_are_rejected_clearly(text, message):
    with pytest.raises(pp.ScheduleError, match=message) as info:
        schedule_from_csv(text, text=True)
    assert str(info.value).startswith("schedule text")


def test_a_missing_file_is_named(tmp_path):
    missing = tmp_path / "nope.csv"
    with pytest.raises(pp.ScheduleError, match="cannot read schedule file .*nope.csv"):
        schedule_from_csv(missing)

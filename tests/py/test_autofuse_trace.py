"""A fused pipeline's measured order of launches, from a trace, against the simulated one."""

from __future__ import annotations

import json

import jax
import pytest
import toolkit
from toolkit import lower_cached, make_mesh, mlp_batch, mlp_params, mlp_train_step

import jaxpp_mlir as pp
from jaxpp_mlir.schedules import Task

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

shared_stage_compiles = toolkit.stage_compiles_shared_by_file()


def measured_rank_order(events: list[dict]) -> dict[int, list[tuple[Task, ...]]]:
    """Per rank, the loop's launches in device start order, each as the tasks it ran."""
    spans = [
        e
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") == "task"
        and ("kind" in e["args"] or "tasks" in e["args"])
    ]
    order: dict[int, list[tuple[Task, ...]]] = {}
    for span in sorted(spans, key=lambda e: e["ts"]):
        parts = span["args"].get("tasks") or [span["args"]]
        order.setdefault(span["tid"], []).append(
            tuple(Task(p["stage"], p["kind"], p["microbatch"]) for p in parts)
        )
    return order


@pytest.mark.parametrize(
    ("schedule", "num_microbatches"), [(pp.Std1F1B(4), 8), (pp.GPipe(2), 4)], ids=str
)
def test_measured_order_is_the_simulated_order(schedule, num_microbatches, tmp_path):
    params, batch = mlp_params(schedule.num_stages), mlp_batch(num_microbatches)
    lowered = lower_cached(mlp_train_step, params, batch)
    program = pp.partition(
        lowered, mesh=make_mesh(schedule.mpmd_dim), schedule=schedule, fuse_tasks=True
    )
    compiled = program.compile()
    compiled(params, batch)  # compiled and warm before the traced step
    path = tmp_path / "trace.json"
    with pp.program_trace(str(path)):
        outputs = compiled(params, batch)
    toolkit.assert_matches_reference(
        outputs, jax.jit(mlp_train_step)(params, batch), toolkit.SEPARATE_PROGRAMS
    )
    measured = measured_rank_order(json.loads(path.read_text())["traceEvents"])
    simulated = program.schedule.simulate(num_microbatches)
    expected = {
        rank: [item.parts for _, _, item in timeline]
        for rank, timeline in enumerate(simulated.timeline)
    }
    assert measured == expected
    assert any(len(parts) > 1 for row in measured.values() for parts in row)

"""Stage names: ``mark_stage_end(x, name=...)`` reaches the stage functions, the plan, the
summary and the trace's task spans; an unnamed stage stays unnamed everywhere."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import pytest
import toolkit
from jaxpp_mlir.runtime.observation.trace import program_trace

import jaxpp_mlir as pp

NAMES = {0: "embed", 2: "head"}  # stage 1 has no name


def loss_fn(params, microbatch):
    x, y = microbatch
    for stage, w in enumerate(params):
        x = pp.mark_stage_end(jnp.tanh(x @ w), name=NAMES.get(stage))
    return jnp.mean((x - y) ** 2)


def train_step(params, batch):
    losses, grads = pp.treduce(lambda mb: jax.value_and_grad(loss_fn)(params, mb), batch)
    return [p - 0.1 * g for p, g in zip(params, grads, strict=True)], losses


@pytest.fixture(scope="module")
def named(tmp_path_factory):
    params, batch = toolkit.mlp_params(3, 4), toolkit.mlp_batch(3, 2, 4)
    lowered = jax.jit(train_step).lower(params, batch)
    program = pp.partition(lowered, mesh=toolkit.make_mesh(3), schedule=pp.Std1F1B(3))
    path = tmp_path_factory.mktemp("trace") / "step.json"
    with program_trace(path):
        program.compile()(params, batch)
    with open(path) as handle:
        events = json.load(handle)["traceEvents"]
    return program, events


def test_the_plan_and_the_summary_name_the_named_stages(named):
    program, _ = named
    assert program.plan.stage_names == NAMES
    text = program.summary()
    assert "stage 0 (embed): params" in text and "stage 2 (head): params" in text
    assert "stage 1: params" in text


def test_stage_functions_carry_their_stage_name(named):
    program, _ = named
    for callee, text in program.stage_modules.items():
        (stage,) = [s for s in range(3) if callee.startswith(f"stage{s}_")] or [None]
        has_name = f'jaxpp.stage_name = "{NAMES.get(stage)}"' in text
        assert has_name == (stage in NAMES), callee
        assert ("jaxpp.stage_name" in text) == (stage in NAMES), callee


def test_trace_task_spans_carry_the_stage_name(named):
    _, events = named
    tasks = [e for e in events if e["ph"] == "X" and e.get("cat") == "task"]
    single = [e for e in tasks if "stage" in e["args"]]
    assert {e["args"]["stage"] for e in single} == {0, 1, 2}
    for e in single:
        assert e["args"].get("stage_name") == NAMES.get(e["args"]["stage"]), e

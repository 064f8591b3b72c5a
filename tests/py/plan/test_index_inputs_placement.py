"""The microbatch indices a program passes itself are placed once, where their readers take them."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import toolkit
from jaxpp_mlir.runtime.execution import arguments as placement

import jaxpp_mlir as pp

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics


@pytest.fixture(scope="module", params=[{"stage": 4}, {"stage": 4, "data": 2}], ids=str)
def compiled(request):
    params = toolkit.mlp_params(4)
    batch = toolkit.mlp_batch(4)
    lowered = toolkit.lower_cached(toolkit.mlp_train_step, params, batch)
    program = pp.partition(
        lowered, mesh=toolkit.mpmd_mesh(request.param), schedule=pp.Std1F1B(num_stages=4)
    )
    return program, program.compile(), params, batch


def test_index_inputs_exist(compiled):
    program, _, _, _ = compiled
    assert program.index_inputs, "a treduce loop over 4 microbatches reads its indices"


def test_the_indices_are_plan_constants_after_the_callers_inputs(compiled):
    program, step, _, _ = compiled
    plan = program.plan
    constants = plan.constants
    assert [c.input for c in constants] == list(range(plan.num_user_inputs, len(plan.inputs)))
    for constant in constants:
        binding = plan.inputs[constant.input]
        assert binding.ranks == (constant.rank,) and str(binding.spec) == "int32[]"
    # Every microbatch's index, once per rank whose loop tasks read it.
    readers = {c.rank for c in constants}
    assert sorted((c.value, c.rank) for c in constants) == [
        (m, r) for m in range(4) for r in sorted(readers)
    ]
    placed = step.executable.place_constants()
    for constant, array in zip(constants, placed, strict=True):
        assert int(array) == constant.value
        assert array.sharding in step.executable.input_shardings(constant.input)


def test_host_inputs_need_no_device_copy_at_any_call(compiled, monkeypatch):
    program, step, params, batch = compiled
    copied: list[int] = []
    batched_copy = placement._transfer.batched_copy

    def counting(arrays, *rest):
        copied.append(len(arrays))
        return batched_copy(arrays, *rest)

    device_put = jax.device_put

    def counting_device_put(x, *rest, **kwargs):
        copied.append(1)
        return device_put(x, *rest, **kwargs)

    monkeypatch.setattr(placement._transfer, "batched_copy", counting)
    monkeypatch.setattr(jax, "device_put", counting_device_put)
    host_params = [np.asarray(p) for p in params]
    host_batch = tuple(np.asarray(b) for b in batch)
    for _ in range(2):
        ours = step(host_params, host_batch)
    # Host values are put on their ranks directly; only device arrays are ever copied
    # (batched, or resharded by jax.device_put),
    # and the only device arrays passed are the program's own microbatch indices.
    assert copied == []
    toolkit.assert_matches_reference(
        ours, jax.jit(toolkit.mlp_train_step)(params, batch), toolkit.SEPARATE_PROGRAMS
    )

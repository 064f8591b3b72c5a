"""Every public name of NVIDIA JaxPP 0.9.2's ``jaxpp.api`` is in ``jaxpp_mlir.jaxpp``."""

from __future__ import annotations

import pytest

import jaxpp_mlir.jaxpp as jaxpp
from jaxpp_mlir.compat import schedules as jaxpp_schedules

# The public names ``jaxpp/api.py`` of JaxPP 0.9.2 (2026-05-01) defines or imports.
JAXPP_0_9_2_API = (
    "Add",
    "BaseSchedule",
    "Concat",
    "DualPipeV",
    "Eager1F1B",
    "Interleaved1F1B",
    "KimiK2",
    "Max",
    "MpmdArray",
    "MpmdMesh",
    "MpmdSharding",
    "Std1F1B",
    "ZeroBubble",
    "collect_task_times_ms",
    "cross_mpmd_all_reduce",
    "cross_mpmd_stack",
    "mark_stage_end",
    "mpmd_jit_by_yield",
    "mpmd_jit_with_loop",
    "mpmd_to_spmd_reshard",
    "pipeline_enter_stage",
    "place_with",
    "spmd_to_mpmd_reshard",
    "treduce",
    "treduce_i",
)
# Its JAX primitives: JaxPP internals behind cross_mpmd_all_reduce, cross_mpmd_stack and
# place_with (here plain array operations the partitioner places).
JAXPP_PRIMITIVES = ("add_multi_p", "gather_multi_p", "place_with_p")
# Names of ``jaxpp.schedules``, ``jaxpp.types`` and ``jaxpp.utils`` that JaxPP code imports.
JAXPP_OTHER_MODULES = ("InterleavedGPipe", "InterleavedBaseSchedule", "filter_axes", "GPipe")


@pytest.mark.parametrize("name", JAXPP_0_9_2_API + JAXPP_OTHER_MODULES)
def test_jaxpp_name_is_offered(name: str) -> None:
    assert hasattr(jaxpp, name), f"jaxpp_mlir.jaxpp lacks JaxPP's {name}"
    assert name in jaxpp.__all__
    assert getattr(jaxpp.api, name) is getattr(jaxpp, name)


def test_primitives_are_left_out_on_purpose() -> None:
    for name in JAXPP_PRIMITIVES:
        assert not hasattr(jaxpp, name)


@pytest.mark.parametrize(
    "name",
    ["BaseSchedule", "DualPipeV", "Eager1F1B", "GPipe", "Interleaved1F1B"]
    + ["InterleavedBaseSchedule", "InterleavedGPipe", "KimiK2", "Std1F1B", "ZeroBubble"],
)
def test_schedule_module_has_jaxpp_schedule_names(name: str) -> None:
    assert getattr(jaxpp_schedules, name) is getattr(jaxpp, name)

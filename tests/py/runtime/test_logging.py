"""What partition tells logging and warnings: a summary, pass timings, pass warnings."""

import dataclasses
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.mlir import ir
from jaxpp_mlir.runtime.liveness import spec_bytes
from jaxpp_mlir.runtime.plan import TensorSpec

import jaxpp_mlir as pp
from jaxpp_mlir import diagnostics, partition_log
from jaxpp_mlir.ir_context import parse_module
from jaxpp_mlir.passes.base import ModulePass
from jaxpp_mlir.passes.pipeline import make_element
from jaxpp_mlir.pipeline_run import PipelineRun


def two_stages(x, w0, w1):
    hidden = pp.pipeline_enter_stage(jnp.tanh(x @ w0))
    return pp.pipeline_enter_stage(jnp.tanh(hidden @ w1))


@pytest.fixture(scope="module")
def logged(request):
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(level=logging.DEBUG)
    root = logging.getLogger("jaxpp_mlir")
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        x, w = jnp.ones((4, 8)), jnp.ones((8, 8))
        devices = np.array(jax.devices()[:2])
        mesh = pp.MpmdMesh(jax.sharding.Mesh(devices, ("stage",)), "stage")
        program = pp.partition(jax.jit(two_stages).lower(x, w, w), mesh=mesh)
        program.compile()
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    return records


def _messages(records, name, level):
    return [r.getMessage() for r in records if r.name == name and r.levelno == level]


def test_partition_summary_at_info(logged):
    # Two stages on two ranks, one f32[4,8] activation (128 bytes) crossing.
    assert _messages(logged, "jaxpp_mlir.partition", logging.INFO) == [
        "partitioned into 2 stages on 2 ranks: 2 tasks, 1 transfers moving 128 bytes per step"
    ]


def test_each_pass_timed_at_debug(logged):
    timed = _messages(logged, "jaxpp_mlir.passes", logging.DEBUG)
    for name in ("jaxpp-choose-stages", "jaxpp-outline-stages", "jaxpp-insert-transfers"):
        assert any(m.startswith(f"pass {name}") and m.endswith(" ms") for m in timed), name


def test_compilations_logged_with_count_and_time(logged):
    compiled = _messages(logged, "jaxpp_mlir.runtime.compilation.compile", logging.DEBUG)
    assert compiled, "no compilation was logged"
    assert all(" s (compilation " in m for m in compiled)


def test_spec_bytes_knows_bfloat16():
    assert spec_bytes(TensorSpec((3, 5), "bfloat16")) == 30
    assert spec_bytes(TensorSpec((), "float64")) == 8


@dataclasses.dataclass(frozen=True)
class _Warns(ModulePass):
    """Test only: a warning at each "test.warn" op."""

    name = "jaxpp-test-warns"

    def run(self, module: ir.Operation) -> None:
        for op in module.regions[0].blocks[0].operations:
            if op.operation.name == "test.warn":
                diagnostics.warning(op, "suspicious op")


def test_pass_warnings_become_python_warnings():
    module = parse_module('"test.warn"() : () -> ()\n')
    with pytest.warns(partition_log.PassWarning, match="1:1: warning: suspicious op"):
        PipelineRun(module, None).run([make_element(_Warns())])

"""The layouts a multi-process set-up needs come from the plan; the key-value store
carries only those the plan leaves to XLA, as ``Layout`` data (pure: a fake exchange,
no processes)."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxpp_mlir.runtime import _jax_compat as jc
from jaxpp_mlir.runtime.instructions.run import RunStage
from jaxpp_mlir.runtime.multiprocess.distributed_setup import (
    Held,
    Placement,
    held_layouts,
    layout_data,
    layout_from_data,
    sharding_on,
)
from jaxpp_mlir.runtime.named_shardings import layout_sharding, sharding_layout
from jaxpp_mlir.runtime.plan import (
    ExecutionPlan,
    InputBinding,
    Layout,
    OutputBinding,
    StageExecutable,
    TensorSpec,
)

ROWS = Layout((("data", 2),), (("data",), ()))


class CountingExchange:
    """Answers ``gather`` with each process's part as given; records the names."""

    def __init__(self, parts: list[str]):
        self.parts = parts
        self.names: list[str] = []

    def gather(self, name: str, value: str) -> list[str]:
        self.names.append(name)
        return [value, *self.parts[1:]]


def _plan(output_layout: Layout | None) -> ExecutionPlan:
    """Rank 1 (process 1) makes value 1 from input 0, then outputs it."""
    spec = TensorSpec((4, 4), "float32")
    stage = StageExecutable(
        "stage",
        1,
        "",
        (TensorSpec((4, 4), "float32", ROWS),),
        (TensorSpec((4, 4), "float32", output_layout),),
    )
    return ExecutionPlan(
        2,
        {"stage": stage},
        (InputBinding(0, spec, (1,)),),
        (OutputBinding(1, 1, spec),),
        (RunStage(1, "stage", (0,), (1,)),),
    )


def _where() -> Placement:
    devices = jax.devices()
    return Placement(((devices[0], devices[1]), (devices[2], devices[3])), 0, 2, (0, 1), (0,))


def test_layouts_the_plan_fixes_need_no_exchange():
    exchange = CountingExchange([])
    held = {"output/0": Held(1, 1, 2), "input": Held(1, 0, 2), "free": Held(1, 7, 1)}
    layouts = held_layouts(_plan(ROWS), _where(), held, {}, exchange)
    assert exchange.names == []
    assert layouts == {
        "output/0": ROWS,  # its producer's output
        "input": ROWS,  # its first reader's input
        "free": Layout((("replicated", 2),), ((),)),  # neither: replicated
    }
    sharding = sharding_on(_where().rank_devices, 0, layouts["output/0"])
    assert isinstance(sharding, NamedSharding) and sharding.spec == PartitionSpec("data", None)
    assert sharding.device_set == set(_where().rank_devices[0])


def test_a_layout_left_to_xla_is_exchanged_once_from_its_process():
    split = Layout((("a0", 2),), (("a0",), ()))
    exchange = CountingExchange(["", json.dumps({"output/0": layout_data(split)})])
    held = {"output/0": Held(1, 1, 2), "input": Held(1, 0, 2)}
    layouts = held_layouts(_plan(None), _where(), held, {}, exchange)
    assert exchange.names == ["layouts"]
    assert layouts == {"output/0": split, "input": ROWS}
    sharding = sharding_on(_where().rank_devices, 1, layouts["output/0"])
    assert sharding.shard_shape((4, 4)) == (2, 4)


def test_layout_data_round_trips_through_json():
    layout = Layout((("a0", 2), ("a1", 4)), (("a1", "a0"), ()))
    assert layout_from_data(json.loads(json.dumps(layout_data(layout)))) == layout


SPECS = [
    PartitionSpec(),
    PartitionSpec("x"),
    PartitionSpec("y"),
    PartitionSpec(None, "x"),
    PartitionSpec(("y", "x")),
    PartitionSpec("y", "x"),
]


@pytest.mark.parametrize("spec", SPECS, ids=str)
@pytest.mark.parametrize("shape", [(2, 2), (2, 4)], ids=str)
def test_an_executable_sharding_reads_back_as_a_layout_of_the_same_placement(shape, spec):
    """What a process reads from a compiled executable (a sharding from its HLO proto,
    transposed device orders included) becomes a Layout that places every shard on the
    same device."""
    devices = jax.devices()[: int(np.prod(shape))]
    named = NamedSharding(Mesh(np.array(devices).reshape(shape), ("x", "y")), spec)
    compiled = jc.sharding_from_hlo_proto(devices, jc.hlo_sharding(named, 2).to_proto())
    layout = sharding_layout(compiled, devices, 2)
    assert layout is not None
    rebuilt = layout_sharding(layout, devices)
    assert rebuilt.devices_indices_map((8, 8)) == named.devices_indices_map((8, 8))


def test_a_sharding_over_other_devices_is_no_layout_of_these():
    devices = jax.devices()
    elsewhere = NamedSharding(Mesh(np.array(devices[4:6]), ("x",)), PartitionSpec("x"))
    assert sharding_layout(elsewhere, devices[:2], 2) is None


def test_ranks_of_one_device_need_no_layout():
    devices = jax.devices()
    where = Placement(((devices[0],), (devices[1],)), 0, 2, (0, 1), (0,))
    exchange = CountingExchange([])
    layouts = held_layouts(_plan(None), where, {"output/0": Held(1, 1, 2)}, {}, exchange)
    assert exchange.names == [] and layouts == {"output/0": None}
    assert sharding_on(where.rank_devices, 1, None) == jax.sharding.SingleDeviceSharding(devices[1])

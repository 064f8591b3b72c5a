"""The layouts a multi-process set-up needs come from the plan; the key-value store
carries only those the plan leaves to XLA (pure: a fake exchange, no processes)."""

from __future__ import annotations

import jax
from jax.sharding import NamedSharding, PartitionSpec
from jaxpp_mlir.runtime.multiprocess.distributed_setup import (
    Held,
    Placement,
    held_layouts,
    sharding_on,
)
from jaxpp_mlir.runtime.plan import (
    ExecutionPlan,
    InputBinding,
    Layout,
    OutputBinding,
    RunStage,
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
    exchange = CountingExchange(["", '{"output/0": "{devices=[2,1]<=[2]}"}'])
    held = {"output/0": Held(1, 1, 2), "input": Held(1, 0, 2)}
    layouts = held_layouts(_plan(None), _where(), held, {}, exchange)
    assert exchange.names == ["layouts"]
    assert layouts == {"output/0": "{devices=[2,1]<=[2]}", "input": ROWS}
    sharding = sharding_on(_where().rank_devices, 1, layouts["output/0"])
    assert sharding.shard_shape((4, 4)) == (2, 4)


def test_ranks_of_one_device_need_no_layout():
    devices = jax.devices()
    where = Placement(((devices[0],), (devices[1],)), 0, 2, (0, 1), (0,))
    exchange = CountingExchange([])
    layouts = held_layouts(_plan(None), where, {"output/0": Held(1, 1, 2)}, {}, exchange)
    assert exchange.names == [] and layouts == {"output/0": None}
    assert sharding_on(where.rank_devices, 1, None) == jax.sharding.SingleDeviceSharding(devices[1])

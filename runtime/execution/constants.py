"""Placing a plan's constants (its microbatch indices), once, where their readers are."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
from jax.sharding import Sharding

from ..plan import ExecutionPlan


def place_constants(
    plan: ExecutionPlan,
    rank_devices: Sequence[Sequence[jax.Device]],
    input_shardings: Callable[[int], Sequence[Sharding]],
) -> list[Any]:
    """``plan.constants`` as arrays to pass after the caller's arguments.

    A constant of this process's rank goes on the sharding its readers take (so
    no call copies it), or the rank's first device where they take several; one
    of another process's rank stays on the host (that process places its own).
    ``input_shardings(input)``: the shardings input ``input`` is read with here.
    """
    me = jax.process_index()
    placed: list[Any] = []
    for constant in plan.constants:
        devices = rank_devices[constant.rank]
        if devices[0].process_index != me:
            placed.append(constant.array())
            continue
        shardings = input_shardings(constant.input)
        where = shardings[0] if len(shardings) == 1 else devices[0]
        placed.append(jax.device_put(constant.array(), where))
    return placed

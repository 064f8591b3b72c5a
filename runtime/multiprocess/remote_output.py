"""``RemoteOutput``: an output of a distributed program held by another process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from ..errors import CallError
from ..plan import TensorSpec


class RemoteOutput:
    """An output of a distributed program that lives in another process.

    Its shape, dtype, rank and sharding (``NamedSharding`` over the rank's
    submesh, the stage's ``PartitionSpec``) are known; using its data here
    raises ``CallError``. Pass it back to the same program (it is forwarded
    where needed) or fetch everything with ``gather``. A placeholder with a
    ``loader`` (a leaf restored from a checkpoint into another process) is
    read by its loader where the program needs it in this process too.
    """

    __slots__ = ("call", "index", "loader", "process", "program", "rank", "sharding", "spec")

    def __init__(
        self,
        program: int,
        call: int,
        index: int,
        rank: int,
        process: int,
        spec: TensorSpec,
        sharding: Any = None,
        loader: Callable[[], np.ndarray] | None = None,
    ):
        self.program, self.call, self.index = program, call, index
        self.rank, self.process, self.spec = rank, process, spec
        self.sharding, self.loader = sharding, loader

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.spec.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.spec.dtype)

    @property
    def partition_spec(self) -> Any:
        """The ``PartitionSpec`` of its sharding (None if its sharding is unknown)."""
        return getattr(self.sharding, "spec", None)

    def _error(self) -> CallError:
        return CallError(
            f"output {self.index} ({self.spec}) is held by rank {self.rank} in process "
            f"{self.process}, not by this process ({jax.process_index()}); fetch it with "
            f"step.gather(outputs), called by every process"
        )

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise self._error()

    def __jax_array__(self) -> jax.Array:
        raise self._error()

    def __float__(self) -> float:
        raise self._error()

    def __int__(self) -> int:
        raise self._error()

    def __bool__(self) -> bool:
        raise self._error()

    def __getitem__(self, key: Any) -> Any:
        raise self._error()

    def item(self) -> Any:
        raise self._error()

    def block_until_ready(self) -> RemoteOutput:
        return self  # nothing to wait for in this process

    def is_ready(self) -> bool:
        return True

    def is_deleted(self) -> bool:
        return False

    def delete(self) -> None:
        pass

    def __repr__(self) -> str:
        where = f"RemoteOutput({self.spec} on rank {self.rank}, process {self.process}"
        return where + (f", {self.sharding})" if self.sharding is not None else ")")

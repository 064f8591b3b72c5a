"""``RemoteOutput``: an output of a distributed program held by another process."""

from __future__ import annotations

import concurrent.futures
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

    A small output (``shared``: its copy on its way from the holding process,
    see ``shared_outputs``) reads like an array here: ``np.asarray``,
    ``float``, ``item``, indexing and jax functions wait for that copy.
    """

    __slots__ = (
        "call",
        "index",
        "loader",
        "process",
        "program",
        "rank",
        "shared",
        "sharding",
        "spec",
    )

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
        shared: concurrent.futures.Future | None = None,
    ):
        self.program, self.call, self.index = program, call, index
        self.rank, self.process, self.spec = rank, process, spec
        self.sharding, self.loader, self.shared = sharding, loader, shared

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

    @property
    def ndim(self) -> int:
        return len(self.spec.shape)

    def value(self) -> np.ndarray:
        """This process's copy of a shared output (raises ``CallError`` for another one)."""
        if self.shared is None:
            raise self._error()
        return self.shared.result()

    def _error(self) -> CallError:
        return CallError(
            f"output {self.index} ({self.spec}) is held by rank {self.rank} in process "
            f"{self.process}, not by this process ({jax.process_index()}); fetch it with "
            f"step.gather(outputs), called by every process"
        )

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.value(), dtype=dtype)

    def __jax_array__(self) -> jax.Array:
        return jax.numpy.asarray(self.value())

    def __float__(self) -> float:
        return float(self.value())

    def __int__(self) -> int:
        return int(self.value())

    def __bool__(self) -> bool:
        return bool(self.value())

    def __getitem__(self, key: Any) -> Any:
        return self.value()[key]

    def __format__(self, format_spec: str) -> str:
        return format(self.value(), format_spec) if self.shared is not None else repr(self)

    def item(self) -> Any:
        return self.value().item()

    def block_until_ready(self) -> RemoteOutput:
        if self.shared is not None:
            self.shared.result()
        return self  # otherwise nothing to wait for in this process

    def is_ready(self) -> bool:
        return self.shared is None or self.shared.done()

    def is_deleted(self) -> bool:
        return False

    def delete(self) -> None:
        pass

    def __repr__(self) -> str:
        where = f"RemoteOutput({self.spec} on rank {self.rank}, process {self.process}"
        where += ", shared with every process" if self.shared is not None else ""
        return where + (f", {self.sharding})" if self.sharding is not None else ")")

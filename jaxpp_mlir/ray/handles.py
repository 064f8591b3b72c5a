"""``RayArray``: the driver's handle on an array that stays on a worker."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


def as_dtype(dtype: Any) -> np.dtype:
    """``dtype`` (a name such as "bfloat16" too) as a numpy dtype."""
    try:
        return np.dtype(dtype)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, str(dtype)))


class Owner(Protocol):
    """What a handle needs from its cluster: fetching and releasing by id."""

    def fetch(self, handles: list[RayArray]) -> list[np.ndarray]: ...

    def release(self, array_id: int) -> None: ...


class RayArray:
    """An array held by worker ``worker`` (on pipeline rank ``rank``), named by ``id``.

    Passing it back to a step of the same cluster uses the worker's copy; its
    data never crosses to the driver unless asked: ``np.asarray(x)``,
    ``float(x)`` or the cluster's ``gather``. A small one (a loss, a metric)
    arrives with the step's answer, so reading it costs nothing more. When the
    driver drops the handle, the workers drop the array (with the next message).
    """

    __slots__ = ("__weakref__", "_owner", "_value", "dtype", "id", "rank", "shape", "worker")

    def __init__(
        self,
        owner: Owner,
        array_id: int,
        shape: tuple[int, ...],
        dtype: Any,
        worker: int,
        rank: int = -1,
        value: np.ndarray | None = None,
    ):
        self._owner, self.id = owner, array_id
        self.shape, self.dtype = tuple(shape), as_dtype(dtype)
        self.worker, self.rank, self._value = worker, rank, value

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def fetched(self) -> bool:
        """Whether the driver already holds its data (a small output)."""
        return self._value is not None

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if self._value is None:
            self._value = self._owner.fetch([self])[0]
        return self._value if dtype is None else self._value.astype(dtype)

    def __float__(self) -> float:
        return float(np.asarray(self))

    def __int__(self) -> int:
        return int(np.asarray(self))

    def item(self) -> Any:
        return np.asarray(self).item()

    def __del__(self) -> None:
        owner = getattr(self, "_owner", None)
        if owner is not None:
            owner.release(self.id)

    def __repr__(self) -> str:
        return (
            f"RayArray({self.dtype}[{','.join(map(str, self.shape))}] on worker {self.worker}, "
            f"rank {self.rank}, id {self.id})"
        )

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

    An array of typed PRNG keys (``key_impl``: its PRNG implementation's name) is held
    as its ``uint32`` data (``shape`` and ``dtype`` are the data's; ``key_shape``
    and ``key_dtype`` the keys'); ``gather`` gives it back as a key array.
    """

    __slots__ = (
        "__weakref__",
        "_owner",
        "_value",
        "dtype",
        "id",
        "key_impl",
        "rank",
        "shape",
        "worker",
    )

    def __init__(
        self,
        owner: Owner,
        array_id: int,
        shape: tuple[int, ...],
        dtype: Any,
        worker: int,
        rank: int = -1,
        value: np.ndarray | None = None,
        key_impl: str | None = None,
    ):
        self._owner, self.id = owner, array_id
        self.shape, self.dtype = tuple(shape), as_dtype(dtype)
        self.worker, self.rank, self._value = worker, rank, value
        self.key_impl = key_impl

    def renamed(self, array_id: int, worker: int) -> RayArray:
        """A handle on array ``array_id`` of ``worker`` laid out like this one."""
        return RayArray(
            self._owner,
            array_id,
            self.shape,
            self.dtype,
            worker,
            self.rank,
            key_impl=self.key_impl,
        )

    @property
    def is_key(self) -> bool:
        """Whether it holds typed PRNG keys (as their ``uint32`` data)."""
        return self.key_impl is not None

    @property
    def key_shape(self) -> tuple[int, ...]:
        """The shape of its array of keys (its data's without the trailing key dimensions)."""
        if not self.is_key:
            raise AttributeError(f"{self!r} holds no PRNG keys")
        return self.shape[: len(self.shape) - len(_key_data_shape(self.key_impl))]

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

    def data(self) -> np.ndarray:
        """Its data on the driver (fetched once): a key array's ``uint32`` data."""
        if self._value is None:
            self._value = self._owner.fetch([self])[0]
        return self._value

    def as_host_value(self) -> Any:
        """What ``gather`` gives for it: its numpy data, or a jax array of its keys."""
        if not self.is_key:
            return self.data()
        import jax

        return jax.random.wrap_key_data(self.data(), impl=self.key_impl)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if self.is_key:
            from jaxpp_mlir.errors import CallError

            raise CallError(
                f"{self!r} holds typed PRNG keys, which numpy cannot hold: the cluster's "
                f"gather gives them as a jax key array (jax.random.key_data(key) for their "
                f"uint32 data)"
            )
        value = self.data()
        return value if dtype is None else value.astype(dtype)

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
        what = f"{self.dtype}[{','.join(map(str, self.shape))}]"
        if self.is_key:
            what = f"{self.key_impl} keys[{','.join(map(str, self.key_shape))}]"
        return f"RayArray({what} on worker {self.worker}, rank {self.rank}, id {self.id})"


def _key_data_shape(key_impl: Any) -> tuple[int, ...]:
    """The ``uint32`` data shape of one key of ``key_impl``."""
    import jax

    one = jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0, impl=key_impl)))
    return tuple(one.shape)

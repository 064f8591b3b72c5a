"""Argument checking and placement: each flat argument checked and put on its ranks.

``input_checks`` decides once, at compile time, how each program input is
checked and into which slots (one per rank that reads it) it goes, laid out
how; ``place_arguments`` does it on every call.

An input split into pieces (``InputBinding.pieces``) puts rows ``[start, stop)``
on each piece's rank: from a ``jax.Array`` whose shards on that rank's devices are
exactly those rows in the rank's layout (an array sharded along axis 0 over the
mpmd axis, as the step returns it) or from a ``StackedArray`` chunk of those rows,
the piece is the caller's own buffers (no copy); from anything else (a numpy array,
an array on other devices, a chunk of other rows) the rows are sliced and placed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Sharding

from .. import _jax_compat as jc
from .. import records
from .. import transfer as _transfer
from ..errors import CallError
from ..plan import ExecutionPlan, InputBinding, TensorSpec
from ..stacked_array import StackedArray
from . import pieces as _pieces
from . import replicated as _replicated
from .slots import ResolvedPlan

_ArrayImpl = jc.ArrayImpl  # the concrete jax.Array class: an exact type test is cheapest


@records.frozen
class Target:
    """One rank's copy of a program input: its slot and how it is laid out there."""

    slot: int
    sharding: Sharding
    devices: tuple[jax.Device, ...]  # the sharding's devices, in shard order
    shard_index: tuple | None  # per device, the index of its shard; None if replicated
    device_list: jc.DeviceList


@records.frozen
class InputCheck:
    """How argument ``index`` is checked and where its copies go."""

    index: int
    what: str  # "argument params['w'][0] (input 3)", for messages
    spec: TensorSpec
    shape: tuple[int, ...]
    dtype: np.dtype
    aval: Any  # jax.core.ShapedArray, for host-to-device puts
    targets: tuple[Target, ...]  # one per rank that reads the input
    # Rows [start, stop) placed as their own value (each piece checked as an input).
    pieces: tuple[tuple[int, int, InputCheck], ...] = ()


def make_target(slot: int, sharding: Sharding, shape: tuple[int, ...]) -> Target:
    device_list = _transfer.device_list(sharding)
    devices = tuple(device_list)
    index = None
    if not sharding.is_fully_replicated:
        index_map = sharding.addressable_devices_indices_map(shape)
        index = tuple(index_map[d] for d in devices)
    return Target(slot, sharding, devices, index, device_list)


def input_checks(plan: ExecutionPlan, resolved: ResolvedPlan) -> tuple[InputCheck, ...]:
    """Per program input, its check and its targets (an input no one reads stays home)."""
    return tuple(
        dataclasses.replace(
            _check(b.index, b.describe(), b.spec, b.ranks, resolved),
            pieces=_piece_checks(b, resolved),
        )
        for b in plan.inputs
    )


def _check(
    value: int, what: str, spec: TensorSpec, ranks: Sequence[int], resolved: ResolvedPlan
) -> InputCheck:
    """The check of ``value`` (of ``spec``) placed on ``ranks`` where anything reads it."""
    slots, where = resolved.slots, resolved.where
    shape, dtype = tuple(spec.shape), np.dtype(spec.dtype)
    return InputCheck(
        index=value,
        what=what,
        spec=spec,
        shape=shape,
        dtype=dtype,
        aval=jax.core.ShapedArray(shape, dtype),
        targets=tuple(
            make_target(where[(r, value)], slots[where[(r, value)]].sharding, shape)
            for r in ranks
            if slots[where[(r, value)]].last_use >= 0
        ),
    )


def _piece_checks(binding: InputBinding, resolved: ResolvedPlan) -> tuple:
    """Per piece value of ``binding``: its rows and its check (its ranks' targets)."""
    ranks: dict[int, list[int]] = {}
    for piece in binding.pieces:
        ranks.setdefault(piece.value, []).append(piece.rank)
    checks = []
    for piece in {p.value: p for p in binding.pieces}.values():
        what = f"{binding.describe()}, rows [{piece.start}, {piece.stop})"
        check = _check(piece.value, what, piece.spec, ranks[piece.value], resolved)
        if check.targets:
            checks.append((piece.start, piece.stop, check))
    return tuple(checks)


def place_arguments(args: Sequence[Any], checks: Sequence[InputCheck], env: list) -> None:
    """Checks each argument against its spec and puts it on every rank that reads it.

    Host values go through one ``batched_device_put`` per rank (7x faster
    than ``jax.device_put`` here), which copies them before the call
    returns, so the caller may overwrite its numpy buffer at once. An
    array already committed where it is needed is used as is; other device
    arrays are copied shard to shard, or resharded by ``jax.device_put``.
    """
    copy_from: list[jax.Array] = []
    copy_to: list[tuple[InputCheck, Target]] = []
    for x, check in zip(args, checks, strict=True):
        if type(x) is not _ArrayImpl and jax.dtypes.issubdtype(
            getattr(x, "dtype", None), jax.dtypes.prng_key
        ):
            x = jax.random.key_data(x)  # a typed PRNG key runs as its uint32 data
        if check.pieces:
            x = _place_pieces(x, check, env, copy_from, copy_to)
            if not check.targets:
                continue
        if type(x) is _ArrayImpl or isinstance(x, jax.Array):
            _place_array(x, check, env, copy_from, copy_to)
            continue
        _put_host(_host_value(x, check), check, env)
    if copy_from:
        moved = _transfer.batched_copy(
            copy_from,
            [t.device_list for _, t in copy_to],
            [t.sharding for _, t in copy_to],
            [_transfer.REUSE] * len(copy_to),
        )
        for (check, t), value in zip(copy_to, moved, strict=True):
            # A copy keeps its source's commitment.
            env[t.slot] = value if value.committed else commit(check, t, value)


def _put_host(x: np.ndarray, check: InputCheck, env: list) -> None:
    """Host data ``x`` (checked) copied onto every target of ``check``."""
    for t in check.targets:
        _put_host_on(x, check.aval, t, env)


def _put_host_on(x: np.ndarray, aval: Any, t: Target, env: list) -> None:
    shards = [x] * len(t.devices) if t.shard_index is None else [x[i] for i in t.shard_index]
    env[t.slot] = _transfer.device_put(aval, t.sharding, shards, t.devices)


def _place_pieces(
    x: Any,
    check: InputCheck,
    env: list,
    copy_from: list[jax.Array],
    copy_to: list[tuple[InputCheck, Target]],
) -> Any:
    """Puts each piece of argument ``x`` on its ranks; returns ``x`` as the ranks that
    read it whole take it (a ``StackedArray`` as host data)."""
    if isinstance(x, StackedArray):
        if x.shape != check.shape or x.dtype != check.dtype:
            raise mismatch(check, x.shape, x.dtype)
        host = None
        for start, stop, piece in check.pieces:
            chunk = next((c for c in x.chunks if c.rows == range(start, stop)), None)
            if chunk is not None and isinstance(chunk.array, jax.Array):
                _place_array(chunk.array, piece, env, copy_from, copy_to)
                continue
            host = np.asarray(x) if host is None else host  # rows across chunks: sliced
            _put_host(host[start:stop], piece, env)
        return x if host is None or not check.targets else host
    if type(x) is _ArrayImpl or isinstance(x, jax.Array):
        _check_array(x, check)
        host = None
        for start, stop, piece in check.pieces:
            for t in piece.targets:
                if _pieces.sliced_on_host(x, start, stop, t):
                    host = np.asarray(x) if host is None else host
                    _put_host_on(host[start:stop], piece.aval, t, env)
                else:
                    env[t.slot] = _pieces.rows_on(x, start, stop, piece.aval, t)
        return x
    host = _host_value(x, check)
    for start, stop, piece in check.pieces:
        _put_host(host[start:stop], piece, env)
    return host


def _check_array(x: jax.Array, check: InputCheck) -> None:
    """Raises ``CallError`` for a tracer, an array of another shape or dtype, a deleted one."""
    if type(x) is not _ArrayImpl and isinstance(x, jax.core.Tracer):
        raise CallError(
            f"{check.what} is a tracer: a compiled plan runs on "
            f"concrete arrays and cannot be called inside jax transformations"
        )
    if x.shape != check.shape or x.dtype != check.dtype:
        raise mismatch(check, x.shape, x.dtype)
    if x.is_deleted():
        raise CallError(f"{check.what} is a deleted (or donated) array")


def _place_array(
    x: jax.Array,
    check: InputCheck,
    env: list,
    copy_from: list[jax.Array],
    copy_to: list[tuple[InputCheck, Target]],
) -> None:
    """A device array: used as is where it is already laid out, else queued for a copy."""
    _check_array(x, check)
    current = x.sharding
    for t in check.targets:
        if current is t.sharding or current == t.sharding:
            # An uncommitted array (one device) is only re-labelled committed.
            env[t.slot] = x if x.committed else commit(check, t, x)
        elif t.shard_index is None and _replicated.covers(x, t.devices):
            # A step value already on every rank reading it (an earlier output).
            env[t.slot] = _replicated.part_on(x, check.aval, t.sharding, t.devices)
        elif _transfer.same_layout(current, t.sharding, x.ndim):
            copy_from.append(x)
            copy_to.append((check, t))
        else:
            env[t.slot] = jax.device_put(x, t.sharding)


def _host_value(x: Any, check: InputCheck) -> np.ndarray:
    """A host argument (numpy array or scalar, python scalar) as a checked numpy array."""
    if isinstance(x, np.ndarray):
        if x.shape != check.shape or x.dtype != check.dtype:
            raise mismatch(check, x.shape, x.dtype)
        return x
    if isinstance(x, np.generic):
        if x.shape != check.shape or x.dtype != check.dtype:
            raise mismatch(check, x.shape, x.dtype)
        return np.asarray(x)
    if isinstance(x, bool | int | float | complex):
        return scalar(check, x)
    raise CallError(
        f"{check.what} is a {type(x).__name__}; expected an array "
        f"of shape {check.shape} and dtype {check.dtype} (a jax or numpy array)"
    )


def commit(check: InputCheck, target: Target, x: jax.Array) -> jax.Array:
    """``x`` (uncommitted, so on one device, the target's) as an array committed there."""
    return jc.make_array(check.aval, target.sharding, [x])


def mismatch(check: InputCheck, shape: tuple[int, ...], dtype: Any) -> CallError:
    return CallError(
        f"{check.what} has shape {tuple(shape)} and dtype {dtype}, "
        f"but the program expects shape {check.shape} and dtype {check.dtype.name}"
    )


def scalar(check: InputCheck, x: bool | int | float | complex) -> np.ndarray:
    """A python scalar as a 0-d array of the argument's dtype (weakly typed, like jax)."""
    dtype = check.dtype
    if isinstance(x, bool):
        ok = dtype == np.bool_
    elif isinstance(x, int):
        ok = jax.numpy.issubdtype(dtype, np.number)
    elif isinstance(x, float):
        ok = jax.numpy.issubdtype(dtype, np.inexact)
    else:
        ok = jax.numpy.issubdtype(dtype, np.complexfloating)
    if check.shape != () or not ok:
        raise CallError(
            f"{check.what} is a python {type(x).__name__}, but the program expects "
            f"shape {check.shape} and dtype {dtype.name}"
        )
    try:
        return np.asarray(x, dtype=dtype)
    except (OverflowError, ValueError) as e:
        raise CallError(f"{check.what}: {x!r} does not fit in {dtype.name}") from e

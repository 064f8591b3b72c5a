"""Point-to-point transfers between processes as compiled collectives.

A transfer of values from rank A (devices a_0..a_{k-1}, in one process) to
rank B (devices b_0..b_{k-1}, in another) is a StableHLO module over the 2k
devices ``[a_0..a_{k-1}, b_0..b_{k-1}]`` holding one ``collective_permute`` per
value with source-target pairs ``(i, k + i)``: shard i of the value moves from
a_i to b_i. Its modules are built with the MLIR Python bindings (as the passes
build IR), never as text. Both processes compile the same module for the same device
assignment and execute it on their own devices: the sender feeds the value
(its output there is a discarded buffer), the receiver feeds a buffer of zeros
made once per call by a small executable (its output is the value). XLA runs
the permute over gloo on CPU and NCCL on GPU. One executable exists per
(shard shapes, source devices, destination devices), compiled before the first
transfer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.interpreters.mlir as jax_mlir
import numpy as np
from jax.extend.mlir.dialects import func, stablehlo  # loaded with several processes only
from jax.interpreters.mlir import ir

from .. import _jax_compat as jc
from ..dtypes import ELEMENT_TYPES
from ..errors import RuntimeFailure
from ..failure.exit_hooks import note_peer_caused_failure
from ..plan import TensorSpec


def permute_module(shards: Sequence[TensorSpec], group_size: int) -> str:
    """A module over ``2 * group_size`` partitions moving shard i of each operand
    from partition i to partition ``group_size + i``."""
    k = group_size
    pairs = np.array([[i, k + i] for i in range(k)], dtype=np.int64)

    def body(arguments: Sequence[ir.Value]) -> list[ir.Value]:
        return [
            stablehlo.CollectivePermuteOp(
                argument,
                ir.DenseIntElementsAttr.get(pairs),
                channel_handle=stablehlo.ChannelHandle.get(n + 1, _DEVICE_TO_DEVICE),
            ).result
            for n, argument in enumerate(arguments)
        ]

    return _module("jaxpp_transfer", 2 * k, shards, shards, body)


def zeros_module(shards: Sequence[TensorSpec], size: int) -> str:
    """A module over ``size`` partitions without arguments giving, on every device,
    zeros of each of ``shards``: the receive buffers of the permutes."""

    def body(arguments: Sequence[ir.Value]) -> list[ir.Value]:
        return [jax_mlir.ir_constant(_zeros_like_shard(s)) for s in shards]

    return _module("jaxpp_receive_buffers", size, (), shards, body)


# stablehlo's ChannelType DEVICE_TO_DEVICE: a collective between devices.
_DEVICE_TO_DEVICE = 1


def _module(
    name: str,
    partitions: int,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    body: Callable[[Sequence[ir.Value]], list[ir.Value]],
) -> str:
    """The printed module ``name`` of ``partitions`` partitions whose public ``@main``
    takes ``inputs`` and returns what ``body`` builds from its arguments (``outputs``)."""
    with jax_mlir.make_ir_context(), ir.Location.unknown():
        module = ir.Module.create()
        attributes = module.operation.attributes
        i32 = ir.IntegerType.get_signless(32)
        attributes["sym_name"] = ir.StringAttr.get(name)
        attributes["mhlo.num_partitions"] = ir.IntegerAttr.get(i32, partitions)
        attributes["mhlo.num_replicas"] = ir.IntegerAttr.get(i32, 1)
        types = ([_tensor_type(s) for s in inputs], [_tensor_type(s) for s in outputs])
        with ir.InsertionPoint(module.body):
            main = func.FuncOp("main", types)
            main.attributes["sym_visibility"] = ir.StringAttr.get("public")
            with ir.InsertionPoint(main.add_entry_block()):
                func.ReturnOp(body(list(main.arguments)))
        module.operation.verify()
        return str(module)


def _numpy_dtype(spec: TensorSpec) -> np.dtype:
    if spec.dtype not in ELEMENT_TYPES:
        raise RuntimeFailure(f"cannot transfer dtype {spec.dtype} between processes")
    return jax.numpy.dtype(spec.dtype)


def _tensor_type(spec: TensorSpec) -> ir.RankedTensorType:
    """The MLIR tensor type of ``spec``."""
    return ir.RankedTensorType.get(spec.shape, jax_mlir.dtype_to_ir_type(_numpy_dtype(spec)))


def _zeros_like_shard(spec: TensorSpec) -> np.ndarray:
    """Zeros of ``spec`` as a broadcast scalar (lowered as a constant and a broadcast)."""
    return np.broadcast_to(np.zeros((), dtype=_numpy_dtype(spec)), tuple(spec.shape))


class Lane:
    """The transfers over one set of devices (one communicator), one at a time.

    XLA's CPU client may start a collective before the previous one over the
    same devices has finished when their partitions run on different threads;
    two permutes in flight on one gloo communicator can then pair the wrong
    messages (observed as a hang with two devices per rank). A transfer
    therefore waits until the previous transfer of its lane is complete.
    """

    def __init__(self) -> None:
        self.last: list[jax.Array] | None = None

    def wait(self, owner: TransferExecutable) -> None:
        last, self.last = self.last, None
        if last:
            try:
                jax.block_until_ready(last)
            except Exception as e:
                raise owner.failure(e) from e


_lanes: dict[frozenset[int], Lane] = {}


def lane(devices: Sequence[jax.Device]) -> Lane:
    """The lane of the communicator over ``devices`` (shared by every program)."""
    return _lanes.setdefault(frozenset(d.id for d in devices), Lane())


class TransferExecutable:
    """A compiled transfer, as the single-process executor calls it.

    ``execute_sharded`` runs the collective (its outputs are watched by the
    watchdog until ready, and an error names the peer);
    ``get_parameter_shardings``/``get_output_shardings`` describe the local
    side only (the executor sees this process's rank, not the peer's devices).
    Results are rebuilt from this process's shards as arrays over the local
    rank's devices only (an array over the executable's 2k devices could not
    be copied within the process).
    """

    def __init__(
        self,
        exe: jc.LoadedExecutable,
        description: str,
        peer: int,
        specs: Sequence[TensorSpec],
        local_shardings: Sequence[Any],
        watchdog: Any,
        devices: Sequence[jax.Device] | None,
        *,
        takes_inputs: bool = True,
    ):
        self._exe = exe
        self._takes_inputs = takes_inputs
        self.lane = lane(devices) if devices is not None else None
        self.description = description
        self.peer = peer
        self.avals = [jax.core.ShapedArray(tuple(s.shape), np.dtype(s.dtype)) for s in specs]
        self.local_shardings = list(local_shardings)
        sharded = len(self.local_shardings[0].device_set) > 1 if self.local_shardings else False
        self._protos = (
            [
                jc.hlo_sharding(sh, len(a.shape)).to_proto()
                for sh, a in zip(self.local_shardings, self.avals, strict=True)
            ]
            if sharded
            else None
        )
        self._watchdog = watchdog

    def execute_sharded(self, arguments: Sequence[jax.Array]) -> _Results:
        if self.lane is not None:
            self.lane.wait(self)
        # The collective may block right here (gloo on CPU) until the peer joins: the
        # watchdog must know of the transfer before, or no timeout could fire.
        waiting = (
            self._watchdog.waiting(self.description, self.peer)
            if self._watchdog is not None
            else contextlib.nullcontext()
        )
        try:
            with waiting:
                results = self._exe.execute_sharded(arguments)
        except Exception as e:
            raise self.failure(e) from e
        return _Results(results, self)

    def failure(self, error: Exception) -> RuntimeFailure:
        """The error of a failed transfer, with what the peer last reported."""
        if self._watchdog is None:
            peer = f"process {self.peer} is probably lost"
        else:
            peer = self._watchdog.peer_report(self.peer)
            # The peer's end broke this transfer: the launcher names the peer first, though
            # the heartbeat thread may not have read its final state yet.
            note_peer_caused_failure(self._watchdog.process)
        return RuntimeFailure(f"the {self.description} failed: peer {peer}: {error}")

    def get_parameter_shardings(self) -> list[Any] | None:
        return self._protos if self._takes_inputs else []

    def get_output_shardings(self) -> list[Any] | None:
        return self._protos

    def hlo_modules(self) -> list[Any]:
        return self._exe.hlo_modules()


class _Results:
    """Wraps PJRT execute results so the transfer's outputs get watched."""

    def __init__(self, results: Any, owner: TransferExecutable):
        self._results = results
        self._owner = owner

    def consume_with_handlers(self, handlers: Sequence[Any] | None = None) -> list[jax.Array]:
        """The local outputs (``handlers`` are ignored: the layout is the transfer's)."""
        owner = self._owner
        try:
            shards = self._results.disassemble_into_single_device_arrays()
        except Exception as e:
            raise owner.failure(e) from e
        arrays = [
            per_device[0] if len(per_device) == 1 else jc.make_array(aval, sharding, per_device)
            for per_device, aval, sharding in zip(
                shards, owner.avals, owner.local_shardings, strict=True
            )
        ]
        if owner.lane is not None:
            owner.lane.last = arrays
        if owner._watchdog is not None and arrays:
            owner._watchdog.track(arrays[0], owner.description, owner.peer)
        return arrays


def shard_spec(spec: TensorSpec, sharding: Any) -> TensorSpec:
    """The per-device spec of ``spec`` laid out by ``sharding`` (a jax Sharding)."""
    return TensorSpec(tuple(sharding.shard_shape(tuple(spec.shape))), spec.dtype)


def zeros_like_spec(spec: TensorSpec) -> np.ndarray:
    """A host placeholder of ``spec`` that costs no memory (a broadcast zero)."""
    return np.broadcast_to(np.zeros((), dtype=np.dtype(spec.dtype)), tuple(spec.shape))

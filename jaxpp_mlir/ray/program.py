"""A partitioned program compiled on the workers, called from the driver."""

from __future__ import annotations

import itertools
import time
from typing import Any

from jaxpp_mlir.checkpoint.leaves import impl_name
from jaxpp_mlir.program import CompiledProgram
from jaxpp_mlir.ray.handles import RayArray
from jaxpp_mlir.ray.stacked import output_ids
from jaxpp_mlir.runtime.liveness import spec_bytes
from jaxpp_mlir.runtime.plan import ExecutionPlan
from jaxpp_mlir.runtime.stacked_array import Chunk, StackedArray


class RemoteExecutable:
    """Runs one step on every worker; returns the outputs as ``RayArray`` handles.

    What crosses per step: the arguments' ids (and any argument the driver holds
    itself, such as a batch, as host data, put once in Ray's object store), the ids
    the driver dropped, and back the small outputs: at most ``FETCH_MAX_BYTES``, and
    of a shape and dtype that no input has (a loss, a metric; not a parameter or an
    optimizer state that the next step takes back, which stays on the workers).
    """

    def __init__(
        self,
        cluster: Any,
        program_id: int,
        plan: ExecutionPlan,
        process_of: list,
        key_impls: tuple[Any, ...] | None = None,
    ):
        self.cluster, self.program_id, self.plan = cluster, program_id, plan
        # Per output, the PRNG implementation of a typed-key output (held as its data).
        self.key_impls = tuple(
            None if impl is None else impl_name(impl)
            for impl in (key_impls or (None,) * len(plan.outputs))
        )
        self.process_of = tuple(process_of)
        self.calls = itertools.count()
        self.last_step_s = 0.0
        from jaxpp_mlir.ray.cluster import FETCH_MAX_BYTES

        taken = {binding.spec for binding in plan.inputs}
        self.fetched = [
            j
            for j, out in enumerate(plan.outputs)
            if out.spec not in taken and spec_bytes(out.spec) <= FETCH_MAX_BYTES and not out.pieces
        ]

    def __call__(self, *flat: Any) -> list[RayArray]:
        import ray

        cluster = self.cluster
        cluster.check_running()  # before Ray is asked anything: it may be shut down
        call = next(self.calls)
        start = time.perf_counter()
        shipped = ray.put([cluster.to_workers(x) for x in flat])
        first = cluster.new_ids(output_ids(self.plan, 0)[0])
        _, ids = output_ids(self.plan, first)
        released = cluster.take_released()
        answers = cluster.wait(
            cluster.everyone("call", self.program_id, first, shipped, released, self.fetched),
            f"step {call} of program {self.program_id}",
            cluster.step_timeout_s,
        )
        small = {i: a for answer in answers for i, a in answer.items()}
        outputs: list[Any] = []
        for j, out in enumerate(self.plan.outputs):
            if out.pieces:
                outputs.append(self._stacked(out, ids[j]))
                continue
            worker = self.process_of[out.rank]
            handle = RayArray(
                cluster,
                first + j,
                out.spec.shape,
                out.spec.dtype,
                worker,
                out.rank,
                key_impl=self.key_impls[j],
            )
            handle._value = small.get(first + j)
            outputs.append(handle)
        self.last_step_s = time.perf_counter() - start
        return outputs

    def _stacked(self, out: Any, ids: list[int]) -> StackedArray:
        """An output made of pieces: a ``StackedArray`` of handles on each worker's pieces."""
        chunks = []
        for piece, array_id in zip(out.pieces, ids, strict=True):
            shape, dtype = piece.spec.shape, piece.spec.dtype
            worker = self.process_of[piece.rank]
            handle = RayArray(self.cluster, array_id, shape, dtype, worker, piece.rank)
            chunks.append(Chunk(range(piece.start, piece.stop), piece.rank, handle))
        return StackedArray(chunks)

    def __repr__(self) -> str:
        workers = len(set(self.process_of))
        return (
            f"RemoteExecutable(program {self.program_id}, {self.plan.num_ranks} ranks on "
            f"{workers} Ray workers)"
        )


class RayCompiledProgram(CompiledProgram):
    """A ``CompiledProgram`` whose ranks run on Ray workers; call it the same way.

    Its outputs are ``RayArray`` handles (a ``StackedArray`` of them for an output made of
    pieces on several ranks); ``gather`` fetches them to the driver.
    """

    @property
    def cluster(self) -> Any:
        return self.executable.cluster

    def gather(self, outputs: Any) -> Any:
        return self.cluster.gather(outputs)

    def __repr__(self) -> str:
        return f"RayCompiledProgram({self.program!r}, {self.executable!r})"

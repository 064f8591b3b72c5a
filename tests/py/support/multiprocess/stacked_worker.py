"""One process of the two-process run of stacked inputs split into pieces (run by the launcher).

STACKED_OUT=OUT_DIR stacked_worker.py

Ranks 0, 1 in process 0 and 2, 3 in process 1. For an even split (Std1F1B(4)), an uneven
one and an interleaved one (Interleaved1F1B(8, 4)) of ``stacked_programs``: three steps
fed back, checked against jax.jit (gathered); what each process holds (an even split: one
global array, this process's rows addressable; otherwise a StackedArray whose chunks of
the other process are RemoteOutputs); the even split's pieces placed from the array's own
buffers; a checkpoint of each saved by both processes and restored into the outputs'
places, bit for bit. Prints ``stacked ok (process N)``.
"""

from __future__ import annotations

import os
import sys

_TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(_TESTS, "support")]

from jaxpp_mlir.launch import initialize_from_env, pipeline_devices  # noqa: E402

initialize_from_env()

import jax  # noqa: E402
import numpy as np  # noqa: E402
import stacked_programs as sp  # noqa: E402
import toolkit  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402
from jaxpp_mlir.runtime.execution.arguments import place_arguments  # noqa: E402
from jaxpp_mlir.runtime.multiprocess.remote_output import RemoteOutput  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402
from jaxpp_mlir import checkpoint  # noqa: E402

CASES = {
    "even": ((2, 2, 2, 2), pp.Std1F1B(4)),
    "uneven": ((2, 1, 3, 2), pp.Std1F1B(4)),
    "interleaved": ((1,) * 8, pp.Interleaved1F1B(8, 4)),
}


def check_what_is_held(name: str, new_w, mesh: pp.MpmdMesh) -> None:
    me = jax.process_index()
    if name == "even":
        assert new_w.sharding == NamedSharding(mesh.jax_mesh, PartitionSpec("stage", None, None))
        assert not new_w.is_fully_addressable
        rows = sorted(s.index[0].start for s in new_w.addressable_shards)
        assert rows == ([0, 2] if me == 0 else [4, 6]), rows
        return
    assert isinstance(new_w, pp.StackedArray), new_w
    for chunk in new_w.chunks:
        remote = chunk.rank // 2 != me
        assert isinstance(chunk.array, RemoteOutput) == remote, (chunk, me)


def check_no_copy(step, new_w, same_b, xs) -> None:
    """The local pieces of the even split are this process's shards of the global arrays."""
    local = step.executable.local
    env = [None] * local.dispatch.num_slots
    args = [new_w, same_b, xs, *step._index_arrays]
    place_arguments(args, local._inputs, env)
    for position, given in ((0, new_w), (1, same_b)):
        own = {s.data.unsafe_buffer_pointer() for s in given.addressable_shards}
        for piece in local.plan.inputs[position].pieces:
            slot = local.dispatch.slot_of[(piece.rank, piece.value)]
            assert env[slot].unsafe_buffer_pointer() in own, (position, piece)


def main(out: str) -> None:
    me = jax.process_index()
    mesh = pp.MpmdMesh(Mesh(pipeline_devices(4).reshape(-1), ("stage",)), "stage")
    for name, (rows, schedule) in CASES.items():
        layout = sp.layout_for(schedule, rows)
        step = sp.program(layout, schedule, mesh).compile()
        w, b, xs = sp.inputs(layout, seed=2)
        got, want = (w, b), (w, b)
        for _ in range(3):
            *got, loss = step(*got, xs)
            *want, want_loss = sp.reference_step(layout.rows, *want, xs)
        check_what_is_held(name, got[0], mesh)
        if name == "even":
            check_no_copy(step, got[0], got[1], xs)
        host = step.gather([got[0], got[1], loss])
        toolkit.assert_matches_reference(
            host, [np.asarray(x) for x in (*want, want_loss)], toolkit.SEVERAL_STEPS
        )
        path = os.path.join(out, name)
        checkpoint.save(path, {"w": got[0], "b": got[1]})
        restored = checkpoint.restore(path, {"w": got[0], "b": got[1]})
        check_what_is_held(name, restored["w"], mesh)
        again = step.gather([restored["w"], restored["b"]])
        toolkit.assert_same_program(again, host[:2])
        stepped = step.gather(step(restored["w"], restored["b"], xs)[:2])
        toolkit.assert_same_program(stepped, step.gather(step(*got, xs)[:2]))
    print(f"stacked ok (process {me})", flush=True)


if __name__ == "__main__":
    main(os.environ["STACKED_OUT"])

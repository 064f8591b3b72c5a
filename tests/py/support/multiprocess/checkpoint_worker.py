"""One process of the multi-process checkpoint test (run by ``jaxpp_mlir.launch``).

checkpoint_worker.py OUT_DIR

Trains 3 steps, saves OUT_DIR/two_step3, trains 2 more; restores that
checkpoint and trains 2 (again); restores OUT_DIR/one_step3 (saved by one
process of 8 devices) and trains 2; restores two_step3 into a GPipe program
and trains 2; then both processes save to different paths, which each refuses.
Process 0 writes every resulting state to OUT_DIR/states.npz;
each process writes where its outputs say they live to OUT_DIR/placement_p<N>.json.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from jaxpp_mlir.launch import initialize_from_env, pipeline_devices  # noqa: E402

initialize_from_env()

import checkpoint_model as cm  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jaxpp_mlir.runtime.multiprocess.distributed import RemoteOutput  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402
from jaxpp_mlir import checkpoint  # noqa: E402


def where_outputs_live(step, state) -> dict[str, dict]:
    """Per leaf: its rank, PartitionSpec, submesh shape, and whether this process holds it."""
    result = {}
    placed = step.placement(state)
    flat = jax.tree_util.tree_flatten_with_path(state)[0]
    for (path, leaf), where in zip(flat, jax.tree.leaves(placed), strict=True):
        sharding = leaf.sharding
        assert isinstance(sharding, NamedSharding), (path, sharding)
        if not isinstance(leaf, RemoteOutput):
            assert jax.device_put(leaf, leaf.sharding).sharding == leaf.sharding
        result[jax.tree_util.keystr(path)] = {
            "ranks": list(where.mpmd_idxs),
            "spec": str(sharding.spec),
            "mesh": dict(sharding.mesh.shape),
            "remote": isinstance(leaf, RemoteOutput),
        }
    return result


def main(out: str) -> None:
    me = jax.process_index()
    programs = cm.compile_programs(pipeline_devices(cm.NUM_RANKS, cm.DEVICES_PER_RANK))
    std, gpipe = programs["std1f1b"], programs["gpipe"]
    params, opt_state, batch = cm.initial_state()

    step3 = cm.train(std, params, opt_state, batch, 3)
    checkpoint.save(os.path.join(out, "two_step3"), step3)
    after5 = cm.train(std, *step3, batch, 2)
    with open(os.path.join(out, f"placement_p{me}.json"), "w") as handle:
        json.dump(where_outputs_live(std, after5), handle)

    restored = checkpoint.restore(os.path.join(out, "two_step3"), after5)
    again5 = cm.train(std, *restored, batch, 2)
    from_one = checkpoint.restore(os.path.join(out, "one_step3"), after5)
    one5 = cm.train(std, *from_one, batch, 2)
    target = gpipe.placement(cm.train(gpipe, params, opt_state, batch, 1))
    into_gpipe = checkpoint.restore(os.path.join(out, "two_step3"), target)
    gpipe5 = cm.train(gpipe, *into_gpipe, batch, 2)

    states = {"after5": after5, "again5": again5, "one5": one5, "gpipe5": gpipe5}
    host = std.gather(states)
    if me == 0:
        arrays = {
            f"{name}/{jax.tree_util.keystr(path)}": leaf
            for name, state in host.items()
            for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]
        }
        np.savez(os.path.join(out, "states.npz"), **arrays)
    try:  # every process must save to the same path: each refuses (or hears of a
        # peer's refusal first), none hangs
        checkpoint.save(os.path.join(out, f"mismatch_p{me}"), step3)
    except (checkpoint.CheckpointError, pp.RuntimeFailure) as e:
        print(f"mismatched save refused: {e}", flush=True)
    try:  # a leaf process 1 cannot save: process 0 hears of it instead of waiting
        checkpoint.save(os.path.join(out, "bad_leaf"), {"x": object() if me == 1 else 1})
    except (checkpoint.CheckpointError, pp.RuntimeFailure) as e:
        print(f"bad leaf refused: {e}", flush=True)
    print("checkpoint worker: done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])

"""One process of the multi-process tests (run by ``jaxpp_mlir.launch``).

worker.py train OUT_DIR SCHEDULE...   train STEPS steps per schedule; process 0 writes
                                      OUT_DIR/<schedule>.npz (parameters and losses)
worker.py sharded OUT_DIR             two ranks of two devices (data parallel in a stage)
worker.py loop                        train forever, printing "step N" (to be killed)
worker.py deadlock                    a per-process-ordered plan must be rejected
worker.py all OUT_DIR                 deadlock, train (every schedule) and sharded in one
                                      launch (each prints its own result lines)
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from jaxpp_mlir.launch import initialize_from_env, pipeline_devices  # noqa: E402

initialize_from_env()

import jax  # noqa: E402
import model  # noqa: E402
import numpy as np  # noqa: E402
from jaxpp_mlir.runtime import compile as rt_compile  # noqa: E402
from jaxpp_mlir.runtime.distributed import RemoteOutput, compile_distributed  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402


def train(out_dir: str, schedules: list[str], programs: dict | None = None) -> None:
    devices = pipeline_devices(model.NUM_RANKS)
    for name in schedules:
        program = (programs or {}).get(name) or model.partition(name, devices)
        start = time.perf_counter()
        step, params, history = model.train(program)
        host = step.gather((params, history))
        remote = [
            x for x in jax.tree_util.tree_leaves((params, history)) if isinstance(x, RemoteOutput)
        ]
        assert remote, "every output is local"
        for x in remote:
            try:
                np.asarray(x)
            except pp.CallError as e:
                assert f"held by rank {x.rank} in process {x.process}" in str(e)
            else:
                raise AssertionError("a remote output was read")
        print("remote outputs refuse to be read", flush=True)
        took = time.perf_counter() - start
        if jax.process_index() == 0:
            np.savez(
                os.path.join(out_dir, f"{name}.npz"),
                *host[0],
                losses=np.stack(host[1]),
            )
        print(f"{name}: {model.STEPS} steps in {took:.2f} s (compile included)", flush=True)


def sharded(out_dir: str) -> None:
    program = model.partition_sharded(pipeline_devices(2, devices_per_rank=2))
    step, params, history = model.train(program)
    host = step.gather((params, history))
    if jax.process_index() == 0:
        np.savez(os.path.join(out_dir, "sharded.npz"), *host[0], losses=np.stack(host[1]))
    print("sharded: done", flush=True)


def loop() -> None:
    program = model.partition("std1f1b", pipeline_devices(model.NUM_RANKS))
    step = program.compile()
    params, batch = model.make_params(model.NUM_RANKS), model.make_batch()
    for n in range(100000):
        print(f"step {n}", flush=True)
        params, losses = step(params, batch)
        jax.block_until_ready((params, losses))


def deadlock(program: pp.PartitionedProgram | None = None) -> None:
    if program is None:
        program = model.partition("std1f1b", pipeline_devices(model.NUM_RANKS))
    devices = [program.mesh.rank_devices(r) for r in range(program.num_ranks)]
    before = rt_compile.compile_count
    try:
        compile_distributed(model.per_process_order(program.plan), devices)
    except pp.ScheduleError as e:
        assert rt_compile.compile_count == before, "compiled something before rejecting"
        print(f"REJECTED: {e}", flush=True)
        return
    raise SystemExit("the per-process-ordered plan was not rejected")


def run_all(out_dir: str) -> None:
    """The scenarios that can share one launch's processes (jax, jax.distributed and
    the 4-rank partitions set up once)."""
    devices = pipeline_devices(model.NUM_RANKS)
    programs = {name: model.partition(name, devices) for name in model.SCHEDULES}
    deadlock(programs["std1f1b"])
    train(out_dir, list(model.SCHEDULES), programs)
    sharded(out_dir)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "train":
        train(sys.argv[2], sys.argv[3:])
    elif mode == "sharded":
        sharded(sys.argv[2])
    elif mode == "loop":
        loop()
    elif mode == "deadlock":
        deadlock()
    elif mode == "all":
        run_all(sys.argv[2])
    else:
        raise SystemExit(f"unknown mode {mode}")

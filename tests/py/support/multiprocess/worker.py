"""One process of the multi-process tests (started directly by the tests).

worker.py all OUT_DIR        train STEPS steps per schedule (process 0 writes
                             OUT_DIR/<schedule>.npz: parameters and losses), two ranks of
                             two devices (OUT_DIR/sharded.npz), a per-process-ordered plan
                             rejected; then "scenarios done" and loop (to be killed)
worker.py train_loop OUT_DIR train per schedule as above, then "scenarios done" and loop
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
from jaxpp_mlir.runtime.compilation import compile as rt_compile  # noqa: E402
from jaxpp_mlir.runtime.multiprocess import coordination  # noqa: E402
from jaxpp_mlir.runtime.multiprocess.distributed import RemoteOutput, compile_distributed  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402


def compile_counting_exchanges(name: str, program: pp.PartitionedProgram) -> pp.CompiledProgram:
    """``program`` compiled; prints "NAME: N key-value exchanges" (those of its set-up)."""
    before = coordination.gather_count
    step = program.compile()
    print(f"{name}: {coordination.gather_count - before} key-value exchanges", flush=True)
    return step


def train(out_dir: str, schedules: list[str]) -> dict[str, pp.CompiledProgram]:
    """Trains with each schedule; returns the compiled steps by schedule."""
    devices = pipeline_devices(model.NUM_RANKS)
    steps = {}
    for name in schedules:
        program = model.partition(name, devices)
        start = time.perf_counter()
        step, params, history = model.train(program, step=compile_counting_exchanges(name, program))
        steps[name] = step
        host = step.gather((params, history))
        leaves = jax.tree_util.tree_leaves((params, history))
        remote = [
            (x, got)
            for x, got in zip(leaves, jax.tree_util.tree_leaves(host), strict=True)
            if isinstance(x, RemoteOutput)
        ]
        assert remote, "every output is local"
        for x, got in remote:
            if x.shared is not None:  # small: every process received the holder's copy
                np.testing.assert_array_equal(np.asarray(x), got)
                continue
            try:
                np.asarray(x)
            except pp.CallError as e:
                assert f"held by rank {x.rank} in process {x.process}" in str(e)
            else:
                raise AssertionError("a remote output was read")
        print("remote outputs read (small) or refused (large)", flush=True)
        took = time.perf_counter() - start
        if jax.process_index() == 0:
            np.savez(
                os.path.join(out_dir, f"{name}.npz"),
                *host[0],
                losses=np.stack(host[1]),
            )
        print(f"{name}: {model.STEPS} steps in {took:.2f} s (compile included)", flush=True)
    return steps


def sharded(out_dir: str) -> None:
    program = model.partition_sharded(pipeline_devices(2, devices_per_rank=2))
    step, params, history = model.train(
        program, step=compile_counting_exchanges("sharded", program)
    )
    host = step.gather((params, history))
    if jax.process_index() == 0:
        np.savez(os.path.join(out_dir, "sharded.npz"), *host[0], losses=np.stack(host[1]))
    print("sharded: done", flush=True)


def loop(step: pp.CompiledProgram) -> None:
    """Steps forever (until killed), printing "step N" before each."""
    params, batch = model.make_params(model.NUM_RANKS), model.make_batch()
    for n in range(100000):
        print(f"step {n}", flush=True)
        params, losses = step(params, batch)
        jax.block_until_ready((params, losses))


def deadlock() -> None:
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


def scenarios_then_loop(out_dir: str, *, all_scenarios: bool) -> None:
    """The scenarios that can share one launch's processes (jax and jax.distributed set
    up once), then the Std1F1B step in a loop: the launch ends with a process killed.
    Std1F1B is the first program compiled (heartbeats say "program 0, call N")."""
    steps = train(out_dir, list(model.SCHEDULES))
    if all_scenarios:
        sharded(out_dir)
        deadlock()
    print("scenarios done", flush=True)
    loop(steps["std1f1b"])


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode in ("all", "train_loop"):
        scenarios_then_loop(sys.argv[2], all_scenarios=mode == "all")
    else:
        raise SystemExit(f"unknown mode {mode}")

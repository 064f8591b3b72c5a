"""What union programs cost after the first step (``JAXPP_MLIR_MERGE_PROGRAMS``).

Run: python benchmarks/union_programs.py [--workloads W1,W2,S16] [--steps 10] [--rounds 6]

For each workload (those of ``benchmarks/first_step.py``), in one fresh process:

1. ``first-steps``: the step compiled with unions, called until every union member runs
   its own program (compiled in the background from the second call on). Printed: how
   long that took from the second call, the steps meanwhile (median) and how many.
2. Steady steps: the same partitioned step compiled ``off``, ``on`` and ``first-steps``
   (switched to the members' own programs by then), ``--rounds`` rounds of ``--steps``
   calls each, the three alternated; the median step (call until its results are ready)
   and the median host time of a call (until it returns: the dispatch).
3. Loading a program on another rank (XLA:CPU deserializes it for each rank's device):
   each union, and its members alone, median of 3.

The time to the first step with unions is ``first_step.py``'s, run with the variable set.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import first_step  # noqa: E402

MODES = ("off", "on", "first-steps")


def _compile(program, mode: str):
    os.environ["JAXPP_MLIR_MERGE_PROGRAMS"] = mode
    try:
        return program.compile()
    finally:
        del os.environ["JAXPP_MLIR_MERGE_PROGRAMS"]


def _load_ms(program) -> list[dict]:
    """Per union: its load on another device against its members', in ms (median of 3)."""
    import numpy as np
    from jaxpp_mlir.runtime import _jax_compat as jc
    from jaxpp_mlir.runtime.compilation import compile as runtime_compile
    from jaxpp_mlir.runtime.compilation import merge

    stages = program.plan.executables
    candidates = {}
    for name, stage in stages.items():
        candidates.setdefault(
            stage.mlir_module,
            merge.Candidate(
                name, stage.mlir_module, stage.input_specs, stage.output_specs, stage.aliases
            ),
        )
    source, target = program.mesh.rank_devices(0)[:1], program.mesh.rank_devices(1)[:1]
    client = source[0].client

    def load(name: str, text: str) -> float:
        serialized = runtime_compile.compile_stage(name, text, source).serialize()
        options = jc.get_compile_options(
            num_replicas=1,
            num_partitions=1,
            device_assignment=np.array([[target[0].id]]),
            backend=client,
        )
        seconds = []
        for _ in range(3):
            start = time.perf_counter()
            client.deserialize_executable(serialized, jc.device_list(target), options)
            seconds.append(time.perf_counter() - start)
        return statistics.median(seconds) * 1e3

    rows = []
    for union in merge.plan_merges(list(candidates.values())):
        members = {candidates[t].name: load(candidates[t].name, t) for t in union.members}
        rows.append({"union": union.name, "ms": load(union.name, union.text), "members": members})
    return rows


def run_child(workload: str, steps: int, rounds: int) -> dict:
    first_step._setup_child(workload, None)
    import jax
    import numpy as np

    import jaxpp_mlir as pp

    pp_step, _, pp_args, _, num_stages, schedule = first_step._model(workload)
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:num_stages]), ("stage",)), "stage")
    program = pp.partition(jax.jit(pp_step).trace(*pp_args).lower(), mesh=mesh, schedule=schedule)
    record: dict = {"workload": workload}

    tiered = _compile(program, "first-steps")
    jax.block_until_ready(tiered(*pp_args))
    started, meanwhile = time.perf_counter(), []
    while True:
        begin = time.perf_counter()
        jax.block_until_ready(tiered(*pp_args))
        meanwhile.append(time.perf_counter() - begin)
        if tiered.executable.tier_up.done.wait(0) or time.perf_counter() - started > 600:
            break
    record["switch_s"] = time.perf_counter() - started
    record["switch_steps"] = len(meanwhile)
    record["meanwhile_ms"] = statistics.median(meanwhile) * 1e3

    compiled = {"off": _compile(program, "off"), "on": _compile(program, "on")}
    compiled["first-steps"] = tiered
    step_ms: dict[str, list[float]] = {m: [] for m in MODES}
    host_ms: dict[str, list[float]] = {m: [] for m in MODES}
    for c in compiled.values():  # warm
        jax.block_until_ready(c(*pp_args))
    for _ in range(rounds):
        for mode, c in compiled.items():
            for _ in range(steps):
                begin = time.perf_counter()
                out = c(*pp_args)
                returned = time.perf_counter()
                jax.block_until_ready(out)
                step_ms[mode].append((time.perf_counter() - begin) * 1e3)
                host_ms[mode].append((returned - begin) * 1e3)
    record["step_ms"] = {m: statistics.median(v) for m, v in step_ms.items()}
    record["dispatch_ms"] = {m: statistics.median(v) for m, v in host_ms.items()}
    record["loads"] = _load_ms(program)
    record["loadavg"] = os.getloadavg()[0]
    return record


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", default="W1,W2,S16")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(args.child, args.steps, args.rounds)))
        return
    for workload in [w.strip() for w in args.workloads.split(",") if w.strip()]:
        command = [sys.executable, os.path.abspath(__file__), "--child", workload]
        command += ["--steps", str(args.steps), "--rounds", str(args.rounds)]
        done = subprocess.run(
            command, capture_output=True, text=True, env=first_step._child_env(), timeout=1800
        )
        if done.returncode != 0:
            sys.stderr.write(done.stderr[-4000:])
            raise SystemExit(f"{workload} failed with exit status {done.returncode}")
        r = json.loads([x for x in done.stdout.splitlines() if x.startswith("{")][-1])
        print(f"{workload} (load {r['loadavg']:.1f})")
        print(
            f"  first-steps: own programs {r['switch_s']:.2f} s after the second call, "
            f"{r['switch_steps']} steps meanwhile at {r['meanwhile_ms']:.1f} ms (median)"
        )
        for mode in MODES:
            print(
                f"  {mode:<12} step {r['step_ms'][mode]:7.2f} ms   "
                f"dispatch {r['dispatch_ms'][mode]:7.2f} ms"
            )
        for row in r["loads"]:
            members = ", ".join(f"{n} {ms:.1f}" for n, ms in row["members"].items())
            print(f"  load {row['union']}: {row['ms']:.1f} ms; members alone: {members}")
        print(json.dumps(r))


if __name__ == "__main__":
    main()

"""Where the library's import time goes on the way to the first step (issue 38).

Run: python benchmarks/import_cost.py [--workload W1] [--top 15] [--library CHECKOUT]

In one fresh process (the workload's devices, the library's bytecode as its first run left
it): the step is traced, lowered, partitioned, compiled and run once, the library's
modules loading as they do for a user, while ``dataclasses`` is timed: how many
dataclasses the library creates on that way and the seconds they take (with, for a
``records.frozen`` class, the shared methods it is given), in all and by module
(``--top`` rows), next to the wall time of the whole way. ``--library CHECKOUT`` times
another checkout's library instead (``git worktree add /tmp/before <rev>``), the before of
an A/B.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import first_step  # noqa: E402


def run_child(workload: str, library: str | None = None) -> dict:
    first_step._setup_child(workload, None)
    if library:
        first_step._use_library(library)
    import dataclasses
    import importlib.util

    import jax
    import numpy as np

    records = None  # a checkout from before records.frozen has none
    if importlib.util.find_spec("jaxpp_mlir.runtime.records") is not None:
        from jaxpp_mlir.runtime import records

    pp_step, _, pp_args, _, num_stages, schedule = first_step._model(workload)
    by_module: dict[str, list[float]] = {}
    create = dataclasses._process_class  # timed, then called unchanged
    share = records.share_methods if records else None  # timed with the class it finishes

    def timed(cls, *args, **kwargs):
        start = time.perf_counter()
        try:
            return create(cls, *args, **kwargs)
        finally:
            by_module.setdefault(cls.__module__, []).append(time.perf_counter() - start)

    def timed_share(cls):
        start = time.perf_counter()
        try:
            return share(cls)
        finally:
            by_module[cls.__module__][-1] += time.perf_counter() - start

    dataclasses._process_class = timed
    if records:
        records.share_methods = timed_share
    start = time.perf_counter()
    import jaxpp_mlir as pp

    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:num_stages]), ("stage",)), "stage")
    program = pp.partition(jax.jit(pp_step).trace(*pp_args).lower(), mesh=mesh, schedule=schedule)
    jax.block_until_ready(program.compile()(*pp_args))
    total = time.perf_counter() - start
    dataclasses._process_class = create
    if records:
        records.share_methods = share
    ours = {m: v for m, v in by_module.items() if m.startswith("jaxpp_mlir")}
    return {
        "workload": workload,
        "total_s": total,
        "dataclasses": sum(len(v) for v in ours.values()),
        "dataclass_s": sum(sum(v) for v in ours.values()),
        "by_module": {m: [len(v), sum(v)] for m, v in ours.items()},
        "others": sum(len(v) for m, v in by_module.items() if m not in ours),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", default="W1")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--library", help="another checkout's library, timed instead")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(args.child, args.library)))
        return
    command = [sys.executable, os.path.abspath(__file__), "--child", args.workload]
    if args.library:
        command += ["--library", os.path.abspath(args.library)]
    done = subprocess.run(
        command, capture_output=True, text=True, env=first_step._child_env(), timeout=900
    )
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"{args.workload} failed with exit status {done.returncode}")
    r = json.loads(done.stdout.strip().splitlines()[-1])
    print(
        f"{r['workload']}: trace to first step {r['total_s']:.3f} s; the library created "
        f"{r['dataclasses']} dataclasses in {r['dataclass_s'] * 1e3:.1f} ms "
        f"({r['dataclass_s'] / max(r['dataclasses'], 1) * 1e3:.2f} ms each)"
    )
    rows = sorted(r["by_module"].items(), key=lambda kv: -kv[1][1])[: args.top]
    for module, (count, seconds) in rows:
        print(f"  {seconds * 1e3:6.1f} ms {count:3d}  {module}")
    print(json.dumps(r))


if __name__ == "__main__":
    main()

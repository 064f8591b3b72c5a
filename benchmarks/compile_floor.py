"""What XLA charges per program: the floor under the pipelined step's compile (issue 38).

Run: python benchmarks/compile_floor.py [--workloads W1,W2,model:mamba2_nnx] [--repeats 5]
                                       [--merge]

For each workload (those of ``benchmarks/first_step.py``, or ``model:NAME`` for a model of
``examples/third_party_models.py`` with its own stages), in one fresh process: the
step is partitioned and compiled once (every one-time cost of the process paid), then
each distinct stage program (one per module text and device count, as the runtime
compiles them) is compiled again alone, one after the other, ``--repeats`` times, and
so is ``jax.jit``'s one program (its StableHLO text, through the same client and
options). Printed per program: the CPU milliseconds of one compilation (median over the
repeats; all threads, nothing else runs in the process), the kernels XLA:CPU built
for it (the object files of its LLVM kernel modules in a dump of that compilation) and
its outputs (a stage's forward returns the values its backward reads: each one a buffer
XLA must fill, often a kernel of its own);
then the sums next to ``jax.jit``'s, and the least-squares fit ``cost = base + per
kernel x kernels`` over every program compiled. Nothing here is concurrent or cached:
the sums are what the compiles cost on one core, a floor under the first step's
compile, which runs them on a thread per core (``first_step.py``).

With ``--merge`` the one-device programs are compiled as the union programs
``JAXPP_MLIR_MERGE_PROGRAMS=on`` makes of them (``runtime/compilation/merge.py``), each
union once: the kernels its members share are built once.

XLA:CPU deduplicates identical kernels within one compilation only: a ``jax.jit``
program that applies ``tanh`` to 8 layers builds one kernel for them, while each stage
program builds its own. So the pipelined step compiles more kernels than ``jax.jit``
(the same fusion once per stage program that has it) and pays a base cost per program.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
#: ``--workloads model:NAME``: a model of ``examples/third_party_models.py`` (its own step,
#: stages and schedule), e.g. ``model:mamba2_nnx``.
MODEL_PREFIX = "model:"
sys.path.insert(0, HERE)

import first_step  # noqa: E402


def _compile_cost(client, text: str, devices, repeats: int) -> tuple[float, int]:
    """(median CPU ms of one compilation of ``text``, kernels XLA built for it)."""
    import numpy as np
    from jaxpp_mlir.runtime import _jax_compat as jc

    def options():
        return jc.get_compile_options(
            num_replicas=1,
            num_partitions=len(devices),
            device_assignment=np.array([[d.id for d in devices]]),
            backend=client,
        )

    device_list = jc.device_list(devices)
    seconds = []
    for _ in range(repeats):
        start = time.process_time()
        client.compile_and_load(text, device_list, options())
        seconds.append(time.process_time() - start)
    with tempfile.TemporaryDirectory(prefix="jaxpp-floor-dump-") as dump:
        dumped = options()
        dumped.executable_build_options.debug_options.xla_dump_to = dump
        client.compile_and_load(text, device_list, dumped)
        kernels = len(glob.glob(os.path.join(dump, "*obj-file*")))
    return statistics.median(seconds) * 1e3, kernels


def _partitioned(workload: str):
    """(the partitioned program, ``jax.jit``'s lowered step) of ``workload``, each run once."""
    import jax
    import numpy as np

    import jaxpp_mlir as pp

    if workload.startswith(MODEL_PREFIX):
        sys.path.insert(0, os.path.join(first_step.ROOT, "examples"))
        import third_party_models as models

        model = models.MODELS[workload[len(MODEL_PREFIX) :]]()
        with model.mesh_context():
            program = models.partition(model)
            args = (*model.state, *model.inputs(0))
            jax.block_until_ready(program.compile()(*args))
            lowered = jax.jit(model.step).lower(*args)
            jax.block_until_ready(lowered.compile()(*args))
        return program, lowered
    pp_step, jit_step, pp_args, jit_args, num_stages, schedule = first_step._model(workload)
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:num_stages]), ("stage",)), "stage")
    program = pp.partition(jax.jit(pp_step).trace(*pp_args).lower(), mesh=mesh, schedule=schedule)
    jax.block_until_ready(program.compile()(*pp_args))
    lowered = jax.jit(jit_step).lower(*jit_args)
    jax.block_until_ready(lowered.compile()(*jit_args))
    return program, lowered


def _merged(program, compiled: list) -> list:
    """``compiled`` with the one-device programs grouped into union programs as the
    runtime groups them under ``JAXPP_MLIR_MERGE_PROGRAMS=on``."""
    from jaxpp_mlir.runtime.compilation.compile import union_programs

    jobs = [(name, text, tuple(devices)) for name, text, devices, _ in compiled]
    unions = union_programs(program.plan, jobs)
    held = {text for union in unions for text in union.members}
    devices = compiled[0][2][:1]
    return [
        *((u.name, u.text, devices, len(u.results)) for u in unions),
        *(c for c in compiled if c[1] not in held),
    ]


def run_child(workload: str, repeats: int, merge: bool = False) -> dict:
    first_step._setup_child(workload, None)
    import jax

    program, lowered = _partitioned(workload)
    distinct: dict[tuple[str, int], str] = {}
    for name, stage in program.plan.executables.items():
        devices = program.mesh.rank_devices(stage.rank)
        distinct.setdefault((stage.mlir_module, len(devices)), name)
    # (name, text, devices, outputs) of each program compiled: with --merge, the union
    # programs and the programs no union holds.
    compiled = [
        (
            name,
            text,
            program.mesh.rank_devices(program.plan.executables[name].rank),
            len(program.plan.executables[name].output_specs),
        )
        for (text, _), name in distinct.items()
    ]
    if merge:
        compiled = _merged(program, compiled)
    programs = []
    for name, text, devices, outputs in compiled:
        ms, kernels = _compile_cost(devices[0].client, text, devices, repeats)
        programs.append({"name": name, "cpu_ms": ms, "kernels": kernels, "outputs": outputs})
    jit_device = [jax.devices()[0]]
    jit_ms, jit_kernels = _compile_cost(
        jit_device[0].client, lowered.as_text(), jit_device, repeats
    )
    return {
        "workload": workload,
        "programs": programs,
        "jit": {"cpu_ms": jit_ms, "kernels": jit_kernels},
        "loadavg": os.getloadavg()[0],
    }


def _fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares ``ms = base + per_kernel * kernels``."""
    n = len(points)
    mean_k = sum(k for k, _ in points) / n
    mean_ms = sum(ms for _, ms in points) / n
    var = sum((k - mean_k) ** 2 for k, _ in points)
    per_kernel = sum((k - mean_k) * (ms - mean_ms) for k, ms in points) / var if var else 0.0
    return mean_ms - per_kernel * mean_k, per_kernel


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", default="W1,W2")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--merge",
        action="store_true",
        help="compile the union programs of JAXPP_MLIR_MERGE_PROGRAMS=on instead of "
        "each one-device program alone",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(args.child, args.repeats, args.merge)))
        return
    points = []
    for workload in [w.strip() for w in args.workloads.split(",") if w.strip()]:
        command = [sys.executable, os.path.abspath(__file__), "--child", workload]
        command += ["--repeats", str(args.repeats), *(["--merge"] if args.merge else [])]
        env = first_step._child_env()
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
        if done.returncode != 0:
            sys.stderr.write(done.stderr[-4000:])
            raise SystemExit(f"{workload} failed with exit status {done.returncode}")
        row = json.loads([x for x in done.stdout.splitlines() if x.startswith("{")][-1])
        load = row["loadavg"]
        print(f"{workload} (load {load:.1f}): CPU ms of one compilation, kernels, outputs")
        for p in sorted(row["programs"], key=lambda p: -p["cpu_ms"]):
            print(f"  {p['name']:<24} {p['cpu_ms']:8.1f} {p['kernels']:4d} {p['outputs']:4d}")
            points.append((p["kernels"], p["cpu_ms"]))
        total = sum(p["cpu_ms"] for p in row["programs"])
        kernels = sum(p["kernels"] for p in row["programs"])
        jit = row["jit"]
        points.append((jit["kernels"], jit["cpu_ms"]))
        label = f"sum of {len(row['programs'])} programs"
        print(f"  {label:<24} {total:8.1f} {kernels:4d}")
        print(f"  {'jax.jit (1 program)':<24} {jit['cpu_ms']:8.1f} {jit['kernels']:4d}")
        print(f"  ratio {total / jit['cpu_ms']:.2f}")
        print(json.dumps(row))
    base, per_kernel = _fit(points)
    print(f"fit over {len(points)} programs: {base:.1f} ms + {per_kernel:.1f} ms per kernel")


if __name__ == "__main__":
    main()

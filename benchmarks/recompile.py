"""Compiling a partitioned program again: the in-memory executable cache against none.

Run: python benchmarks/recompile.py [--schedules 1f1b,zerobubble]

For the README's main job (examples/train_mlp.py: 4 stages, optax Adam, 8 microbatches)
and each schedule, in one process: CPU seconds of ``program.compile()`` the first time
(stage modules an earlier schedule of the run compiled already come from memory),
again for the same devices, and for the same step partitioned over 4 other devices,
each repeat once with the runtime's in-memory executable cache on (the default) and once
off (``JAXPP_MLIR_EXECUTABLE_MEMORY_CACHE=0``), side by side. JAX's persistent cache is
kept out (``JAXPP_MLIR_COMPILATION_CACHE=0``), so every "off" compile is a compilation.
Every compiled program runs one step: within ``ULPS_ONE_STEP`` ulps of plain ``jax.jit``'s
(``max_ulps``, beside ``max_abs_diff``: the stage programs are separate programs, whose
reductions XLA:CPU rounds by the CPU's vector width), and, the same programs whether
compiled or taken from memory, bit for bit the first compile's (``same_as_first_compile``).
Prints a table, then one JSON line per row; exits 1 unless every row holds both.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ["JAXPP_MLIR_COMPILATION_CACHE"] = "0"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import jax  # noqa: E402
import numpy as np  # noqa: E402
import train_mlp as job  # noqa: E402
from reference import ULPS_ONE_STEP, environment, max_abs_diff, max_ulps, same_bits  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402


def _mesh(devices) -> pp.MpmdMesh:
    return pp.MpmdMesh(jax.sharding.Mesh(np.array(devices), ("stage",)), "stage")


def _cpu_seconds_to_compile(program, memory_cache: bool):
    with environment("JAXPP_MLIR_EXECUTABLE_MEMORY_CACHE", "256" if memory_cache else "0"):
        t0 = time.process_time()
        compiled = program.compile()
        return compiled, time.process_time() - t0


def measure(schedule_name: str) -> dict:
    params = job.init_params(jax.random.PRNGKey(0))
    opt_state = job.optimizer.init(params)
    shape = (job.MICROBATCHES, job.MICROBATCH_SIZE, job.WIDTH)
    rng = np.random.default_rng(0)
    batch = tuple(rng.standard_normal(shape, dtype=np.float32) for _ in range(2))
    lowered = jax.jit(job.train_step).lower(params, opt_state, batch)
    expected = jax.jit(job.train_step)(params, opt_state, batch)
    devices = jax.devices()
    programs = {
        "here": pp.partition(
            lowered, mesh=_mesh(devices[:4]), schedule=job.SCHEDULES[schedule_name]()
        ),
        "other devices": pp.partition(
            lowered, mesh=_mesh(devices[4:8]), schedule=job.SCHEDULES[schedule_name]()
        ),
    }
    record = {
        "schedule": schedule_name,
        "stages": job.NUM_STAGES,
        "max_abs_diff": 0.0,
        "max_ulps": 0.0,
        "same_as_first_compile": True,
    }
    runs = [
        ("first_s", "here", True),
        ("again_s", "here", True),
        ("again_without_cache_s", "here", False),
        ("other_devices_s", "other devices", True),
        ("other_devices_without_cache_s", "other devices", False),
    ]
    first = None
    for key, where, memory_cache in runs:
        compiled, seconds = _cpu_seconds_to_compile(programs[where], memory_cache)
        record[key] = seconds
        got = compiled(params, opt_state, batch)
        record["max_abs_diff"] = max(record["max_abs_diff"], max_abs_diff(got, expected))
        record["max_ulps"] = max(record["max_ulps"], max_ulps(got, expected))
        first = got if first is None else first
        record["same_as_first_compile"] &= same_bits(got, first)
    return record


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--schedules", default="1f1b,zerobubble")
    args = parser.parse_args()
    if len(jax.devices()) < 8:
        parser.error("needs 8 devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    records = [measure(name) for name in args.schedules.split(",")]
    print(
        f"program.compile() CPU seconds, main job ({job.NUM_STAGES} stages, "
        f"{job.MICROBATCHES} microbatches; load avg {os.getloadavg()[0]:.2f})"
    )
    print(
        f"{'schedule':<12} {'first':>6} {'again':>14} {'4 other devices':>16}  (off)"
        f"  ulps from jit  same bits"
    )
    for r in records:
        print(
            f"{r['schedule']:<12} {r['first_s']:>6.3f} "
            f"{r['again_s']:>6.3f} ({r['again_without_cache_s']:.3f}) "
            f"{r['other_devices_s']:>7.3f} ({r['other_devices_without_cache_s']:.3f})"
            f"  {r['max_ulps']:>13.3g}  {r['same_as_first_compile']!s:>9}"
        )
    for r in records:
        print(json.dumps(r))
    holds = all(r["max_ulps"] <= ULPS_ONE_STEP and r["same_as_first_compile"] for r in records)
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())

"""A process of the persistent compilation cache tests (``test_compilation_cache.py``).

compilation_cache_worker.py single OUT_DIR PHASES_JSON
    one process; each phase partitions, compiles and runs the step of ``model``, then
    writes OUT_DIR/phase<i>.npz (the outputs) and OUT_DIR/phase<i>.json (the stage
    executables made, persistent-cache hits and misses of the phase, and the number of
    jaxpp_mlir entries in the cache directory after it). A phase is a dict:
    ``width`` (model width), ``first`` (first device of its 2 ranks), ``cache`` (the
    value of JAXPP_MLIR_COMPILATION_CACHE, default 1) and ``min_compile_secs``
    (jax_persistent_cache_min_compile_time_secs, default 0).
compilation_cache_worker.py multi OUT_DIR
    one process of a ``jaxpp_mlir.launch`` run with one rank per process; writes
    OUT_DIR/process<i>.json (the same counts) and, from process 0, OUT_DIR/outputs.npz.

The test imports this module for ``make_inputs`` and ``step`` (its reference is plain
``jax.jit`` of ``step``); the XLA device count must be set before jax is imported.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

NUM_RANKS = 2
NUM_MICROBATCHES = 2
MICROBATCH_SIZE = 4
CACHE_ENTRY_PREFIX = "jaxpp_mlir-"


def make_inputs(width: int):
    """Parameters of 2 stages and a batch of 2 microbatches, from numpy (nothing compiles)."""
    import numpy as np

    rng = np.random.default_rng(width)
    params = [
        (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        for _ in range(NUM_RANKS)
    ]
    shape = (NUM_MICROBATCHES, MICROBATCH_SIZE, width)
    batch = tuple(rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    return params, batch


def _loss(params, microbatch):
    import jax.numpy as jnp

    import jaxpp_mlir as pp

    x, y = microbatch
    for w in params:
        x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
    return jnp.mean((x - y) ** 2)


def step(params, batch):
    """One SGD step: losses per microbatch from a pipelined treduce, and the parameters
    updated by their summed gradients (each rank's update is the same module, so one
    executable is compiled and rebound to the other rank)."""
    import jax

    import jaxpp_mlir as pp

    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(_loss)(params, mb), batch, operation=(pp.Concat(), pp.Add)
    )
    return [p - 0.1 * g for p, g in zip(params, grads, strict=True)], losses


def _cache_entries() -> int:
    directory = pathlib.Path(os.environ["JAX_COMPILATION_CACHE_DIR"])
    if not directory.is_dir():
        return 0
    return sum(1 for p in directory.iterdir() if p.name.startswith(CACHE_ENTRY_PREFIX))


def _run(width: int, devices) -> tuple:
    """Partitions, compiles and runs ``step`` on ``devices``; returns the compiled step,
    its outputs and the counts of the compilation."""
    import jax
    import numpy as np
    from jaxpp_mlir.runtime.compilation import compile as rt_compile
    from jaxpp_mlir.runtime.compilation import executable_cache

    import jaxpp_mlir as pp

    params, batch = make_inputs(width)
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.asarray(devices), ("stage",)), "stage")
    program = pp.partition(
        jax.jit(step).lower(params, batch), mesh=mesh, schedule=pp.Std1F1B(NUM_RANKS)
    )
    made, (hits, misses) = rt_compile.compile_count, executable_cache.stats()
    compiled = program.compile()
    outputs = compiled(params, batch)
    now_hits, now_misses = executable_cache.stats()
    counts = {
        "made": rt_compile.compile_count - made,
        "hits": now_hits - hits,
        "misses": now_misses - misses,
    }
    return compiled, outputs, counts


def single(out_dir: str, phases: list[dict]) -> None:
    import jax
    import numpy as np

    for index, phase in enumerate(phases):
        os.environ["JAXPP_MLIR_COMPILATION_CACHE"] = str(phase.get("cache", 1))
        jax.config.update(
            "jax_persistent_cache_min_compile_time_secs", float(phase.get("min_compile_secs", 0))
        )
        first = phase.get("first", 0)
        _, outputs, counts = _run(phase["width"], jax.devices()[first : first + NUM_RANKS])
        leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(outputs)]
        np.savez(os.path.join(out_dir, f"phase{index}.npz"), *leaves)
        counts["entries"] = _cache_entries()
        pathlib.Path(out_dir, f"phase{index}.json").write_text(json.dumps(counts))


def multi(out_dir: str) -> None:
    from jaxpp_mlir.launch import initialize_from_env, pipeline_devices

    initialize_from_env()
    import jax
    import numpy as np

    compiled, outputs, counts = _run(8, pipeline_devices(NUM_RANKS).reshape(-1))
    host = compiled.gather(outputs)
    process = jax.process_index()
    if process == 0:
        leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(host)]
        np.savez(os.path.join(out_dir, "outputs.npz"), *leaves)
    pathlib.Path(out_dir, f"process{process}.json").write_text(json.dumps(counts))


if __name__ == "__main__":
    if sys.argv[1] == "single":
        single(sys.argv[2], json.loads(sys.argv[3]))
    elif sys.argv[1] == "multi":
        multi(sys.argv[2])
    else:
        raise SystemExit(f"unknown mode {sys.argv[1]!r}: single or multi")

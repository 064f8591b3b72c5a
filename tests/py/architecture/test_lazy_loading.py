"""What the first partition and compile of a marked step load: not the machinery of the
segmenters for steps without markers nor that of layer scans (``module_blocks``,
``layer_loops``), which a step that needs them loads when a pass reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

LOADED_BY_A_MARKED_STEP = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    import jaxpp_mlir as pp

    def loss(params, x):
        for w in params:
            x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
        return jnp.mean(x ** 2)

    def step(params, xs):
        return pp.treduce(lambda x: jax.grad(loss)(params, x), xs, operation=pp.Add)

    params = [np.eye(4, dtype=np.float32) for _ in range(2)]
    xs = np.ones((2, 2, 4), np.float32)
    mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:2]), ("stage",)), "stage")
    program = pp.partition(jax.jit(step).lower(params, xs), mesh=mesh, schedule=pp.GPipe(2))
    jax.block_until_ready(program.compile()(params, xs))
    print(json.dumps(sorted(m for m in sys.modules if m.startswith("jaxpp_mlir"))))
    """
)
LOADED_ONLY_WHERE_NEEDED = ("jaxpp_mlir.passes.module_blocks", "jaxpp_mlir.passes.layer_loops")


def test_a_marked_step_loads_no_segmenter_or_layer_scan_machinery():
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    done = subprocess.run(
        [sys.executable, "-c", LOADED_BY_A_MARKED_STEP],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert "jaxpp_mlir.passes.segment_layer_scans" in loaded  # the passes themselves run
    assert "jaxpp_mlir.runtime.execution.executor" in loaded
    assert not [m for m in LOADED_ONLY_WHERE_NEEDED if m in loaded]

"""What the first partition and compile of a marked step load: not the machinery of the
segmenters for steps without markers nor that of layer scans (``module_blocks``,
``layer_loops``), which a step that needs them loads when a pass reads it."""

from __future__ import annotations

import json
import textwrap

import toolkit

LOADED_BY_A_MARKED_STEP = toolkit.TWO_STAGE_MARKED_STEP + textwrap.dedent(
    """
    program = pp.partition(lowered, mesh=mesh, schedule=pp.GPipe(2))
    jax.block_until_ready(program.compile()(params, xs))
    print(json.dumps(sorted(m for m in sys.modules if m.startswith("jaxpp_mlir"))))
    """
)
LOADED_ONLY_WHERE_NEEDED = ("jaxpp_mlir.passes.module_blocks", "jaxpp_mlir.passes.layer_loops")


def test_a_marked_step_loads_no_segmenter_or_layer_scan_machinery():
    done = toolkit.run_fresh_python(LOADED_BY_A_MARKED_STEP)
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert "jaxpp_mlir.passes.segment_layer_scans" in loaded  # the passes themselves run
    assert "jaxpp_mlir.runtime.execution.executor" in loaded
    assert not [m for m in LOADED_ONLY_WHERE_NEEDED if m in loaded]

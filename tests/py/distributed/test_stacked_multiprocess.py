"""Stacked inputs split into pieces over ranks of two processes (ranks 0, 1 and 2, 3).

One launch of ``multiprocess/stacked_worker.py`` checks, in each process, for an even, an
uneven and an interleaved split: three steps fed back against jax.jit; an even split is
one global array of which each process holds its ranks' rows (and its pieces are placed
from them without a copy), the others a StackedArray whose chunks of the other process
are RemoteOutputs; a checkpoint saved by both processes restores bit for bit into the
outputs' places and runs on.
"""

from __future__ import annotations

import pathlib

import pytest
import toolkit

pytest.importorskip("tensorstore")

WORKER = pathlib.Path(__file__).parents[1] / "support" / "multiprocess" / "stacked_worker.py"
LIMITS = {"JAXPP_MLIR_SETUP_TIMEOUT": "60", "JAXPP_MLIR_TRANSFER_TIMEOUT": "60"}


@pytest.mark.slow
@pytest.mark.numerics
def test_two_processes_split_feed_back_and_checkpoint_stacked_arrays(python_server, tmp_path):
    env = {**LIMITS, "STACKED_OUT": str(tmp_path)}
    result = toolkit.launch_two_processes(str(WORKER), python_server, env)
    for process in range(2):
        assert f"stacked ok (process {process})" in result.stdout

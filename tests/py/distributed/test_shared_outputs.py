"""Small outputs of a multi-process step are readable in every process (np.asarray).

The worker (``support/multiprocess/shared_outputs_worker.py``) runs as two
processes under ``jaxpp_mlir.launch``; it checks each process's reads of the
losses against jax.jit and that outputs over the bound still need ``gather``.
"""

from __future__ import annotations

import pathlib

import pytest
import toolkit
from jaxpp_mlir.runtime import options

WORKER = pathlib.Path(__file__).parents[1] / "support" / "multiprocess" / "shared_outputs_worker.py"


@pytest.mark.slow
def test_every_process_reads_the_losses_of_the_last_rank(python_server):
    limits = {
        options.SETUP_TIMEOUT.env: "60",
        options.TRANSFER_TIMEOUT.env: "60",
        options.SHARED_OUTPUT_MAX_BYTES.env: "64",  # the losses (32 bytes), not the params
    }
    result = toolkit.launch_two_processes(str(WORKER), python_server, limits)
    for process in range(2):
        assert f"shared outputs ok (process {process})" in result.stdout

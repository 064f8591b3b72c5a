"""One process of the check that small outputs are readable in every process.

Run by the launcher as 2 processes of 2 devices: Std1F1B over 4 ranks of the
multi-process model (ranks 0, 1 in process 0; 2, 3 in process 1), with
``JAXPP_MLIR_SHARED_OUTPUT_MAX_BYTES=64``: the losses (float32[8], on rank 3)
reach both processes, the parameters (256 bytes each) do not. Every process
reads every step's losses with ``np.asarray`` (after the loop, not only right
after the call) and checks them against jax.jit on its own devices. Prints
``shared outputs ok (process N)`` on success.
"""

from __future__ import annotations

import os
import sys

_TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(_TESTS, "support"), os.path.join(_TESTS, "support", "multiprocess")]

from jaxpp_mlir.launch import initialize_from_env, pipeline_devices  # noqa: E402

initialize_from_env()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import model  # noqa: E402
import numpy as np  # noqa: E402
import toolkit  # noqa: E402
from jaxpp_mlir.runtime.errors import CallError  # noqa: E402
from jaxpp_mlir.runtime.multiprocess.distributed import RemoteOutput  # noqa: E402

from jaxpp_mlir.compat.arrays import as_mpmd_array  # noqa: E402

NUM_RANKS = 4


def main() -> None:
    me = jax.process_index()
    program = model.partition_pipeline(pipeline_devices(NUM_RANKS).reshape(-1))
    step = program.compile()
    params, batch = model.make_params(NUM_RANKS), model.make_batch()
    history = []
    for _ in range(model.STEPS):
        params, losses = step(params, batch)
        history.append(losses)
    want_params, want_history = model.make_params(NUM_RANKS), []
    for _ in range(model.STEPS):
        want_params, want_losses = jax.jit(model.train_step)(want_params, batch)
        want_history.append(want_losses)

    assert isinstance(history[0], RemoteOutput) == (me == 0), history[0]
    toolkit.assert_matches_reference(
        np.asarray(history[0]), want_history[0], toolkit.SEPARATE_PROGRAMS
    )
    toolkit.assert_matches_reference(
        [np.asarray(h) for h in history], want_history, toolkit.SEVERAL_STEPS
    )
    # Read as an array everywhere: an element, jnp.asarray, the compat wrapper.
    last = np.asarray(history[-1])
    assert float(history[-1][0]) == float(last[0])
    np.testing.assert_array_equal(jnp.asarray(history[-1]), last)
    mpmd = as_mpmd_array(history[-1], program.mesh)
    local = mpmd.to_mpmd_local_array  # a list when the process holds several ranks
    for copy in local if isinstance(local, list) else [local]:
        np.testing.assert_array_equal(np.asarray(copy), last)
    # The parameters are over the bound: held by one process, read through gather.
    if me == 0:
        try:
            np.asarray(params[-1])
        except CallError as e:
            assert "step.gather" in str(e), e
        else:
            raise AssertionError("a large output of process 1 was readable in process 0")
    got_params = step.gather(params)
    toolkit.assert_matches_reference(got_params, want_params, toolkit.SEVERAL_STEPS)
    print(f"shared outputs ok (process {me})", flush=True)


if __name__ == "__main__":
    main()

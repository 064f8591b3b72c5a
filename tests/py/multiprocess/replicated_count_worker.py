"""One process of the multi-process check of replicated step values (run by the launcher).

Trains the Adam step of ``test_replicated_step_values`` for a few steps over 4
ranks spread on the processes, feeding the state back (Adam's count, read on
every rank, is forwarded between processes), and checks it against jax.jit on
this process's devices. Prints ``replicated count ok`` on success.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jaxpp_mlir.launch import initialize_from_env, pipeline_devices  # noqa: E402

initialize_from_env()

import jax  # noqa: E402
import numpy as np  # noqa: E402
import toolkit  # noqa: E402
from jax.sharding import Mesh  # noqa: E402
from jaxpp_mlir.runtime.distributed import RemoteOutput  # noqa: E402
from test_replicated_step_values import (  # noqa: E402
    NUM_STAGES,
    NUM_STEPS,
    initial_state,
    make_batch,
    train_step,
)

import jaxpp_mlir as pp  # noqa: E402


def main() -> None:
    devices = pipeline_devices(NUM_STAGES).reshape(-1)
    mesh = pp.MpmdMesh(Mesh(devices, ("stage",)), "stage")
    lowered = jax.jit(train_step).lower(initial_state(), make_batch())
    step = pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(NUM_STAGES)).compile()
    state, history = initial_state(), []
    for _ in range(NUM_STEPS):
        state, losses = step(state, make_batch())
        history.append(losses)
    count = state[1][0].count
    # Several processes: the count stays on its first rank (rank 0, process 0).
    if jax.process_index() == 0:
        assert len(count.sharding.device_set) == 1, count.sharding
    else:
        assert isinstance(count, RemoteOutput), count
    got_state, got_history = step.gather((state, history))
    want_state, want_history = initial_state(), []
    for _ in range(NUM_STEPS):
        want_state, losses = jax.jit(train_step)(want_state, make_batch())
        want_history.append(losses)
    np.testing.assert_array_equal(got_state[1][0].count, want_state[1][0].count)
    np.testing.assert_array_equal(got_state[2], want_state[2])
    toolkit.assert_matches_reference(got_history[0], want_history[0], toolkit.SEPARATE_PROGRAMS)
    toolkit.assert_matches_reference(got_state, want_state, toolkit.SEVERAL_STEPS)
    print(f"replicated count ok (process {jax.process_index()})", flush=True)


if __name__ == "__main__":
    main()

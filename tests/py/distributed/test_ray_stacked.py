"""Stacked inputs split into pieces over ranks, under the Ray runtime (2 workers of 2 CPU
devices: ranks 0, 1 on worker 0, ranks 2, 3 on worker 1).

An output made of pieces comes back to the driver as a ``StackedArray`` of ``RayArray``
handles, each piece staying on its worker; fed back, each worker takes its own pieces;
the numbers are the single-process run's, bit for bit (the same stage programs); a
checkpoint the workers write restores in this process and on the workers.
"""

from __future__ import annotations

import numpy as np
import pytest
import stacked_programs as sp
import toolkit

pytest.importorskip("ray", reason="the Ray runtime needs ray: pip install -e '.[ray]'")
pytest.importorskip("tensorstore")

import jaxpp_mlir as pp  # noqa: E402
from jaxpp_mlir import checkpoint  # noqa: E402

pytestmark = pytest.mark.slow  # a Ray instance and 2 jax.distributed workers start

SPLITS = {"even": ((2, 2, 2, 2), pp.Std1F1B(4)), "uneven": ((2, 1, 3, 2), pp.Std1F1B(4))}


@pytest.fixture(scope="module")
def cluster():
    with pp.ray.start(2, devices_per_worker=2, step_timeout_s=120) as running:
        yield running


@pytest.mark.parametrize("name", list(SPLITS))
def test_pieces_stay_on_their_workers_and_match_one_process(cluster, name, tmp_path):
    rows, schedule = SPLITS[name]
    layout = sp.layout_for(schedule, rows)
    program = sp.program(layout, schedule, toolkit.make_mesh(4))
    local, remote = program.compile(), cluster.compile(program)
    w, b, xs = sp.inputs(layout, seed=3)
    want, got = (w, b), (w, b)
    for _ in range(3):
        *want, want_loss = local(*want, xs)
        *got, loss = remote(*got, xs)
    new_w = got[0]
    assert isinstance(new_w, pp.StackedArray)
    assert [(c.rank, c.array.worker) for c in new_w.chunks] == [(0, 0), (1, 0), (2, 1), (3, 1)]
    assert all(isinstance(c.array, pp.ray.RayArray) and not c.array.fetched for c in new_w.chunks)
    host = remote.gather([*got, loss])
    toolkit.assert_same_program(host, [np.asarray(x) for x in (*want, want_loss)])
    np.testing.assert_array_equal(np.asarray(new_w), host[0])

    cluster.save(tmp_path / "ckpt", {"w": got[0], "b": got[1]})
    here = checkpoint.restore(tmp_path / "ckpt", {"w": want[0], "b": want[1]})
    toolkit.assert_same_program([np.asarray(here["w"]), np.asarray(here["b"])], host[:2])
    back = cluster.restore(tmp_path / "ckpt", {"w": got[0], "b": got[1]})
    assert [c.array.worker for c in back["w"].chunks] == [0, 0, 1, 1]
    toolkit.assert_same_program(
        remote.gather(remote(back["w"], back["b"], xs)), remote.gather(remote(*got, xs))
    )

"""JaxPP's ``test_parallel_stage_merge_transpose_order`` (tests/test_transformations.py),
ported.

The model, the loss, the treduce step, the inputs and the comparison are JaxPP's, as
written, with the import lines changed. JaxPP's test partitions the traced step with its
own internals (``get_scheduled_jaxpr``: ``wrap_into_tasks``, ``infer_shardings2``,
``maybe_unroll_loop``) and runs the result as a jaxpr; here the same step goes through
the public entry point, ``mpmd_jit_with_loop``, on a mesh of ``mpmd_dim`` ranks.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

import jaxpp_mlir.jaxpp as jaxpp  # was: from jaxpp.api import ...; from jaxpp.schedules import ...
from jaxpp_mlir.jaxpp import Eager1F1B, mark_stage_end, treduce

step_size = 0.01


def test_parallel_stage_merge_transpose_order():
    mpmd_dim = 3
    num_stages = 3
    n_mubatches = 5
    schedule = Eager1F1B(num_stages=num_stages)

    key = jax.random.PRNGKey(7)
    w1_key, w2_key, w3_key, x_key, y_key = jax.random.split(key, 5)
    params = tuple(jax.random.uniform(k, (10, 10)) for k in (w1_key, w2_key, w3_key))
    X = jax.random.uniform(x_key, (n_mubatches, 10))
    Y = jax.random.uniform(y_key, (n_mubatches, 10))

    def parallel_predict(params, x):
        w1, w2, w3 = params
        a = w1 @ x
        b = w2 @ x
        a = mark_stage_end(a, "a")
        b = mark_stage_end(b, "b")
        c = w3 @ (a + b)
        c = mark_stage_end(c, "c")
        return c

    def parallel_loss(params, data):
        x, y = data
        preds = parallel_predict(params, x)
        return jnp.mean((preds - y) ** 2)

    parallel_grads = jax.value_and_grad(parallel_loss)

    def accumulate_parallel_grads(params, X, Y, schedule):
        losses, total_grads = treduce(partial(parallel_grads, params), (X, Y), schedule=schedule)
        new_params = jax.tree_util.tree_map(lambda p, g: p - step_size * g, params, total_grads)
        return ((losses, new_params), 5, X)

    total_grads_fn = jax.jit(partial(accumulate_parallel_grads, schedule=schedule))

    # was: get_scheduled_jaxpr(total_grads_fn.trace(...).jaxpr, mpmd_dim, ...), run as a jaxpr
    devices = np.array(jax.devices()[:mpmd_dim]).reshape(mpmd_dim, 1)
    mpmd_mesh = jaxpp.MpmdMesh(jax.sharding.Mesh(devices, ("mpmd", "devs")), "mpmd")
    pipelined = jaxpp.mpmd_jit_with_loop(
        partial(accumulate_parallel_grads, schedule=schedule), mpmd_mesh=mpmd_mesh
    )

    flat_args = (params, X, Y)
    transformed_res = jax.tree_util.tree_leaves(pipelined(*flat_args))
    plain_res = jax.tree_util.tree_leaves(total_grads_fn(params, X, Y))
    for plain_leaf, transformed_leaf in zip(plain_res, transformed_res, strict=True):
        np.testing.assert_allclose(plain_leaf, transformed_leaf, rtol=1e-5, atol=1e-6)
    return pipelined, flat_args

"""JaxPP's tutorial notebook (flax transformer, TrainState + adamw), ported.

Only the import line differs from the notebook (``import jaxpp.api``); the
sizes are small so it runs on CPU devices in seconds.
"""

from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training import train_state
from jax.sharding import PartitionSpec as P

import jaxpp_mlir.jaxpp as jaxpp  # was: import jaxpp.api

pipeline_yield = jaxpp.api.pipeline_enter_stage

NUM_MB = 4
BATCH_SIZE = 8
SEQ_LEN = 4
D_MODEL = 16
MLP_DIM = 4 * D_MODEL
NUM_LAYERS = 4


class Block(nn.Module):
    @nn.remat
    @nn.jit
    @nn.compact
    def __call__(self, x):
        attn_output = nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=D_MODEL // 2)(x)
        x = x + attn_output
        x = nn.LayerNorm()(x)
        mlp_output = nn.Dense(features=MLP_DIM)(x)
        mlp_output = nn.gelu(mlp_output)
        mlp_output = nn.Dense(features=x.shape[-1])(mlp_output)
        x = x + mlp_output
        x = nn.LayerNorm()(x)
        return x


class AnnotatedTransformer(nn.Module):
    num_stages: int
    num_layers: int = NUM_LAYERS

    @nn.compact
    def __call__(self, x):
        for i in range(self.num_layers):
            x = Block(name=f"block_{i}")(x)
            if (i + 1) % (self.num_layers // self.num_stages) == 0:
                x = pipeline_yield(x)
        return x


dummy_input = jnp.ones((BATCH_SIZE, SEQ_LEN, D_MODEL))


def init_state(model, init=None):
    key = jax.random.PRNGKey(0)
    if init is None:  # tests pass an init drawing the parameters by numpy (no sampler compile)
        init = type(model).init
    params = init(model, key, dummy_input)["params"]
    optimizer = optax.adamw(learning_rate=0.001)
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optimizer)


def loss_fn(state, params, x, targets):
    x, targets = jax.lax.with_sharding_constraint((x, targets), jax.sharding.PartitionSpec("fsdp"))
    predictions = state.apply_fn({"params": params}, x)
    return jnp.mean((predictions - targets) ** 2)


def train_step(state, xs, targets, schedule):
    """Trains the model for one step."""
    grad_fn = jax.value_and_grad(partial(loss_fn, state))

    def scan_fn(in_):
        x, targets = in_
        return grad_fn(state.params, x, targets)

    loss_acc, grads_acc = jaxpp.api.treduce(
        scan_fn,
        (
            xs.reshape(NUM_MB, -1, *xs.shape[1:]),
            targets.reshape(NUM_MB, -1, *targets.shape[1:]),
        ),
        schedule=schedule,
        operation=jaxpp.api.Add,
    )
    state = state.apply_gradients(grads=grads_acc)
    return state, loss_acc


def fsdp_in_shardings(state, mesh):
    return (
        jax.tree.map(
            lambda _: (
                jax.NamedSharding(mesh, P("fsdp"))
                if len(getattr(_, "shape", [])) > 0
                else jax.NamedSharding(mesh, P())
            ),
            state,
        ),
        jax.NamedSharding(mesh, P("fsdp")),
        jax.NamedSharding(mesh, P("fsdp")),
    )


def build(num_stages=4, fsdp=2, num_layers=NUM_LAYERS, xs=None, init=None):
    mesh = jax.sharding.Mesh(
        np.array(jax.devices())[: num_stages * fsdp].reshape(num_stages, -1), ("stage", "fsdp")
    )
    mpmd_mesh = jaxpp.api.MpmdMesh(mesh, "stage")
    model = AnnotatedTransformer(num_stages=num_stages, num_layers=num_layers)
    ann_state = init_state(model, init)
    if xs is None:  # tests pass inputs drawn by numpy (no sampler compile)
        xs = jax.random.normal(jax.random.PRNGKey(1), dummy_input.shape)
    inputs = (ann_state, xs, dummy_input)
    in_shardings = fsdp_in_shardings(ann_state, mesh)
    mpmd_in_specs = jax.tree.map(lambda _: _.spec, in_shardings)
    schedule = jaxpp.api.Interleaved1F1B(num_stages=num_stages, mpmd_dim=num_stages)
    pp_train_step = jaxpp.api.mpmd_jit_with_loop(
        partial(train_step, schedule=schedule),
        in_specs=mpmd_in_specs,
        out_specs=(mpmd_in_specs[0], jax.sharding.PartitionSpec()),
        mpmd_mesh=mpmd_mesh,
    )
    return mpmd_mesh, pp_train_step, inputs

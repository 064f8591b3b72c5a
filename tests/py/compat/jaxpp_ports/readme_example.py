"""JaxPP's README example (ManualStagesModel + pp_train_step), ported.

Only the import line differs from code written for JaxPP (``import jaxpp``).
The BERT layers are small flax Dense blocks so the port runs on CPU in seconds;
the names the README leaves undefined (``loss_fn``, ``params``) are the ones
it means (``loss``, ``pars``).
"""

from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxpp_mlir.jaxpp as jaxpp  # was: import jaxpp


class Layer(nn.Module):
    hidden: int
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, hidden_states, attention_mask, head_mask):
        h = nn.Dense(self.hidden, dtype=self.dtype)(hidden_states)
        return (hidden_states + jnp.tanh(h),)


class ManualStagesModel(nn.Module):
    num_hidden_layers: int
    hidden: int
    pipeline_parallelism: int
    dtype: jnp.dtype = jnp.float32

    def setup(self):
        self.layers = [
            Layer(self.hidden, name=f"flax_bert_layer_{i}", dtype=self.dtype)
            for i in range(self.num_hidden_layers)
        ]

    def __call__(self, hidden_states):
        num_layers_per_stage = self.num_hidden_layers // self.pipeline_parallelism
        stage_id = 0
        for i, layer in enumerate(self.layers):
            # Mark that we are entering a new stage
            if i > 0 and i % num_layers_per_stage == 0 and stage_id < self.pipeline_parallelism:
                hidden_states = jaxpp.pipeline_enter_stage(hidden_states)
                stage_id += 1
            outs = layer(hidden_states, None, None)
            hidden_states = outs[0]
        # Since Aug 2025 JaxPP wants the last stage marked as well.
        return jaxpp.pipeline_enter_stage(hidden_states)


def build(
    num_stages=2, num_mubatches=4, hidden=8, layers_per_stage=2, batch=2, data=None, init=None
):
    devices = np.array(jax.devices()[:num_stages]).reshape(num_stages, 1, 1)
    jax_mesh = jax.sharding.Mesh(devices, ("mpmd", "data", "model"))
    mpmd_mesh = jaxpp.MpmdMesh(jax_mesh, "mpmd")

    model = ManualStagesModel(layers_per_stage * num_stages, hidden, num_stages)
    batch_shape = (num_mubatches, batch, hidden)
    if data is None:  # tests pass inputs drawn by numpy (no sampler compile)
        data = jax.random.normal(jax.random.PRNGKey(1), batch_shape)
    if init is None:  # tests pass an init drawing the parameters by numpy
        init = type(model).init
    pars = init(model, jax.random.PRNGKey(0), data[0])
    optimizer = optax.adam(1e-2)
    opt_state = optimizer.init(pars)

    def loss(pars, batch):
        res = model.apply(pars, batch)
        return jnp.mean((res - batch) ** 2) / num_mubatches, (res, 4)

    @partial(jaxpp.mpmd_jit_with_loop, mpmd_mesh=mpmd_mesh)
    def pp_train_step(opt_state, pars, batch):
        mubatch_grad = partial(jax.value_and_grad(loss, has_aux=True), pars)
        # Compute loss and gradients
        (losses, (pred, _)), grad = jaxpp.treduce(
            mubatch_grad, batch, schedule=jaxpp.Std1F1B(mpmd_mesh.mpmd_dim)
        )
        # Apply the optimizer as usual
        (updates, opt_state) = optimizer.update(grad, opt_state, pars)
        new_pars = optax.apply_updates(pars, updates)
        return opt_state, new_pars, losses, pred

    return mpmd_mesh, pp_train_step, (opt_state, pars, data)

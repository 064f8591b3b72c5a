"""Regenerates the captured modules in tests/lit/inputs/ from real ``jax.jit(...).lower()`` calls.

Run from anywhere: ``python tests/lit/regenerate_inputs.py``, once per supported
jax minor release (its files go to ``inputs/`` for 0.10, ``inputs/jax-<minor>/``
for newer ones whose lowering differs). Each file is ``lowered.as_text()`` (no
debug info; marker locations relative to the repository root), so the files change only
when jax's lowering or the captures do: a rerun on any supported jax leaves ``git diff``
empty (tests/py/test_lit_inputs_reproducible.py checks it). The lit tests
in ``tests/lit/e2e/``, ``tests/lit/e2e-loop/`` and ``tests/py/test_roundtrip.py``
read them; rerun this script after a jax upgrade and review the diff of the
FileCheck tests.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import pathlib  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402

INPUTS_DIR = pathlib.Path(__file__).resolve().parent / "inputs"
REPOSITORY_ROOT = INPUTS_DIR.parents[2]
OLDEST_MINOR = "0.10"  # the captures in inputs/ itself
NUM_STAGES = 3
BATCH = 2
WIDTH = 4


def _params() -> list[dict[str, jax.Array]]:
    keys = jax.random.split(jax.random.PRNGKey(0), NUM_STAGES)
    return [{"w": jax.random.normal(key, (WIDTH, WIDTH)), "b": jnp.zeros((WIDTH,))} for key in keys]


def _batch() -> tuple[jax.Array, jax.Array]:
    return jnp.ones((BATCH, WIDTH)), jnp.zeros((BATCH, WIDTH))


def _mlp(params: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
    """One layer per stage; a marker ends every stage, the last one included."""
    for layer in params:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
        x = pp.pipeline_enter_stage(x)
    return x


def _loss(params, batch):
    x, y = batch
    return jnp.mean((_mlp(params, x) - y) ** 2)


def mlp_value_and_grad() -> jax.stages.Lowered:
    """A 3-stage MLP training step: value_and_grad and an SGD update."""

    def step(params, batch):
        loss, grads = jax.value_and_grad(_loss)(params, batch)
        new_params = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
        return new_params, loss

    return jax.jit(step).lower(_params(), _batch())


def mlp_forward() -> jax.stages.Lowered:
    """The same 3-stage MLP, forward only (the loss, no gradient)."""
    return jax.jit(_loss).lower(_params(), _batch())


def nested_jit() -> jax.stages.Lowered:
    """A 2-stage model whose first stage, marker included, is a nested jax.jit."""

    @jax.jit
    def first_stage(w, x):
        return pp.pipeline_enter_stage(jnp.tanh(x @ w))

    def model(w0, w1, x):
        h = first_stage(w0, x)
        return pp.pipeline_enter_stage(jnp.sin(h @ w1))

    w = jnp.ones((WIDTH, WIDTH))
    return jax.jit(model).lower(w, w, jnp.ones((BATCH, WIDTH)))


def mlp_treduce() -> jax.stages.Lowered:
    """The 3-stage MLP step over 2 microbatches: treduce of value_and_grad, then SGD."""
    num_microbatches = 2

    def step(params, batch):
        def microbatch(mb):
            return jax.value_and_grad(_loss)(params, mb)

        loss, grads = pp.treduce(microbatch, batch, operation=pp.Add)
        new_params = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
        return new_params, loss

    x, y = _batch()
    batch = (jnp.stack([x] * num_microbatches), jnp.stack([y] * num_microbatches))
    return jax.jit(step).lower(_params(), batch)


def treduce_mlp() -> jax.stages.Lowered:
    """A 2-stage MLP step over 4 microbatches: treduce of value_and_grad, then SGD.

    The per-microbatch losses are concatenated (``Concat``: state read and
    written by the last stage) and the gradients summed (``Add``: one
    accumulator per stage). Read by tests/lit/e2e-loop/.
    """
    num_microbatches = 4

    def loss(params, mb):
        x, y = mb
        for w in params:
            x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
        return jnp.mean((x - y) ** 2)

    def step(params, batch):
        losses, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), batch, operation=(pp.Concat(), pp.Add)
        )
        return [p - 0.1 * g for p, g in zip(params, grads, strict=True)], losses

    params = [w["w"] for w in _params()[:2]]
    x, y = _batch()
    batch = (jnp.stack([x] * num_microbatches), jnp.stack([y] * num_microbatches))
    return jax.jit(step).lower(params, batch)


def sharded_treduce_mlp() -> jax.stages.Lowered:
    """A 2-stage MLP step over 2 microbatches, tensor- and data-parallel in each stage.

    Lowered, as ``partition()`` wants it, on the lowering mesh of an
    ``MpmdMesh`` (stage=2, data=2, model=2): stage=1, data=2, model=2. Each
    stage's weights are split over "model" (``P(None, "model")`` then
    ``P("model", None)``), the microbatches over "data" (``P(None, "data",
    None)``), and each stage's output is constrained to ``P("data", None)``
    (a ``with_sharding_constraint``). Read by tests/lit/e2e-sharded/.
    """
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    num_microbatches = 2
    devices = np.array(jax.devices()[:8]).reshape(2, 2, 2)
    mesh = pp.MpmdMesh(Mesh(devices, ("stage", "data", "model")), "stage").lowering_mesh()
    rows = NamedSharding(mesh, P("data", None))

    def loss(params, mb):
        x, y = mb
        for w_in, w_out in params:
            x = jax.lax.with_sharding_constraint(jnp.tanh(x @ w_in) @ w_out, rows)
            x = pp.pipeline_enter_stage(x)
        return jnp.mean((x - y) ** 2)

    def step(params, batch):
        losses, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), batch, operation=(pp.Concat(), pp.Add)
        )
        return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), losses

    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    params = [
        (
            jax.random.normal(keys[2 * s], (WIDTH, 2 * WIDTH)),
            jax.random.normal(keys[2 * s + 1], (2 * WIDTH, WIDTH)),
        )
        for s in range(2)
    ]
    x, y = _batch()
    batch = (jnp.stack([x] * num_microbatches), jnp.stack([y] * num_microbatches))
    weights = (NamedSharding(mesh, P(None, "model")), NamedSharding(mesh, P("model", None)))
    data = NamedSharding(mesh, P(None, "data", None))
    step = jax.jit(step, in_shardings=([weights] * 2, (data, data)))
    return step.lower(params, batch)


CAPTURES = {
    "mlp_value_and_grad.mlir": mlp_value_and_grad,
    "mlp_forward.mlir": mlp_forward,
    "nested_jit.mlir": nested_jit,
    "mlp_treduce.mlir": mlp_treduce,
    "treduce_mlp.mlir": treduce_mlp,
    "sharded_treduce_mlp.mlir": sharded_treduce_mlp,
}


def inputs_dir_for(version: str) -> pathlib.Path:
    """Where the captures of jax ``version`` live: ``inputs/`` for the oldest supported
    minor release (0.10), ``inputs/jax-<major>.<minor>/`` for a newer one whose lowering
    differs (lit.cfg.py points ``%inputs`` at the folder of the running jax)."""
    minor = ".".join(version.split(".")[:2])
    return INPUTS_DIR if minor == OLDEST_MINOR else INPUTS_DIR / f"jax-{minor}"


def main() -> None:
    # Marker locations are recorded relative to the working directory: capture from the
    # repository root so that every checkout writes the same files.
    os.chdir(REPOSITORY_ROOT)
    target = inputs_dir_for(jax.__version__)
    texts = {name: capture().as_text() for name, capture in CAPTURES.items()}
    if target != INPUTS_DIR and all(
        (INPUTS_DIR / name).exists() and (INPUTS_DIR / name).read_text() == text
        for name, text in texts.items()
    ):
        print(f"jax {jax.__version__} lowers like jax {OLDEST_MINOR}: nothing to write")
        return
    target.mkdir(exist_ok=True)
    for name, text in texts.items():
        (target / name).write_text(text)
        print(f"wrote {target / name} ({len(text.splitlines())} lines)")


if __name__ == "__main__":
    main()

"""A model written for JAX's explicit sharding, pipelined with data and tensor parallel stages.

Run: python examples/explicit_sharding.py [--steps N] [--stages S] [--data D] [--model M]
                                          [--auto AXIS ...] [--jit-shardings]

The model is code as explicit sharding has it written: the mesh comes from
``jax.make_mesh`` (Explicit axes, the default of current JAX), the step runs under
``jax.set_mesh``, and every matmul says where its result lives with
``jnp.einsum(..., out_sharding=P("data", "model"))``. Each stage is a residual MLP
block whose hidden layer is split over the "model" axis (tensor parallelism) and whose
batch is split over "data" (data parallelism); the "stage" axis separates the
pipeline's stages. The step is ``treduce`` of ``value_and_grad`` over the microbatches,
then optax's Adam.

The same step is run by plain ``jax.jit`` on the lowering mesh and, partitioned, as
S stages on S submeshes of D x M devices; each step's losses are printed side by side
and the script exits non-zero if losses, parameters or optimizer state differ by more
than RTOL.

``--auto model`` makes the "model" axis Auto (a mixed mesh): the einsums then name
only the Explicit axes and the compiler chooses the tensor-parallel layout from the
parameters' shardings. ``--jit-shardings`` lowers without ``jax.set_mesh``: the
shardings are passed to ``jax.jit`` and the einsums name them as ``NamedSharding``s.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import sys
from typing import Any

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.sharding import AxisType, Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402

D_MODEL = 8
D_HIDDEN = 16
MICROBATCHES = 4
MICROBATCH_SIZE = 4
# Each stage and the Adam update run as programs of their own rather than inside one
# jitted program: a few float32 ulps per step, which later steps carry (README, "Numbers").
RTOL = 1e-5

optimizer = optax.adam(1e-2)

# Where each parameter of a block lives: the hidden layer split over "model".
BLOCK_SPECS = {"w_in": P(None, "model"), "b_in": P("model"), "w_out": P("model", None)}
BATCH_SPEC = P(None, "data", None)  # [microbatch, batch, features]


def out_sharding(spec: P, mesh: Mesh | None) -> Any:
    """``spec`` as an einsum's ``out_sharding``: over the mesh set by ``jax.set_mesh``
    (``mesh`` None) or as a ``NamedSharding`` on ``mesh``. Only Explicit axes are named:
    an Auto axis is the compiler's to choose."""
    current = mesh if mesh is not None else jax.sharding.get_abstract_mesh()
    types = dict(zip(current.axis_names, current.axis_types, strict=True))
    spec = P(*(name if types.get(name) == AxisType.Explicit else None for name in spec))
    return spec if mesh is None else NamedSharding(mesh, spec)


def block(params: dict[str, jax.Array], x: jax.Array, mesh: Mesh | None) -> jax.Array:
    hidden = jnp.einsum(
        "bd,dh->bh", x, params["w_in"], out_sharding=out_sharding(P("data", "model"), mesh)
    )
    hidden = jax.nn.gelu(hidden + params["b_in"])
    update = jnp.einsum(
        "bh,hd->bd", hidden, params["w_out"], out_sharding=out_sharding(P("data", None), mesh)
    )
    return x + update


def loss_fn(params: list[dict[str, jax.Array]], microbatch: Any, mesh: Mesh | None = None):
    """The model: one block per stage, each ending its stage."""
    x, y = microbatch
    for block_params in params:
        x = pp.pipeline_enter_stage(block(block_params, x, mesh))
    return jnp.mean((x - y) ** 2)


def train_step(params, opt_state, batch, mesh: Mesh | None = None):
    losses, grads = pp.treduce(lambda mb: jax.value_and_grad(loss_fn)(params, mb, mesh), batch)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, losses


def make_mesh(stages: int, data: int, model: int, auto: tuple[str, ...] = ()) -> pp.MpmdMesh:
    """A ``jax.make_mesh`` mesh (Explicit axes; those named in ``auto`` Auto) split into
    ``stages`` submeshes along "stage"."""
    names = ("stage", "data", "model")
    types = tuple(AxisType.Auto if name in auto else AxisType.Explicit for name in names)
    return pp.MpmdMesh(jax.make_mesh((stages, data, model), names, axis_types=types), "stage")


def initial_values(num_stages: int, seed: int = 0) -> tuple[list[dict[str, np.ndarray]], Any]:
    """Parameters and one batch per step, drawn by numpy (host arrays)."""
    rng = np.random.default_rng(seed)

    def normal(*shape: int, scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    params = [
        {
            "w_in": normal(D_MODEL, D_HIDDEN, scale=D_MODEL**-0.5),
            "b_in": normal(D_HIDDEN, scale=0.1),
            "w_out": normal(D_HIDDEN, D_MODEL, scale=D_HIDDEN**-0.5),
        }
        for _ in range(num_stages)
    ]
    shape = (MICROBATCHES, MICROBATCH_SIZE, D_MODEL)
    return params, lambda: (normal(*shape, scale=1.0), normal(*shape, scale=1.0))


@dataclasses.dataclass
class Run:
    """A step and its first values, placed on the lowering mesh."""

    step: Any  # the jitted step, which jax.jit and partition both take
    context: Any  # a fresh jax.set_mesh(lowering mesh), or no mesh for --jit-shardings
    params: Any
    opt_state: Any
    batches: list[Any]


def prepare(mesh: pp.MpmdMesh, steps: int, *, jit_shardings: bool = False, seed: int = 0) -> Run:
    """The jitted step, parameters, Adam state and ``steps`` batches on the lowering mesh.

    Under ``jax.set_mesh`` (the default) the einsums' specs refer to the mesh in context;
    with ``jit_shardings`` no mesh is set: the shardings go to ``jax.jit`` and the
    einsums name the lowering mesh's ``NamedSharding``s.
    """
    lowering = mesh.lowering_mesh()
    host_params, draw_batch = initial_values(mesh.mpmd_dim, seed)
    param_shardings = [
        {name: NamedSharding(lowering, spec) for name, spec in BLOCK_SPECS.items()}
        for _ in host_params
    ]
    batch_sharding = (NamedSharding(lowering, BATCH_SPEC),) * 2
    params = jax.device_put(host_params, param_shardings)
    with jax.set_mesh(lowering):
        opt_state = optimizer.init(params)
    batches = [jax.device_put(draw_batch(), batch_sharding) for _ in range(steps)]
    if jit_shardings:
        state_shardings = jax.tree.map(lambda a: a.sharding, (params, opt_state))
        step = jax.jit(
            functools.partial(train_step, mesh=lowering),
            in_shardings=(*state_shardings, batch_sharding),
        )
        return Run(step, contextlib.nullcontext, params, opt_state, batches)
    return Run(jax.jit(train_step), lambda: jax.set_mesh(lowering), params, opt_state, batches)


def train(
    mesh: pp.MpmdMesh, steps: int, *, jit_shardings: bool = False, seed: int = 0
) -> tuple[list[Any], list[Any]]:
    """``steps`` steps pipelined and under plain ``jax.jit``, from the same values: the
    states (parameters, optimizer state, losses) after each step, pipelined and jitted."""
    run = prepare(mesh, steps, jit_shardings=jit_shardings, seed=seed)
    with run.context():
        lowered = run.step.lower(run.params, run.opt_state, run.batches[0])
        program = pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(mesh.mpmd_dim))
        compiled = program.compile()
        ours, theirs = [], []
        state = expected = (run.params, run.opt_state)
        for batch in run.batches:
            *state, losses = compiled(*state, batch)
            ours.append((*state, losses))
            *expected, expected_losses = run.step(*expected, batch)
            theirs.append((*expected, expected_losses))
    return ours, theirs


def worst_relative_difference(ours: Any, theirs: Any) -> float:
    worst = 0.0
    for a, e in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        a, e = np.asarray(a, np.float64), np.asarray(e, np.float64)
        scale = max(float(np.max(np.abs(e), initial=0.0)), 1e-30)
        worst = max(worst, float(np.max(np.abs(a - e), initial=0.0)) / scale)
    return worst


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--stages", type=int, default=2)
    p.add_argument("--data", type=int, default=2)
    p.add_argument("--model", type=int, default=2)
    p.add_argument(
        "--auto", nargs="*", default=[], choices=["stage", "data", "model"], help="Auto axes"
    )
    p.add_argument(
        "--jit-shardings", action="store_true", help="shardings to jax.jit, no jax.set_mesh"
    )
    args = p.parse_args(argv)
    if args.stages * args.data * args.model > len(jax.devices()):
        p.error(f"{args.stages} x {args.data} x {args.model} devices: only {len(jax.devices())}")
    mesh = make_mesh(args.stages, args.data, args.model, tuple(args.auto))
    print(f"{mesh}, axis types {tuple(t.name for t in mesh.axis_types)}")
    ours, theirs = train(mesh, args.steps, jit_shardings=args.jit_shardings)
    for i, (mine, reference) in enumerate(zip(ours, theirs, strict=True)):
        print(f"step {i}: loss {np.mean(mine[-1]):.6f} (jax.jit {np.mean(reference[-1]):.6f})")
    w_in = ours[-1][0][-1]["w_in"]
    devices = sorted(d.id for d in w_in.devices())
    print(f"last stage's w_in: {jax.typeof(w_in)} on devices {devices}")
    worst = worst_relative_difference(ours, theirs)
    if worst > RTOL:
        print(f"FAILED: worst relative difference {worst:.2e} > {RTOL}")
        return 1
    print(f"OK: worst relative difference {worst:.2e} (losses, parameters, Adam state)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

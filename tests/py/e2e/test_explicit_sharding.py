"""A model written for JAX's explicit sharding, pipelined: examples/explicit_sharding.py.

``jax.make_mesh`` gives Explicit axes, the model's einsums pass ``out_sharding=``, and
the step runs under ``jax.set_mesh`` (or gets its shardings from ``jax.jit``): 2 stages,
each data (2) x tensor (2) parallel on its own 4 of the 8 CPU devices, against plain
``jax.jit`` on the lowering mesh. Also: the mesh keeps its axis types, arguments and
outputs are placed as ``NamedSharding``s over the typed submeshes, checkpoints restore
them, and JaxPP's ``mpmd_jit_with_loop`` takes the same mesh.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
import toolkit
from jax.sharding import AxisType, Mesh, NamedSharding

import jaxpp_mlir as pp
import jaxpp_mlir.jaxpp as jaxpp
from jaxpp_mlir import checkpoint

E, A = AxisType.Explicit, AxisType.Auto


@pytest.fixture(scope="module")
def example():
    return toolkit.load_example("explicit_sharding")


# ------------------------------------------------------------------ the mesh


def test_derived_meshes_keep_the_axis_types():
    mesh = pp.MpmdMesh(
        jax.make_mesh((2, 2, 2), ("stage", "data", "model"), axis_types=(E, E, A)), "stage"
    )
    assert mesh.axis_types == (E, E, A)
    derived = [mesh.lowering_mesh(), *mesh.unstack, mesh.rank_mesh(1)]
    derived.append(mesh.mpmd_submesh([1]).jax_mesh)
    for submesh in derived:
        assert tuple(submesh.axis_types) == (E, E, A)
        assert dict(submesh.shape) == {"stage": 1, "data": 2, "model": 2}
    assert mesh.lowering_mesh() == mesh.unstack[0]
    assert "axis_types=(Explicit, Explicit, Auto)" in repr(mesh)
    built = pp.MpmdMesh.from_devices(
        jax.devices(), {"stage": 2, "data": -1}, "stage", axis_types=(E, E)
    )
    assert built.axis_types == (E, E) and built.unstack[1].axis_types == (E, E)
    # A jax.sharding.Mesh without axis types stays Auto, and prints as before.
    assert repr(toolkit.mpmd_mesh({"stage": 2, "data": 2})) == (
        "MpmdMesh({'stage': 2, 'data': 2}, mpmd_axis='stage')"
    )


# ------------------------------------------------------------------ training, against jax.jit

CASES = {
    # name: (Auto axes, shardings given to jax.jit instead of jax.set_mesh)
    "explicit-set_mesh": ((), False),
    "explicit-jit_shardings": ((), True),
    "model_auto-set_mesh": (("model",), False),
    "stage_auto-jit_shardings": (("stage",), True),
}


@pytest.mark.numerics
@pytest.mark.parametrize("case", list(CASES))
def test_explicit_sharding_model_trains_like_jax_jit(example, case):
    auto, jit_shardings = CASES[case]
    mesh = example.make_mesh(2, 2, 2, auto)
    ours, theirs = example.train(mesh, 2, jit_shardings=jit_shardings)
    # Each stage is an SPMD program of its own (the same shardings and collectives as the
    # jitted step on the lowering mesh); Adam's second step carries the first's rounding.
    toolkit.assert_matches_reference(ours[0], theirs[0], toolkit.SEPARATE_PROGRAMS)
    toolkit.assert_matches_reference(ours[1], theirs[1], toolkit.SEVERAL_STEPS)
    params, opt_state, _ = ours[-1]
    model_typed = "model" not in auto
    for stage, block in enumerate(params):
        for name, array in block.items():
            # On exactly its stage's submesh, as a NamedSharding over that typed submesh.
            assert array.devices() == set(mesh.rank_devices(stage))
            assert array.sharding.mesh == mesh.unstack[stage]
            expected = NamedSharding(mesh.unstack[stage], example.BLOCK_SPECS[name])
            assert array.sharding.is_equivalent_to(expected, array.ndim), name
            assert jax.typeof(array) == jax.typeof(theirs[-1][0][stage][name]), name
        assert ("@model" in str(jax.typeof(block["w_in"]))) == model_typed


@pytest.mark.numerics
def test_the_example_script_reports_its_check(example, capsys):
    assert example.main(["--steps", "1", "--auto", "model", "--jit-shardings"]) == 0
    out = capsys.readouterr().out
    assert "axis types ('Explicit', 'Explicit', 'Auto')" in out
    assert "OK: worst relative difference" in out and out.count("step ") == 1


# ------------------------------------------------------------------ one compiled program


@pytest.fixture(scope="module")
def compiled(example):
    """The explicit model partitioned under jax.set_mesh, with its first values."""
    mesh = example.make_mesh(2, 2, 2)
    run = example.prepare(mesh, 1)
    with run.context():
        lowered = run.step.lower(run.params, run.opt_state, run.batches[0])
    program = pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(2))
    return mesh, program.compile(), run


def test_host_and_auto_typed_arguments_are_placed_on_the_explicit_submeshes(compiled):
    mesh, step, run = compiled
    expected = step(run.params, run.opt_state, run.batches[0])
    # numpy arguments: a batch split over "data" and repeated over "model" goes to each
    # device of its rank (the same slice to two devices).
    host = jax.tree.map(np.asarray, (run.params, run.opt_state, run.batches[0]))
    toolkit.assert_same_program(step(*host), expected)
    # Arrays on an Auto-typed mesh of the same devices are taken as they are laid out.
    lowering = mesh.lowering_mesh()
    auto_mesh = Mesh(lowering.devices, lowering.axis_names)
    on_auto = jax.tree.map(
        lambda a: jax.device_put(a, NamedSharding(auto_mesh, a.sharding.spec)), run.params
    )
    result = step(on_auto, run.opt_state, run.batches[0])
    toolkit.assert_same_program(result, expected)
    for stage, block in enumerate(result[0]):
        assert block["w_in"].sharding.mesh == mesh.unstack[stage]  # Explicit, as lowered


def test_checkpoint_restores_arrays_sharded_over_explicit_submeshes(compiled, tmp_path):
    mesh, step, run = compiled
    params, opt_state, _ = step(run.params, run.opt_state, run.batches[0])
    checkpoint.save(tmp_path / "step1", (params, opt_state))
    restored = checkpoint.restore(tmp_path / "step1", (params, opt_state))
    saved_leaves = jax.tree.leaves((params, opt_state))
    for got, saved in zip(jax.tree.leaves(restored), saved_leaves, strict=True):
        assert got.sharding == saved.sharding  # the submesh with its axis types, the spec
        assert jax.typeof(got) == jax.typeof(saved)
    toolkit.assert_same_program(restored, (params, opt_state))
    # Restored into shapes with shardings, and trained on: the same step as from the saved.
    like = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), restored
    )
    again = checkpoint.restore(tmp_path / "step1", like)
    toolkit.assert_same_program(
        step(*again, run.batches[0]), step(params, opt_state, run.batches[0])
    )


# ------------------------------------------------------------------ JaxPP's entry point


@pytest.mark.numerics
def test_mpmd_jit_with_loop_on_an_explicit_mesh(example):
    mesh = example.make_mesh(2, 2, 2)
    run = example.prepare(mesh, 2)
    pp_step = jaxpp.mpmd_jit_with_loop(example.train_step, mpmd_mesh=mesh)
    ours = pp_step(run.params, run.opt_state, run.batches[0])
    with run.context():
        expected = run.step(run.params, run.opt_state, run.batches[0])
    toolkit.assert_matches_reference(
        jax.tree.map(np.asarray, ours), expected, toolkit.SEPARATE_PROGRAMS
    )
    w_in = ours[0][1]["w_in"]
    assert w_in.mpmd_idxs == (1,)
    assert w_in.sharding.mesh == mesh.unstack[1]
    # The outputs go back in: the second step reuses the program.
    ours = pp_step(*ours[:2], run.batches[1])
    with run.context():
        expected = run.step(*expected[:2], run.batches[1])
    toolkit.assert_matches_reference(
        jax.tree.map(np.asarray, ours), expected, toolkit.SEVERAL_STEPS
    )
    assert len(pp_step._compiled) == 1

"""``PartitionOptions``: what partition() once read from the environment, as data."""

import dataclasses

import pytest
from jaxpp_mlir.runtime import options
from toolkit import lower_cached, make_mesh, mlp_batch, mlp_params, mlp_train_step

import jaxpp_mlir as pp
from jaxpp_mlir.passes.pipelines import default_pipeline_text, placement_pipeline


def test_an_empty_environment_gives_the_defaults():
    assert pp.PartitionOptions.from_env({}) == pp.PartitionOptions()


def test_each_variable_sets_its_field():
    environ = {
        options.FUSE_TASKS.env: "1",
        options.PACK_ACCUMULATORS.env: "1",
        options.PACK_PARAMETERS.env: "1",
        options.REPLICATE_MAX_BYTES.env: "0",
        options.DUMP_DIR.env: "/tmp/dumps",
    }
    assert pp.PartitionOptions.from_env(environ) == pp.PartitionOptions(
        fuse_tasks=True,
        pack_accumulators=True,
        pack_parameters=True,
        pack_contraction_operands=True,
        replicate_max_bytes=0,
        dump_dir="/tmp/dumps",
    )


def test_pack_parameters_2_leaves_contraction_operands_alone():
    found = pp.PartitionOptions.from_env({options.PACK_PARAMETERS.env: "2"})
    assert (found.pack_parameters, found.pack_contraction_operands) == (True, False)


def test_a_bad_variable_names_itself():
    with pytest.raises(ValueError, match="JAXPP_MLIR_REPLICATE_MAX_BYTES='many'"):
        pp.PartitionOptions.from_env({options.REPLICATE_MAX_BYTES.env: "many"})


def test_options_are_frozen_and_checked():
    with pytest.raises(dataclasses.FrozenInstanceError):
        pp.PartitionOptions().fuse_tasks = True  # type: ignore[misc]
    with pytest.raises(ValueError, match="replicate_max_bytes must be at least 0, got -1"):
        pp.PartitionOptions(replicate_max_bytes=-1)


def test_the_replication_limit_is_a_pass_option():
    outer = [e for e in placement_pipeline(mpmd_dim=2, replicate_max_bytes=7) if "outer" in e.name]
    assert [str(e) for e in outer] == ["jaxpp-outline-outer-code{replicate-max-bytes=7}"]
    assert "jaxpp-outline-outer-code{replicate-max-bytes=1024}" in default_pipeline_text(mpmd_dim=2)


@pytest.fixture(scope="module")
def lowered():
    params, batch = mlp_params(2), mlp_batch(4)
    return lower_cached(mlp_train_step, params, batch)


def test_given_options_win_over_the_environment(lowered, monkeypatch, tmp_path):
    monkeypatch.setenv(options.FUSE_TASKS.env, "1")
    monkeypatch.setenv(options.DUMP_DIR.env, str(tmp_path / "from_env"))
    program = pp.partition(lowered, mesh=make_mesh(2), options=pp.PartitionOptions())
    assert not isinstance(program.schedule, pp.AutoFused)
    assert not (tmp_path / "from_env").exists()
    given = pp.PartitionOptions(fuse_tasks=True, dump_dir=str(tmp_path / "given"))
    monkeypatch.delenv(options.FUSE_TASKS.env)
    program = pp.partition(lowered, mesh=make_mesh(2), options=given)
    assert isinstance(program.schedule, pp.AutoFused)
    assert (tmp_path / "given" / "00_input.mlir").exists()


def test_without_options_the_environment_is_read(lowered, monkeypatch):
    monkeypatch.setenv(options.FUSE_TASKS.env, "1")
    assert isinstance(pp.partition(lowered, mesh=make_mesh(2)).schedule, pp.AutoFused)


def test_options_must_be_partition_options(lowered):
    with pytest.raises(TypeError, match="options must be a jaxpp_mlir.PartitionOptions, got dict"):
        pp.partition(lowered, mesh=make_mesh(2), options={"fuse_tasks": True})

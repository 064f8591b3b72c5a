"""``PartitionOptions``: what partition() once read from the environment, as data."""

import dataclasses
import pathlib

import pytest
from toolkit import lower_cached, make_mesh, mlp_batch, mlp_params, mlp_train_step

import jaxpp_mlir as pp
from jaxpp_mlir import partition_options
from jaxpp_mlir.passes.pipeline import parse_pipeline
from jaxpp_mlir.passes.pipelines import default_pipeline, default_pipeline_text


def test_an_empty_environment_gives_the_defaults():
    assert pp.PartitionOptions.from_env({}) == pp.PartitionOptions()


def test_each_variable_sets_its_field():
    environ = {
        partition_options.FUSE_TASKS.env: "1",
        partition_options.PACK_ACCUMULATORS.env: "1",
        partition_options.PACK_PARAMETERS.env: "1",
        partition_options.REPLICATE_MAX_BYTES.env: "0",
        partition_options.DUMP_DIR.env: "/tmp/dumps",
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
    found = pp.PartitionOptions.from_env({partition_options.PACK_PARAMETERS.env: "2"})
    assert (found.pack_parameters, found.pack_contraction_operands) == (True, False)


def test_a_bad_variable_names_itself():
    with pytest.raises(ValueError, match="JAXPP_MLIR_REPLICATE_MAX_BYTES='many'"):
        pp.PartitionOptions.from_env({partition_options.REPLICATE_MAX_BYTES.env: "many"})


def test_options_are_frozen_and_checked():
    with pytest.raises(dataclasses.FrozenInstanceError):
        pp.PartitionOptions().fuse_tasks = True  # type: ignore[misc]
    with pytest.raises(ValueError, match="replicate_max_bytes must be at least 0, got -1"):
        pp.PartitionOptions(replicate_max_bytes=-1)


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"setup_warnings": "false"}, TypeError, "setup_warnings must be a bool, got 'false'"),
        ({"strict": 1}, TypeError, "strict must be a bool, got 1"),
        (
            {"merge_parallel_markers": "yes"},
            TypeError,
            "merge_parallel_markers must be a bool, got 'yes'",
        ),
        ({"stage_split": 4}, TypeError, "stage_split must be a tuple of ints"),
        (
            {"stage_split": (2, 0, 2)},
            ValueError,
            "stage_split must be a non-empty tuple of positive",
        ),
        ({"stage_split": ()}, ValueError, "stage_split must be a non-empty tuple of positive"),
        ({"memory_limit_bytes": -1}, ValueError, "memory_limit_bytes must be at least 1, got -1"),
        ({"memory_limit_bytes": float("nan")}, ValueError, "memory_limit_bytes must be a finite"),
        ({"memory_limit_bytes": "1GB"}, TypeError, "memory_limit_bytes must be an int"),
        ({"memory_limit_bytes": True}, TypeError, "memory_limit_bytes must be an int"),
        ({"replicate_max_bytes": 1.5}, TypeError, "replicate_max_bytes must be an int"),
        ({"dump_dir": 3}, TypeError, "dump_dir must be a path"),
        (
            {"segmenter": "layers"},
            ValueError,
            "segmenter must be one of 'auto', 'markers', 'repeated-blocks', 'layer-scans', "
            "got 'layers'",
        ),
        ({"split_points": "layers_4"}, TypeError, "split_points must be a tuple of module paths"),
        ({"split_points": ()}, TypeError, "split_points must be a non-empty tuple of module"),
        ({"split_points": ("layers_4", 8)}, TypeError, "split_points must be a non-empty tuple"),
        ({"split_points": ("a,b",)}, ValueError, "no commas or spaces"),
        ({"split_points": ("",)}, ValueError, "split_points must be module paths"),
        ({"split_points": ("h/4 ",)}, ValueError, "split_points must be module paths"),
    ],
)
def test_each_field_is_type_and_range_checked_by_name(fields, error, message):
    with pytest.raises(error, match=message):
        pp.PartitionOptions(**fields)


def test_fields_are_normalized():
    options = pp.PartitionOptions(stage_split=[2, 2], dump_dir=pathlib.Path("/tmp/d"))
    assert options.stage_split == (2, 2) and options.dump_dir == "/tmp/d"


def test_split_points_are_the_option_of_their_segmenter_in_the_segment_slot():
    options = pp.PartitionOptions(split_points=["layers_4", "transformer/h/8", "mixer#2"])
    assert options.split_points == ("layers_4", "transformer/h/8", "mixer#2")
    text = default_pipeline_text(options, mpmd_dim=2)
    assert (
        "jaxpp-normalize-loop,jaxpp-segment-split-points{chained=false optional=false "
        "points=layers_4,transformer/h/8,mixer#2},"
        "jaxpp-choose-stages"
    ) in text
    (parsed,) = [e for e in parse_pipeline(text) if e.name == "jaxpp-segment-split-points"]
    assert parsed.jaxpp_pass.points == options.split_points
    # Without split points: the chain, the markers first, then layer scans, then the
    # repeated blocks.
    assert (
        "jaxpp-normalize-loop,"
        "jaxpp-assign-segments{chained=true optional=true merge-parallel=false},"
        "jaxpp-segment-layer-scans{chained=true optional=true},"
        "jaxpp-segment-repeated-blocks{chained=true optional=false},"
        "jaxpp-choose-stages"
    ) in default_pipeline_text(mpmd_dim=2)


def test_the_replication_limit_is_a_pass_option():
    pipeline = default_pipeline(pp.PartitionOptions(replicate_max_bytes=7), mpmd_dim=2)
    outer = [e for e in pipeline if "outer" in e.name]
    assert [str(e) for e in outer] == ["jaxpp-outline-outer-code{replicate-max-bytes=7}"]
    assert "jaxpp-outline-outer-code{replicate-max-bytes=1024}" in default_pipeline_text(mpmd_dim=2)


def test_the_stage_settings_are_options_of_the_stage_decision():
    options = pp.PartitionOptions(stage_split=(2, 1), memory_limit_bytes=1 << 20, fuse_tasks=True)
    text = default_pipeline_text(options, mpmd_dim=2, schedule="auto", parallel_ranks=3)
    assert (
        "jaxpp-choose-stages{schedule=auto mpmd-dim=2 stage-split=2,1 memory-limit=1048576 "
        "fuse-tasks=true parallel-ranks=3}"
    ) in text


def test_merging_parallel_markers_is_an_option_of_the_segmenter_and_the_marker_check():
    text = default_pipeline_text(pp.PartitionOptions(merge_parallel_markers=True), mpmd_dim=2)
    assert "jaxpp-assign-segments{chained=true optional=true merge-parallel=true}" in text
    assert "jaxpp-verify-markers{num-stages=0 mpmd-dim=2 merge-parallel=true}" in text
    assert "merge-parallel=false}" in default_pipeline_text(mpmd_dim=2)


@pytest.fixture(scope="module")
def lowered():
    params, batch = mlp_params(2), mlp_batch(4)
    return lower_cached(mlp_train_step, params, batch)


def test_given_options_win_over_the_environment(lowered, monkeypatch, tmp_path):
    monkeypatch.setenv(partition_options.FUSE_TASKS.env, "1")
    monkeypatch.setenv(partition_options.DUMP_DIR.env, str(tmp_path / "from_env"))
    program = pp.partition(lowered, mesh=make_mesh(2), options=pp.PartitionOptions())
    assert not isinstance(program.schedule, pp.AutoFused)
    assert not (tmp_path / "from_env").exists()
    given = pp.PartitionOptions(fuse_tasks=True, dump_dir=str(tmp_path / "given"))
    monkeypatch.delenv(partition_options.FUSE_TASKS.env)
    program = pp.partition(lowered, mesh=make_mesh(2), options=given)
    assert isinstance(program.schedule, pp.AutoFused)
    assert (tmp_path / "given" / "00_input.mlir").exists()


def test_without_options_the_environment_is_read(lowered, monkeypatch):
    monkeypatch.setenv(partition_options.FUSE_TASKS.env, "1")
    assert isinstance(pp.partition(lowered, mesh=make_mesh(2)).schedule, pp.AutoFused)


def test_options_must_be_partition_options(lowered):
    with pytest.raises(TypeError, match="options must be a jaxpp_mlir.PartitionOptions, got dict"):
        pp.partition(lowered, mesh=make_mesh(2), options={"fuse_tasks": True})


def test_settings_are_the_fields_of_the_options(lowered, tmp_path):
    program = pp.partition(
        lowered, mesh=make_mesh(2), options=pp.PartitionOptions(), fuse_tasks=True, dump_dir=None
    )
    assert isinstance(program.schedule, pp.AutoFused)  # the keyword replaced the field
    with pytest.raises(TypeError, match="unexpected keyword argument 'fuse'.*fuse_tasks, "):
        pp.partition(lowered, mesh=make_mesh(2), fuse=True)
    with pytest.raises(TypeError, match="PartitionOptions.strict must be a bool, got 'yes'"):
        pp.partition(lowered, mesh=make_mesh(2), strict="yes")

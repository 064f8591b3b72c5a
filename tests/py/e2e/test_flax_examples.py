"""The flax examples run at tiny sizes and match jax.jit within their stated tolerance."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import toolkit

pytest.importorskip("flax")

# The smallest pipeline (two stages of one block each); the parameters drawn by numpy, as
# flax's initializers would draw them, without compiling those (the default, --init flax,
# is the same model and step).
TINY = ["--layers", "2", "--stages", "2", "--d-model", "16", "--heads", "2", "--vocab", "32",
        "--seq", "8", "--microbatches", "2", "--microbatch-size", "2", "--steps", "2",
        "--init", "numpy"]  # fmt: skip


@pytest.mark.slow
def test_gpt2_linen_bf16_trains_like_jax_jit(capsys):
    example = toolkit.load_example("gpt2_flax_linen")
    assert example.main(TINY) == 0
    out = capsys.readouterr().out
    assert "OK: worst relative difference" in out and "bfloat16 parameters" in out
    assert out.count("step ") == 2


@pytest.mark.slow
def test_gpt2_linen_scanned_blocks_without_markers_train_like_jax_jit(capsys):
    """--scan-layers: the blocks are one nn.scan and the model has no marker; each rank
    holds its layer of every stacked parameter and of both adamw moments."""
    example = toolkit.load_example("gpt2_flax_linen")
    assert example.main([*TINY, "--scan-layers"]) == 0
    out = capsys.readouterr().out
    assert "OK: worst relative difference" in out and "bfloat16 parameters" in out
    assert out.count("step ") == 2
    # 16 stacked leaves per block (2 norms, attention, 2 dense) times param, mu and nu.
    assert "48 stacked arrays (parameters, moments), rows per stage: [(1, 1)]" in out, out


def test_gpt2_linen_rejects_layers_that_do_not_split_into_stages():
    example = toolkit.load_example("gpt2_flax_linen")
    with pytest.raises(SystemExit):
        example.main(["--layers", "3", "--stages", "2"])


@pytest.mark.slow
def test_gpt2_nnx_bf16_trains_like_jax_jit(capsys):
    example = toolkit.load_example("gpt2_flax_nnx")
    assert example.main(TINY) == 0
    out = capsys.readouterr().out
    assert "OK: worst relative difference" in out and "bfloat16 parameters" in out
    assert out.count("step ") == 2


def _leaves_by_path(tree) -> dict[str, object]:
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    return {jax.tree_util.keystr(path): leaf for path, leaf in leaves}


def _initial_params(example, name: str, init: str):
    args = example.parse_args([*TINY[:-2], "--init", init])
    if name == "gpt2_flax_nnx":
        return example.initial_params(args)[1]
    tokens = np.zeros((args.microbatch_size, args.seq), np.int32)
    return example.initial_params(args, example.make_model(args), tokens)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2_flax_linen", "gpt2_flax_nnx"])
def test_default_flax_init_and_the_tests_numpy_init_give_the_same_parameters_layout(name):
    """The training tests draw parameters with numpy (``--init numpy``); the examples'
    default, flax's initializers, must give the same leaves: paths, shapes and dtypes, and
    the same layer-norm scales (ones) and biases (zeros)."""
    example = toolkit.load_example(name)
    flax_init = _leaves_by_path(_initial_params(example, name, "flax"))
    numpy_init = _leaves_by_path(_initial_params(example, name, "numpy"))
    assert sorted(flax_init) == sorted(numpy_init)
    fixed = [path for path in flax_init if "scale" in path or "bias" in path]
    assert any("scale" in path for path in fixed) and any("bias" in path for path in fixed)
    for path, leaf in flax_init.items():
        drawn = numpy_init[path]
        assert (leaf.shape, leaf.dtype) == (drawn.shape, drawn.dtype), path
        assert np.all(np.isfinite(np.asarray(leaf, np.float32))), path
        if path in fixed:
            np.testing.assert_array_equal(np.asarray(leaf), np.asarray(drawn), err_msg=path)

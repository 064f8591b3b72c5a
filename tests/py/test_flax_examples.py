"""The flax examples run at tiny sizes and match jax.jit within their stated tolerance."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

pytest.importorskip("flax")

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
# The smallest pipeline (two stages of one block each); the parameters drawn by numpy, as
# flax's initializers would draw them, without compiling those (the default, --init flax,
# is the same model and step).
TINY = ["--layers", "2", "--stages", "2", "--d-model", "16", "--heads", "2", "--vocab", "32",
        "--seq", "8", "--microbatches", "2", "--microbatch-size", "2", "--steps", "2",
        "--init", "numpy"]  # fmt: skip


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # flax modules resolve their annotations through it
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_gpt2_linen_bf16_trains_like_jax_jit(capsys):
    example = load("gpt2_flax_linen")
    assert example.main(TINY) == 0
    out = capsys.readouterr().out
    assert "OK: worst relative difference" in out and "bfloat16 parameters" in out
    assert out.count("step ") == 2


def test_gpt2_linen_rejects_layers_that_do_not_split_into_stages():
    example = load("gpt2_flax_linen")
    with pytest.raises(SystemExit):
        example.main(["--layers", "3", "--stages", "2"])


@pytest.mark.slow
def test_gpt2_nnx_bf16_trains_like_jax_jit(capsys):
    example = load("gpt2_flax_nnx")
    assert example.main(TINY) == 0
    out = capsys.readouterr().out
    assert "OK: worst relative difference" in out and "bfloat16 parameters" in out
    assert out.count("step ") == 2

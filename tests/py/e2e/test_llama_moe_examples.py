"""examples/llama_nnx.py (tensor parallelism inside stages) and examples/moe_nnx.py (expert
parallelism inside stages) at tiny sizes match jax.jit within their stated tolerance."""

from __future__ import annotations

import re

import pytest
import toolkit

pytest.importorskip("flax")

TINY = ["--layers", "2", "--stages", "2", "--width", "16", "--heads", "2", "--kv-heads", "2",
        "--vocab", "32", "--seq", "8", "--microbatches", "2", "--microbatch-size", "2",
        "--steps", "2", "--init", "numpy"]  # fmt: skip


def _check(out: str, axis: str, split: int) -> None:
    assert re.search(rf"OK: worst relative difference .* 2 stages x 2-way '{axis}'", out), out
    assert out.count("step ") == 2
    # The parameters that the rules split live split on their stage's two devices.
    assert f"{split} parameter arrays split over '{axis}', each on [2] devices" in out, out


def test_llama_with_tensor_parallel_stages_trains_like_jax_jit(capsys):
    example = toolkit.load_example("llama_nnx")
    assert example.main([*TINY, "--ffn", "32"]) == 0
    _check(capsys.readouterr().out, "model", split=2 * 7 + 1)  # q k v o gate up down, head


@pytest.mark.slow
def test_llama_with_scanned_layers_tensor_parallel_stages_and_no_markers_trains_like_jax_jit(
    capsys,
):
    """--scan-layers: one nnx.vmap-stacked layer applied by nnx.scan, no marker, split over
    'model' inside each stage; each stage holds its layer of every stacked parameter and of
    both adamw moments. (Its stage programs failed in XLA's import: jaxpp_mlir/passes/
    xla_import.py.)"""
    example = toolkit.load_example("llama_nnx")
    assert example.main([*TINY, "--ffn", "32", "--scan-layers", "--model", "2"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"OK: worst relative difference .* 2 stages x 2-way 'model'", out), out
    assert out.count("step ") == 2
    # 9 stacked leaves (2 norm scales, q k v o, gate up down) times param, mu and nu.
    assert "27 stacked arrays (parameters, moments), rows per stage: [(1, 1)]" in out, out
    # q k v o gate up down (stacked, their layer axis whole), head.
    assert "8 parameter arrays split over 'model', each on [2] devices" in out, out


def test_moe_with_expert_parallel_stages_trains_like_jax_jit(capsys):
    example = toolkit.load_example("moe_nnx")
    assert example.main([*TINY, "--ffn", "16", "--experts", "4", "--top-k", "2"]) == 0
    _check(capsys.readouterr().out, "expert", split=2 * 3)  # w_gate, w_up, w_down per layer


def test_moe_refuses_experts_that_do_not_split_over_the_devices():
    example = toolkit.load_example("moe_nnx")
    with pytest.raises(SystemExit):
        example.main([*TINY, "--experts", "3"])

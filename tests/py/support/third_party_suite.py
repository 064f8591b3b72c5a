"""What the third-party model tests share (``tests/py/third_party/``): the workloads of
``examples/third_party_models.py``, each trained pipelined and under ``jax.jit`` once per
test file, and their comparison.

Each model comes from an installed package (the ``third-party`` extra) and is used as its
authors ship it: the example adds stage markers from outside. A model's test file holds
what is particular to it (a stated tolerance where its training amplifies rounding, its
dropout); the losses, state and stage count are checked alike for all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import toolkit

STEPS = 3  # optimizer steps, each fed back: rounding differences compound as in training


def examples():
    """``examples/third_party_models.py``, imported once."""
    return toolkit.load_example("third_party_models")


def train(name: str, **settings: Any) -> Any:
    """The workload ``name`` (built with ``settings``: ``cut``, ``num_stages``,
    ``num_layers``) trained ``STEPS`` steps pipelined and under ``jax.jit`` (a
    ``SideBySide``)."""
    module = examples()
    return module.train_side_by_side(module.MODELS[name](**settings), STEPS)


#: The cuts of the models without markers (``examples/third_party_models.py``' ``CUTS``).
UNMARKED_CUTS = ("split-points", "auto")


def assert_trained_like_jax_jit(
    result: Any,
    *,
    state_tolerance: toolkit.Tolerance = toolkit.SEVERAL_STEPS,
    step_tolerance: toolkit.Tolerance = toolkit.SEVERAL_STEPS,
    comparable: Callable[[Any], Any] = lambda tree: tree,
) -> None:
    """Against ``jax.jit``: each step's loss within ``SEVERAL_STEPS``; each single step
    taken from ``jax.jit``'s state (its new state and loss) within ``step_tolerance``; the
    state after the last step (parameters, optimizer and model state) within
    ``state_tolerance``, where training amplified the rounding of earlier steps. Trees
    pass through ``comparable`` first (to set aside values that are rounding noise in
    both programs, with the reason at the call)."""
    toolkit.assert_matches_reference(result.losses, result.reference_losses, toolkit.SEVERAL_STEPS)
    for step, (ours, theirs) in enumerate(zip(result.steps, result.reference_steps, strict=True)):
        try:
            toolkit.assert_matches_reference(comparable(ours), comparable(theirs), step_tolerance)
        except AssertionError as failure:
            raise AssertionError(f"step {step} from jax.jit's state: {failure}") from None
    toolkit.assert_matches_reference(
        comparable(result.state), comparable(result.reference_state), state_tolerance
    )


def assert_dropout_draws_the_masks_of_jax_jit(result: Any, name: str) -> None:
    """Another key gives other dropout masks (another loss), the same as jax.jit's for
    that key: the pipelined step of ``result`` (the workload ``name``) and ``jax.jit``'s,
    from the workload's first state, with keys 10 and 11."""
    workload = examples().MODELS[name]()
    tokens, _ = workload.inputs(0)
    losses = {}
    with workload.mesh_context():
        reference = jax.jit(workload.step)
        for seed in (10, 11):
            key = jax.random.key(seed)
            *_, loss = result.compiled(*workload.state, tokens, key)
            *_, expected = reference(*workload.state, tokens, key)
            toolkit.assert_matches_reference(loss, expected, toolkit.SEPARATE_PROGRAMS)
            losses[seed] = float(loss)
    assert losses[10] != losses[11]

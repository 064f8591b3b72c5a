"""Data dependencies between pipeline tasks.

* ``fwd(s, m)`` needs ``fwd(s-1, m)`` (nothing for stage 0);
* ``bwd(s, m)`` and ``bwd_i(s, m)`` need ``fwd(s, m)`` and the input gradient of stage
  ``s+1`` for ``m`` (its ``bwd_i`` if that stage splits its backward for ``m``, else its
  ``bwd``); the last stage's backward needs only its own forward (the loss is part of it);
* ``bwd_w(s, m)`` needs ``bwd_i(s, m)``.

Each ``(stage, microbatch)`` runs its backward either whole (``bwd``) or split (``bwd_i``
and ``bwd_w``); a schedule may mix both forms across stages and microbatches.
"""

from __future__ import annotations

from collections.abc import Container

from jaxpp_mlir.schedules.task import BWD, BWD_I, BWD_W, FWD, Task


def dependencies(task: Task, num_stages: int, present: Container[Task]) -> tuple[Task, ...]:
    """The tasks whose outputs ``task`` reads; ``present`` tells which backward form is used."""
    stage, mb = task.stage, task.microbatch
    if task.kind == FWD:
        return (Task(stage - 1, FWD, mb),) if stage > 0 else ()
    if task.kind == BWD_W:
        return (Task(stage, BWD_I, mb),)
    deps = [Task(stage, FWD, mb)]
    if stage < num_stages - 1:
        split = Task(stage + 1, BWD_I, mb)
        deps.append(split if split in present else Task(stage + 1, BWD, mb))
    return tuple(deps)


def releases_activation(task: Task) -> bool:
    """Whether finishing ``task`` frees the activations its forward kept alive."""
    return task.kind in (BWD, BWD_W)

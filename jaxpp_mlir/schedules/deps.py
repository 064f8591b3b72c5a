"""Data dependencies between pipeline tasks.

* ``fwd(s, m)`` needs ``fwd(s-1, m)`` (nothing for stage 0);
* ``bwd(s, m)`` and ``bwd_i(s, m)`` need ``fwd(s, m)`` and the input gradient of stage
  ``s+1`` for ``m`` (its ``bwd_i`` if that stage splits its backward for ``m``, else its
  ``bwd``); the last stage's backward needs only its own forward (the loss is part of it);
* ``bwd_w(s, m)`` needs ``bwd_i(s, m)``;
* every task also needs the task of the same stage and kind for ``m-1`` (for a backward
  of ``m-1`` in the other form, its ``bwd``, or the ``bwd_i``/``bwd_w`` matching the
  task's role): the tasks of a stage thread the loop state (gradient and loss
  accumulators) from one microbatch to the next, so they run their microbatches in order.

Each ``(stage, microbatch)`` runs its backward either whole (``bwd``) or split (``bwd_i``
and ``bwd_w``); a schedule may mix both forms across stages and microbatches.
"""

from __future__ import annotations

from collections.abc import Container

from jaxpp_mlir.schedules.task import BWD, BWD_I, BWD_W, FWD, Task


def dependencies(task: Task, num_stages: int, present: Container[Task]) -> tuple[Task, ...]:
    """The tasks whose outputs ``task`` reads; ``present`` tells which backward form is used."""
    stage, mb = task.stage, task.microbatch
    previous: tuple[Task, ...] = ()
    if mb > 0:
        same = Task(stage, BWD_I if task.kind == BWD_I else BWD_W, mb - 1)
        if task.kind == FWD:
            previous = (Task(stage, FWD, mb - 1),)
        else:
            previous = (same if same in present else Task(stage, BWD, mb - 1),)
    if task.kind == FWD:
        return ((Task(stage - 1, FWD, mb),) if stage > 0 else ()) + previous
    if task.kind == BWD_W:
        return (Task(stage, BWD_I, mb), *previous)
    deps = [Task(stage, FWD, mb)]
    if stage < num_stages - 1:
        split = Task(stage + 1, BWD_I, mb)
        deps.append(split if split in present else Task(stage + 1, BWD, mb))
    return (*deps, *previous)


def releases_activation(task: Task) -> bool:
    """Whether finishing ``task`` frees the activations its forward kept alive."""
    return task.kind in (BWD, BWD_W)

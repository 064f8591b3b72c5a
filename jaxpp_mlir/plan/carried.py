"""Loop-carried values: which value ids are versions of which loop state.

The loop state ``k`` (an accumulator) has one version per microbatch: its
initial value (what the code before the loop gives the loop), then what each
microbatch's task yields for it. Donation uses these labels to pair a task's
input that reads version ``m`` of a state with the output that defines
version ``m + 1``.
"""

from __future__ import annotations

from .refs import BodyValue
from .values import ValueNumbering


def loop_state_versions(values: ValueNumbering) -> dict[int, int]:
    """Value id -> the index of the loop state it is a version of (once the loop is expanded).

    An initial value shared by several states keeps the first; such a value is
    read more than once, so donation never consumes it anyway.
    """
    versions: dict[int, int] = {}
    yielded = {
        source.index: state
        for state, source in enumerate(values.state_sources)
        if type(source) is BodyValue
    }
    for ids in values.body_ids.values():
        for index, state in yielded.items():
            value_id = ids.get(index)
            if value_id is not None:
                versions[value_id] = state
    for (position, _), value_id in values.initial_state.items():
        versions.setdefault(value_id, position - 1)
    return versions

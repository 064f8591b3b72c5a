"""How many bytes each rank holds at peak while a plan runs in its dispatch order."""

from __future__ import annotations

from ..liveness import live_bytes, spec_bytes
from ..plan import ExecutionPlan

__all__ = ["peak_bytes_per_rank", "spec_bytes"]


def peak_bytes_per_rank(plan: ExecutionPlan) -> list[int]:
    """Peak live bytes per rank when every value is freed right after its last use.

    A model of the runtime's own bookkeeping (``liveness.live_bytes``): inputs are
    live from the start, outputs to the end, a value in flight counts on its sender
    until the receive, an output written into an input's buffer
    (``StageExecutable.aliases``) takes that buffer over. Temporary buffers inside
    an executable are not counted.
    """
    return live_bytes(plan).peak

"""How the plan builder names a value of ``@main`` before it is numbered per microbatch.

A value outside the loop body has one value id for every microbatch
(``Fixed``); a value the loop body defines has one id per microbatch
(``BodyValue``, its index among the body's results); a block argument of the
loop body is the microbatch index (position 0) or a loop state read from the
previous microbatch (``LoopArgument``).
"""

from __future__ import annotations

from jaxpp_mlir.runtime import records


@records.frozen(slots=True)
class Fixed:
    """A value id, the same in every microbatch."""

    value: int


@records.frozen(slots=True)
class BodyValue:
    """The loop body's value ``index`` (numbered in body order), one id per microbatch."""

    index: int


@records.frozen(slots=True)
class LoopArgument:
    """Block argument ``position`` of the loop body: 0 is the microbatch index, ``k > 0``
    is loop state ``k - 1``."""

    position: int


Ref = Fixed | BodyValue | LoopArgument

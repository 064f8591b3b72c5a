"""The blocks of a stage block by module path, and the segments cuts before blocks make.

Shared by the segmenters that cut a step by module names, with no stage markers
(jaxpp-segment-split-points: the blocks the user names; jaxpp-segment-repeated-blocks:
the model's repeated numbered blocks); a helper, not a pass.

``ModuleIndex`` reads each op's module path (``name_stacks``) and direction: an op is
backward code if autodiff transposed it (its name stack says so) or it computes from
backward code. It records, per module path, the runs of forward ops in it (program order,
ops with no module path in between do not end a run; a module called twice has two
runs) and the runs of backward ops. A ``Block`` is a module path, or one call of a module
that runs several times (``path#k``); cutting before it means: its first forward op
starts a segment, and its backward ends where its last backward op is.

``positions`` turns cuts into a position per op (forward segments 0..N-1, then the
backward segments from the last: position 2N-1-s is segment s's backward). Ops with a
module path take the segment their place in program order gives (forward ops after the
k-th cut: segment k; backward ops after the backward of the block of cut k is done:
segment k-1 or below), so the embedding before the first block joins the first
segment, the head and loss after the last block the last, in both directions. Ops without
one (code of functions JAX called and jaxpp-inline-calls inlined, the loss) that compute
from ops in a module take their place in program order too, except after the last op in a
module of their direction (the accumulation of gradients and of model state into the
loop's accumulators): there they join the latest segment they read from. Ops that compute
from no op in a module (constants, parameter casts, the microbatch's slicing) go with
their earliest user. Positions never decrease along a dependence, so the ordering
(forward segments ascending, then backward segments descending) is a topological order.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import math
import re
from collections.abc import Callable
from typing import NamedTuple

from jax.interpreters.mlir import ir

from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir import utils as ir_utils
from jaxpp_mlir.passes import name_stacks
from jaxpp_mlir.passes.segment_positions import place_unanchored, set_segments

# A numbered module: ``layers_3``, ``block_group_0``, ``h/3`` (the name ``3``).
_NUMBERED = re.compile(r"(?:(.+)_)?(\d+)")
CALL_SEPARATOR = "#"
_LISTED = 16  # candidates listed in an error before "... and N more"


class Block(NamedTuple):
    """A module path (or one call of it: ``call``) whose ops start a segment when cut."""

    path: tuple[str, ...]
    call: int | None  # which call of a module that runs several times (None: all its ops)
    first_forward: int  # position in the stage block of its first forward op
    last_backward: int  # position of its last backward op (-1: it has none)

    @property
    def name(self) -> str:
        text = name_stacks.display(self.path)
        return text if self.call is None else f"{text}{CALL_SEPARATOR}{self.call}"


@dataclasses.dataclass
class _Module:
    """The runs of ops of one module path: [first, last] positions each."""

    forward_runs: list[list[int]] = dataclasses.field(default_factory=list)
    backward_runs: list[list[int]] = dataclasses.field(default_factory=list)


class ModuleIndex:
    """The ops of a stage block (``top_ops``, its terminator left out) by module path."""

    def __init__(self, top_ops: list[ir.Operation]):
        self.ops = top_ops
        self.paths: list[tuple[str, ...]] = []
        self.anchored: list[bool] = []  # in a module, or computed from an op that is
        self.backward: list[bool] = []
        self.producers: list[list[int]] = []
        self.modules: dict[tuple[str, ...], _Module] = {}
        position: dict[ir.Value, int] = {}
        previous = {False: (), True: ()}  # the path of the last forward / backward op in one
        for index, op in enumerate(top_ops):
            path, transposed = name_stacks.scope_path(op.location)
            producers = [p for p in map(position.get, ir_utils.operands_read(op)) if p is not None]
            anchored = bool(path) or any(self.anchored[p] for p in producers)
            backward = anchored and (transposed or any(self.backward[p] for p in producers))
            self.paths.append(path)
            self.anchored.append(anchored)
            self.backward.append(backward)
            self.producers.append(producers)
            if path:
                self._extend_runs(index, path, previous[backward], backward)
                previous[backward] = path
            for result in op.results:
                position[result] = index

    def _extend_runs(
        self, index: int, path: tuple[str, ...], previous: tuple[str, ...], backward: bool
    ) -> None:
        shared = 0
        while shared < min(len(path), len(previous)) and path[shared] == previous[shared]:
            shared += 1
        for depth in range(1, len(path) + 1):
            module = self.modules.get(path[:depth])
            if module is None:
                if backward:
                    continue  # a module known only from backward code is no block
                module = self.modules[path[:depth]] = _Module()
            runs = module.backward_runs if backward else module.forward_runs
            if depth > shared or not runs:
                runs.append([index, index])
            else:
                runs[-1][1] = index

    # -- blocks --------------------------------------------------------------------------

    def blocks_of(self, path: tuple[str, ...]) -> list[Block]:
        """The blocks of module ``path``: itself, or one per call when it runs several times."""
        module = self.modules[path]
        forward, backward = module.forward_runs, module.backward_runs
        if len(forward) == 1:
            return [self._whole(path)]
        if len(backward) == len(forward):
            # Autodiff runs the calls' backward in reverse order: call k's is run n-1-k.
            ends = [backward[-1 - call][1] for call in range(len(forward))]
        else:
            ends = self._backward_ends_by_residuals(path)
        return [
            Block(path, call, run[0], end)
            for call, (run, end) in enumerate(zip(forward, ends, strict=True))
        ]

    def _whole(self, path: tuple[str, ...]) -> Block:
        """Module ``path`` as one block, whatever the number of its calls."""
        module = self.modules[path]
        last = module.backward_runs[-1][1] if module.backward_runs else -1
        return Block(path, None, module.forward_runs[0][0], last)

    def _backward_ends_by_residuals(self, path: tuple[str, ...]) -> list[int]:
        """The last backward op of module ``path`` that reads a value of each call's forward
        (its residuals), where the backward runs do not pair with the calls."""
        starts = [first for first, _ in self.modules[path].forward_runs]
        ends = [-1] * len(starts)
        for index, op_path in enumerate(self.paths):
            if not self.backward[index] or op_path[: len(path)] != path:
                continue
            for producer in self.producers[index]:
                if not self.backward[producer]:
                    call = bisect.bisect_right(starts, producer) - 1
                    if call >= 0 and producer <= self.modules[path].forward_runs[call][1]:
                        ends[call] = index
        return ends

    def repeated_blocks(self) -> list[Block]:
        """The model's repeated blocks, in program order: the members of the outermost
        families of numbered modules (``layers_0..layers_N``, ``h/0..h/N``; every family
        at that depth: an encoder's and a decoder's), else the calls of the outermost
        module that runs several times. Empty when there are neither."""
        families: dict[tuple[tuple[str, ...], str], list[tuple[str, ...]]] = {}
        for path in self.modules:
            numbered = _NUMBERED.fullmatch(path[-1])
            if numbered is not None:
                families.setdefault((path[:-1], numbered.group(1) or ""), []).append(path)
        repeated = {key: members for key, members in families.items() if len(members) > 1}
        called = [path for path, m in self.modules.items() if len(m.forward_runs) > 1]
        family_depth = min((len(parent) for parent, _ in repeated), default=None)
        called_depth = min((len(path) - 1 for path in called), default=None)
        if family_depth is not None and (called_depth is None or family_depth <= called_depth):
            blocks = [
                self._whole(path)
                for (parent, _), members in repeated.items()
                if len(parent) == family_depth
                for path in members
            ]
        elif called_depth is not None:
            # Of several, the one whose calls start where the least data flows (a block's
            # first module, not one inside it after its residual branch), then the heaviest.
            outermost = [p for p in called if len(p) - 1 == called_depth]
            blocks = self.blocks_of(
                min(outermost, key=lambda p: (self._crossing(p), -self._forward_span(p)))
            )
        else:
            return []
        return sorted(blocks, key=lambda block: block.first_forward)

    def candidates(self) -> str:
        """The repeated blocks found, for an error message."""
        blocks = self.repeated_blocks()
        if not blocks:
            return (
                "no repeated blocks were found (module paths come from the ops' "
                "locations: flax and haiku module names, jax.named_scope)"
            )
        return "the repeated blocks found are " + listed([block.name for block in blocks])

    def resolve(self, point: str) -> Block | str:
        """The block split point ``point`` names (a module path, ``path#k`` for call k of a
        module that runs several times), or why it names none (an error message's end).

        ``point`` is matched against the end of every module path: the shallowest match
        wins, several at that depth are ambiguous."""
        text, separator, call_text = point.partition(CALL_SEPARATOR)
        wanted = tuple(part for part in text.split("/") if part)
        if not wanted or (separator and not call_text.isdigit()):
            return f"'{point}' is no module path (write it as Model/layers_4, or path#k)"
        matches = [p for p in self.modules if p[-len(wanted) :] == wanted]
        if not matches:
            return f"split point '{point}' names no module of the step: {self.candidates()}"
        depth = min(len(p) for p in matches)
        shallowest = sorted((p for p in matches if len(p) == depth), key=self._first)
        if len(shallowest) > 1:
            names = [name_stacks.display(p) for p in shallowest]
            return f"split point '{point}' is ambiguous: it names {listed(names)}"
        blocks = self.blocks_of(shallowest[0])
        name = name_stacks.display(shallowest[0])
        if not separator:
            if len(blocks) == 1:
                return blocks[0]
            names = [block.name for block in blocks]
            return (
                f"split point '{point}' is ambiguous: module {name} runs {len(blocks)} times; "
                f"name one call: {listed(names)}"
            )
        call = int(call_text)
        if call >= len(blocks):
            runs = "once" if len(blocks) == 1 else f"{len(blocks)} times (#0 to #{len(blocks) - 1})"
            return f"split point '{point}' names no call of module {name}: it runs {runs}"
        return blocks[call] if len(blocks) > 1 else blocks[0]

    def _forward_span(self, path: tuple[str, ...]) -> int:
        """How many ops the forward runs of module ``path`` span (a measure of its work)."""
        return sum(last - first + 1 for first, last in self.modules[path].forward_runs)

    def _crossing(self, path: tuple[str, ...]) -> float:
        """The mean number of elements the forward carries across a cut before each call
        of module ``path`` but the first."""
        starts = [first for first, _ in self.modules[path].forward_runs[1:]]
        return sum(self._carried[start] for start in starts) / len(starts)

    @functools.cached_property
    def _carried(self) -> list[int]:
        """Per op, the elements of the forward values computed before it and read by it or
        after it in the forward."""
        last_read = list(range(len(self.ops)))
        for index, producers in enumerate(self.producers):
            if not self.backward[index]:
                for producer in producers:
                    last_read[producer] = index
        change = [0] * (len(self.ops) + 1)
        for index, op in enumerate(self.ops):
            if not self.backward[index] and last_read[index] > index:
                size = sum(_elements(result.type) for result in op.results)
                change[index + 1] += size
                change[last_read[index] + 1] -= size
        return list(itertools.accumulate(change))[:-1]

    def _first(self, path: tuple[str, ...]) -> int:
        return self.modules[path].forward_runs[0][0]

    # -- segments ------------------------------------------------------------------------

    def positions(self, cuts: list[Block]) -> list[int | None]:
        """Each op's position (see the module doc) with a segment starting at each of
        ``cuts`` (in program order); None for the ops placed with their earliest user."""
        num_segments = len(cuts) + 1
        starts = [cut.first_forward for cut in cuts]
        ends = sorted(cut.last_backward for cut in cuts)
        last_named = {False: -1, True: -1}  # the last op in a module, forward and backward
        for index, path in enumerate(self.paths):
            if path:
                last_named[self.backward[index]] = index
        positions: list[int | None] = []
        for index in range(len(self.ops)):
            if not self.anchored[index]:
                positions.append(None)
                continue
            backward = self.backward[index]
            read = [positions[p] for p in self.producers[index] if positions[p] is not None]
            if not self.paths[index] and index > last_named[backward]:
                position = max(read)  # after the model's code: with what it computes from
            elif backward:
                segment = len(ends) - bisect.bisect_left(ends, index)
                position = 2 * num_segments - 1 - segment
            else:
                position = bisect.bisect_right(starts, index)
            if backward:
                position = max(position, num_segments)
            positions.append(max(position, *read) if read else position)
        return positions


def _elements(value_type: ir.Type) -> int:
    if not isinstance(value_type, ir.RankedTensorType) or not value_type.has_static_shape:
        return 0
    return math.prod(value_type.shape)


def listed(names: list[str]) -> str:
    """``names`` joined for a message, at most ``_LISTED`` of them."""
    if len(names) <= _LISTED:
        return ", ".join(names)
    return ", ".join(names[:_LISTED]) + f", ... ({len(names) - _LISTED} more)"


# -- what the two segmenters share ------------------------------------------------------

#: Chooses the cuts (blocks starting segments 1..N-1, in program order) of a stage block,
#: or raises a located error; given the index and the op to blame for the whole step.
ChooseCuts = Callable[[ModuleIndex, ir.Operation], list[Block]]


def segment_by_blocks(module: ir.Operation, segmenter: str, choose: ChooseCuts) -> None:
    """Cuts the stage block of ``module`` before the blocks ``choose`` picks: tags every op
    with its segment and kind, records ``jaxpp.num_segments`` and the segmenter (its name
    and the blocks the segments start at)."""
    main = ir_utils.get_main(module)
    loop = ir_utils.find_loop(main)
    block = jaxpp.loop_body(loop) if loop is not None else ir_utils.body(main)
    top_ops = ir_utils.block_ops(block)[:-1]
    index = ModuleIndex(top_ops)
    cuts = choose(index, loop if loop is not None else main)
    positions = index.positions(cuts)
    place_unanchored(index.producers, positions)
    set_segments(top_ops, positions, len(cuts) + 1)
    jaxpp.set_int_attr(module, jaxpp.NUM_SEGMENTS_ATTR, len(cuts) + 1)
    jaxpp.set_segmenter(module, segmenter, [cut.name for cut in cuts])

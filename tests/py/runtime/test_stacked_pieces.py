"""Stacked inputs split into pieces over ranks, and outputs put together from pieces.

Hand-written partitioned programs (``stacked_programs``: the form issue 36's passes give a
scanned model) read each stage's rows of a stacked weight and bias as ``jaxpp.chunk``s and
return the updated rows as ``jaxpp.assemble``. Checked: the plan data (pieces bound to
their ranks, peak bytes of a rank's rows only), the numbers against ``jax.jit`` of the same
step, what comes back (an even split: one ``jax.Array`` sharded along axis 0 over the mpmd
axis, the rank's own layout kept; uneven and interleaved: a ``StackedArray``), and that
feeding either back places every piece from the caller's own buffers (the slot holds the
argument's buffer: no copy), while host data and arrays of other layouts are sliced and
placed.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
import stacked_programs as sp
import toolkit
from jax.sharding import NamedSharding, PartitionSpec
from jaxpp_mlir.runtime import liveness
from jaxpp_mlir.runtime.execution.arguments import place_arguments
from jaxpp_mlir.runtime.execution.executor import compile_plan
from toolkit import make_mesh

import jaxpp_mlir as pp
from jaxpp_mlir.errors import CallError, PartitionError, PlanError
from jaxpp_mlir.ir_context import parse_module
from jaxpp_mlir.observe.summary import stage_bytes

# Compares numbers with plain jax.jit: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

EVEN = (2, 2, 2, 2)
UNEVEN = (2, 1, 3, 2)
INTERLEAVED = (1,) * 8


def _build(rows, schedule, mesh=None, **options):
    layout = sp.layout_for(schedule, rows)
    program = sp.program(layout, schedule, mesh or make_mesh(4), **options)
    return layout, program, program.compile()


@pytest.fixture(scope="module")
def even():
    return _build(EVEN, pp.Std1F1B(4))


@pytest.fixture(scope="module")
def uneven():
    return _build(UNEVEN, pp.Std1F1B(4))


@pytest.fixture(scope="module")
def interleaved():
    return _build(INTERLEAVED, pp.Interleaved1F1B(8, 4))


def _reference(layout, w, b, xs):
    return sp.reference_step(layout.rows, np.asarray(w), np.asarray(b), xs)


def _placed(step: pp.CompiledProgram, args) -> list:
    """The slots after placing ``args`` (the program's flat arguments)."""
    plan = step.executable
    env = [None] * plan.dispatch.num_slots
    place_arguments([*args, *step._index_arrays], plan._inputs, env)
    return env


def _piece_buffers(step: pp.CompiledProgram, env: list, position: int) -> list[set[int]]:
    """Per piece of input ``position``, the buffers its slot holds."""
    slot_of = step.executable.dispatch.slot_of
    binding = step.program.plan.inputs[position]
    return [
        {s.data.unsafe_buffer_pointer() for s in env[slot_of[(p.rank, p.value)]].addressable_shards}
        for p in binding.pieces
    ]


def _own_buffers(x) -> set[int]:
    arrays = [c.array for c in x.chunks] if isinstance(x, pp.StackedArray) else [x]
    return {s.data.unsafe_buffer_pointer() for a in arrays for s in a.addressable_shards}


# ------------------------------------------------------------------ the plan


def test_each_chunk_is_a_piece_of_its_input_on_the_rank_reading_it(even, interleaved):
    for layout, program, _ in (even, interleaved):
        w, b = program.plan.inputs[:2]
        expected = sorted(zip(layout.starts, layout.rows, layout.ranks, strict=True))
        for binding in (w, b):
            assert binding.ranks == ()  # nothing reads the whole input
            assert [(p.start, p.rows, p.rank) for p in binding.pieces] == expected
            for p in binding.pieces:
                info = program.plan.values[(p.rank, p.value)]
                assert info.defined_at == -1 and info.spec == p.spec
        new_w, same_b, loss = program.plan.outputs
        in_order = list(zip(layout.starts, layout.rows, layout.ranks, strict=True))
        assert [(p.start, p.rows, p.rank) for p in new_w.pieces] == in_order
        assert new_w.spec.shape == (layout.num_layers, sp.D, sp.D)
        # The unchanged bias is returned as the very pieces of the input.
        assert {p.value for p in same_b.pieces} == {p.value for p in b.pieces}
        assert not loss.pieces


def test_a_rank_holds_only_its_rows(even, uneven):
    """Before the first instruction each rank holds its own rows of w and b (and rank 0 the
    microbatches and its microbatch indices), not the whole stacked arrays."""
    for layout, program, _ in (even, uneven):
        plan = program.plan
        start = liveness.live_bytes(dataclasses.replace(plan, instructions=())).peak
        row = (sp.D * sp.D + sp.D) * 4
        extra = layout.num_microbatches * (sp.B * sp.D * 4 + 4)
        assert start == [n * row + (extra if r == 0 else 0) for r, n in enumerate(layout.rows)]
        assert max(program.peak_bytes_per_rank()) < layout.num_layers * row


def test_the_summary_counts_a_stage_s_rows_only(uneven):
    layout, program, _ = uneven
    row = (sp.D * sp.D + sp.D) * 4
    data = layout.num_microbatches * (sp.B * sp.D * 4 + 4)  # xs and the microbatch indices
    sizes = stage_bytes(program.plan, 4)
    assert [s["param_bytes"] for s in sizes] == [
        n * row + (data if stage == 0 else 0) for stage, n in enumerate(layout.rows)
    ]
    assert f"stage 2: params {3 * row} B," in program.summary()


# ------------------------------------------------------------ what comes back


def test_even_split_is_one_array_sharded_over_the_mpmd_axis(even):
    layout, program, step = even
    w, b, xs = sp.inputs(layout)
    new_w, same_b, loss = step(w, b, xs)
    mesh = program.mesh.jax_mesh
    assert new_w.sharding == NamedSharding(mesh, PartitionSpec("stage", None, None))
    assert same_b.sharding == NamedSharding(mesh, PartitionSpec("stage", None))
    for shard in new_w.addressable_shards:
        rank = program.mesh.device_mpmd_idx[shard.device]
        assert shard.index[0] == slice(2 * rank, 2 * rank + 2)
    toolkit.assert_matches_reference(
        (new_w, same_b, loss), _reference(layout, w, b, xs), toolkit.SEPARATE_PROGRAMS
    )
    np.testing.assert_array_equal(np.asarray(same_b), b)
    # As any array: moved whole to one device, read back the same.
    one = jax.device_put(new_w, jax.devices()[7])
    assert one.sharding.device_set == {jax.devices()[7]}
    np.testing.assert_array_equal(np.asarray(one), np.asarray(new_w))


@pytest.mark.parametrize(
    ("dims", "spec"),
    [
        (("model", "", ""), (("stage", "model"), None, None)),
        (("", "", "model"), ("stage", None, "model")),
    ],
)
def test_the_rank_layout_of_a_piece_is_kept(dims, spec):
    """Ranks of 2 devices whose rows are split over "model" (rows, or the last dimension):
    the output is sharded over "stage" then the rank's own axes."""
    mesh = toolkit.mpmd_mesh({"stage": 4, "model": 2})
    layout, program, step = _build(EVEN, pp.Std1F1B(4), mesh, weight_dims=dims)
    w, b, xs = sp.inputs(layout)
    new_w, *rest = step(w, b, xs)
    assert new_w.sharding == NamedSharding(mesh.jax_mesh, PartitionSpec(*spec))
    toolkit.assert_matches_reference(
        (new_w, *rest), _reference(layout, w, b, xs), toolkit.SEPARATE_PROGRAMS
    )
    env = _placed(step, [new_w, rest[0], xs])
    own = _own_buffers(new_w)
    assert all(buffers <= own for buffers in _piece_buffers(step, env, 0))


def test_uneven_and_interleaved_splits_are_stacked_arrays(uneven, interleaved):
    for layout, program, step in (uneven, interleaved):
        w, b, xs = sp.inputs(layout)
        new_w, same_b, loss = step(w, b, xs)
        assert isinstance(new_w, pp.StackedArray) and isinstance(same_b, pp.StackedArray)
        assert new_w.shape == w.shape and new_w.dtype == np.float32 and len(new_w) == len(w)
        assert [(c.rows, c.rank) for c in new_w.chunks] == [
            (range(a, a + n), r)
            for a, n, r in zip(layout.starts, layout.rows, layout.ranks, strict=True)
        ]
        for chunk in new_w.chunks:
            assert chunk.array.sharding.device_set == set(program.mesh.rank_devices(chunk.rank))
        toolkit.assert_matches_reference(
            (np.asarray(new_w), np.asarray(same_b), loss),
            _reference(layout, w, b, xs),
            toolkit.SEPARATE_PROGRAMS,
        )
    # Interleaved1F1B(8, 4): rank r holds rows r and r + 4.
    assert new_w.ranks == (0, 1, 2, 3, 0, 1, 2, 3)
    assert repr(new_w).startswith("StackedArray(shape=(8, 4, 4), dtype=float32, chunks=[rows 0:1")


# ------------------------------------------------------- fed back, and moved


@pytest.mark.parametrize("fixture", ["even", "uneven", "interleaved"])
def test_outputs_fed_back_are_placed_without_a_copy(fixture, request):
    layout, _, step = request.getfixturevalue(fixture)
    w, b, xs = sp.inputs(layout)
    new_w, same_b, _ = step(w, b, xs)
    env = _placed(step, [new_w, same_b, xs])
    for position, given in ((0, new_w), (1, same_b)):
        own = _own_buffers(given)
        for buffers in _piece_buffers(step, env, position):
            assert buffers <= own
    # The host arguments were copied in: none of their pieces is a buffer of theirs.
    first = _piece_buffers(step, _placed(step, [w, b, xs]), 0)
    assert not any(buffers & _own_buffers(new_w) for buffers in first)


def test_an_array_sharded_over_the_mpmd_axis_is_split_without_a_copy(even):
    layout, program, step = even
    w, b, xs = sp.inputs(layout)
    sharding = NamedSharding(program.mesh.jax_mesh, PartitionSpec("stage"))
    w_dev, b_dev = jax.device_put(w, sharding), jax.device_put(b, sharding)
    env = _placed(step, [w_dev, b_dev, xs])
    for position, given in ((0, w_dev), (1, b_dev)):
        for buffers in _piece_buffers(step, env, position):
            assert buffers <= _own_buffers(given)
    toolkit.assert_same_program(step(w_dev, b_dev, xs), step(w, b, xs))


def test_arrays_of_other_rows_are_sliced_and_placed(even, uneven, interleaved):
    """Whole arrays on one device, an even split fed to an uneven program, an interleaved
    StackedArray fed to it: the rows a rank lacks are sliced and moved there, and the
    numbers are those of the same values passed as host data."""
    layout, _, step = uneven
    w, b, xs = sp.inputs(layout)
    whole = [jax.device_put(x, jax.devices()[5]) for x in (w, b)]
    split_evenly = even[2](w, b, xs)[:2]
    stacked = interleaved[2](w, b, xs)[:2]
    for given in (whole, split_evenly, stacked):
        host = [np.asarray(x) for x in given]
        toolkit.assert_same_program(step(*given, xs), step(*host, xs))
        buffers = _piece_buffers(step, _placed(step, [*given, xs]), 0)
        assert any(not (piece & _own_buffers(given[0])) for piece in buffers)


@pytest.mark.parametrize("fixture", ["even", "uneven", "interleaved"])
def test_three_steps_fed_back_match_jax_jit(fixture, request):
    layout, _, step = request.getfixturevalue(fixture)
    w, b, xs = sp.inputs(layout, seed=1)
    got, want = (w, b), (w, b)
    for _ in range(3):
        *got, loss = step(*got, xs)
        *want, want_loss = _reference(layout, *want, xs)
    toolkit.assert_matches_reference(
        [np.asarray(got[0]), np.asarray(got[1]), loss],
        [want[0], want[1], want_loss],
        toolkit.SEVERAL_STEPS,
    )


def test_a_donated_stacked_input_is_updated_in_place(even):
    """``w`` donated: each rank's update writes its new rows into the buffer of its old
    ones (the post task aliases them; the launch consumes the piece, the caller's own
    buffer), the bias (returned as it came) is not consumed, and the numbers are those
    of the program without donation."""
    layout, program, step = _build(EVEN, pp.Std1F1B(4), donate=("w",))
    for rank in range(4):
        assert program.plan.executables[f"post_r{rank}"].aliases == ((0, 0),)
    w, b, xs = sp.inputs(layout)
    sharding = NamedSharding(program.mesh.jax_mesh, PartitionSpec("stage"))
    plan_run, slot_of = step.executable, step.executable.dispatch.slot_of
    env = [None] * plan_run.dispatch.num_slots
    w_dev, b_dev = jax.device_put(w, sharding), jax.device_put(b, sharding)
    place_arguments([w_dev, b_dev, xs, *step._index_arrays], plan_run._inputs, env)
    pieces = [
        [env[slot_of[(p.rank, p.value)]] for p in program.plan.inputs[position].pieces]
        for position in (0, 1)
    ]
    assert all(_own_buffers(a) <= _own_buffers(w_dev) for a in pieces[0])
    for op in plan_run.dispatch.ops:
        op(env)
    assert all(a.is_deleted() for a in pieces[0])
    assert not any(a.is_deleted() for a in pieces[1]) and not b_dev.is_deleted()
    w_dev, b_dev = jax.device_put(w, sharding), jax.device_put(b, sharding)
    got = step(w_dev, b_dev, xs)
    assert w_dev.is_deleted() and not b_dev.is_deleted()
    toolkit.assert_same_program(got, even[2](w, b, xs))


def test_a_donated_input_returned_unchanged_stays_alive(even):
    """``b`` donated but returned as it came (its pieces are the output's): as with
    jax.jit, the caller's array stays alive, and so does the output, the same buffers."""
    layout, program, step = _build(EVEN, pp.Std1F1B(4), donate=("b",))
    assert program.donated_inputs == {1}
    w, b, xs = sp.inputs(layout)
    sharding = NamedSharding(program.mesh.jax_mesh, PartitionSpec("stage"))
    b_dev = jax.device_put(b, sharding)
    _, same_b, _ = step(w, b_dev, xs)
    assert not b_dev.is_deleted() and _own_buffers(same_b) == _own_buffers(b_dev)
    np.testing.assert_array_equal(np.asarray(same_b), b)


# ------------------------------------------------------------------ errors


def test_a_stacked_argument_of_another_shape_is_refused(uneven, interleaved):
    layout, _, step = uneven
    w, b, xs = sp.inputs(layout)
    new_w, same_b, _ = interleaved[2](w, b, xs)
    with pytest.raises(CallError, match=r"has shape \(8, 4\) and dtype float32, but the program"):
        step(same_b, same_b, xs)
    short = pp.StackedArray(new_w.chunks[:3])
    with pytest.raises(CallError, match=r"has shape \(3, 4, 4\)"):
        step(short, same_b, xs)
    with pytest.raises(CallError, match=r"do not follow rows \[0, 1\)"):
        pp.StackedArray([new_w.chunks[0], new_w.chunks[2]])


_TASK = (
    '"jaxpp.task"({operands}) {{callee = @{callee}, jaxpp.kind = "{kind}", jaxpp.rank = '
    "{rank} : i64, jaxpp.stage = 0 : i64}}"
)


def _one_rank_module(body: str, result: str = "tensor<4x2xf32>") -> str:
    """``@main(%a: tensor<4x2xf32>)`` of ``body`` on 2 ranks, with ``@f`` (identity of a
    4x2 or 2x2 value) to run as tasks."""
    return f"""module attributes {{jaxpp.num_ranks = 2 : i64, jaxpp.num_stages = 1 : i64}} {{
  func.func public @main(%a: tensor<4x2xf32>) -> {result} {{
    {body}
  }}
  func.func private @f(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {{
    return %x : tensor<4x2xf32>
  }}
  func.func private @g(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {{
    return %x : tensor<2x2xf32>
  }}
}}"""


def _chunk(source: str, start: int, rows: int, extra: str = "") -> str:
    return (
        f'"jaxpp.chunk"({source}) {{jaxpp.rows = {rows} : i64, jaxpp.start = {start} : i64'
        f"{extra}}} : (tensor<4x2xf32>) -> tensor<{rows}x2xf32>"
    )


def _task(operand: str, callee: str, rank: int, kind: str = "post") -> str:
    operands = operand.split(":")[0]
    types = operand.split(": ")[1]
    return _TASK.format(operands=operands, callee=callee, kind=kind, rank=rank) + (
        f" : ({types}) -> {types}"
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            f"%t = {_task('%a: tensor<4x2xf32>', 'f', 0)}\n    %c = {_chunk('%t', 0, 2)}\n"
            f"    %u = {_task('%c: tensor<2x2xf32>', 'g', 0)}\n"
            '    %r = "jaxpp.assemble"(%u, %u) : (tensor<2x2xf32>, tensor<2x2xf32>) -> '
            "tensor<4x2xf32>\n    return %r : tensor<4x2xf32>",
            "not an argument of @main",
        ),
        (
            f"%c = {_chunk('%a', 3, 2)}\n    %u = {_task('%c: tensor<2x2xf32>', 'g', 0)}\n"
            '    %r = "jaxpp.assemble"(%u, %u) : (tensor<2x2xf32>, tensor<2x2xf32>) -> '
            "tensor<4x2xf32>\n    return %r : tensor<4x2xf32>",
            r"takes rows \[3, 5\) of an argument of 4 rows",
        ),
        (
            f"%c = {_chunk('%a', 0, 2)}\n    %d = {_chunk('%a', 2, 2)}\n"
            f"    %u = {_task('%c: tensor<2x2xf32>', 'g', 0)}\n"
            '    %r = "jaxpp.assemble"(%u, %d) : (tensor<2x2xf32>, tensor<2x2xf32>) -> '
            "tensor<4x2xf32>\n    return %r : tensor<4x2xf32>",
            "returned.* is read by no task: give it a jaxpp.rank",
        ),
        (
            f"%c = {_chunk('%a', 0, 2)}\n    %u = {_task('%c: tensor<2x2xf32>', 'g', 0)}\n"
            f"    %v = {_task('%c: tensor<2x2xf32>', 'g', 1)}\n"
            '    %r = "jaxpp.assemble"(%c, %v) : (tensor<2x2xf32>, tensor<2x2xf32>) -> '
            "tensor<4x2xf32>\n    return %r : tensor<4x2xf32>",
            r"is read on ranks \[0, 1\]",
        ),
        (
            f"%c = {_chunk('%a', 0, 2)}\n    %u = {_task('%c: tensor<2x2xf32>', 'g', 0)}\n"
            '    %r = "jaxpp.assemble"(%u, %a) : (tensor<2x2xf32>, tensor<4x2xf32>) -> '
            "tensor<6x2xf32>\n    return %r : tensor<6x2xf32>",
            "takes a whole program input as a piece",
        ),
    ],
    ids=["chunk-of-a-task-result", "rows-out-of-range", "no-rank", "two-ranks", "whole-input"],
)
def test_malformed_chunks_and_assembles_are_refused(body, message):
    result = "tensor<6x2xf32>" if "6x2" in body else "tensor<4x2xf32>"
    module = parse_module(_one_rank_module(body, result))
    with pytest.raises(PartitionError, match=message):
        pp.PartitionedProgram(module, make_mesh(2))


def test_pieces_that_do_not_tile_an_output_are_a_plan_error(even):
    _, program, _ = even
    plan = program.plan
    new_w = plan.outputs[0]
    swapped = (new_w.pieces[1], new_w.pieces[0], *new_w.pieces[2:])
    bad = dataclasses.replace(new_w, pieces=swapped)
    broken = dataclasses.replace(plan, outputs=(bad, *plan.outputs[1:]))
    devices = [program.mesh.rank_devices(r) for r in range(4)]
    with pytest.raises(
        PlanError, match=r"output 0's piece, rows \[2, 4\) .* does not start at row 0"
    ):
        compile_plan(broken, devices)

"""Hand-written partitioned programs whose stacked inputs are split into pieces over ranks.

The form ``jaxpp-split-stacked-values`` (issue 36, part B) gives a scanned model, written
by hand until that pass exists: ``@main`` takes a stacked weight ``w`` (``[L, D, D]``, one
row per layer), a stacked bias ``b`` (``[L, D]``) and the microbatches ``xs``; each stage
reads its rows as ``jaxpp.chunk``s; the forward tasks run their layers
(``h = tanh(h @ w[j] + b[j])``) and accumulate a stacked "gradient" of their rows
(``acc += w * sum(h)``); each rank's ``post`` task updates its rows
(``w - LR * acc``); the return reads ``jaxpp.assemble`` of the updated rows (the new
``w``), of the bias chunks (``b`` unchanged), and the loss (the sum of the last stage's
``h * h``). ``reference_step`` is the same step in ``jax.numpy``.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

import jaxpp_mlir as pp
from jaxpp_mlir.dialect import ops as jaxpp
from jaxpp_mlir.ir_context import parse_module
from jaxpp_mlir.schedules.record import schedule_record

LR = 0.01
D, B = 4, 2  # width, rows per microbatch


@dataclasses.dataclass(frozen=True)
class Layout:
    """How the L rows split into stages (``rows[s]``) and which rank runs each stage."""

    rows: tuple[int, ...]
    ranks: tuple[int, ...]
    num_microbatches: int = 4

    @property
    def starts(self) -> list[int]:
        return [sum(self.rows[:s]) for s in range(len(self.rows))]

    @property
    def num_layers(self) -> int:
        return sum(self.rows)

    @property
    def num_ranks(self) -> int:
        return max(self.ranks) + 1


def layout_for(schedule: pp.Schedule, rows: tuple[int, ...], num_microbatches: int = 4) -> Layout:
    ranks = tuple(schedule.stage_rank(s) for s in range(len(rows)))
    return Layout(rows, ranks, num_microbatches)


def _t(*shape: int) -> str:
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}f32>"


def _stage_function(s: int, n: int, last: bool, num_microbatches: int, wa: str) -> str:
    args, results = [], [_t(B, D), _t(n, D, D) + wa]
    lines = []
    if s == 0:
        args += ["%i: tensor<i32>", f"%xs: {_t(num_microbatches, B, D)}"]
        lines += [
            "%z = stablehlo.constant dense<0> : tensor<i32>",
            f"%x3 = stablehlo.dynamic_slice %xs, %i, %z, %z, sizes = [1, {B}, {D}] : "
            f"({_t(num_microbatches, B, D)}, tensor<i32>, tensor<i32>, tensor<i32>) -> "
            f"{_t(1, B, D)}",
            f"%h_in = stablehlo.reshape %x3 : ({_t(1, B, D)}) -> {_t(B, D)}",
        ]
    else:
        args.append(f"%h_in: {_t(B, D)}")
    args += [f"%w: {_t(n, D, D)}{wa}", f"%b: {_t(n, D)}", f"%acc: {_t(n, D, D)}{wa}"]
    if last:
        args.append("%loss: tensor<f32>")
        results.append("tensor<f32>")
    lines.append("%zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>")
    h = "%h_in"
    for j in range(n):
        lines += [
            f"%w{j}3 = stablehlo.slice %w [{j}:{j + 1}, 0:{D}, 0:{D}] : ({_t(n, D, D)}) -> "
            f"{_t(1, D, D)}",
            f"%w{j} = stablehlo.reshape %w{j}3 : ({_t(1, D, D)}) -> {_t(D, D)}",
            f"%b{j}2 = stablehlo.slice %b [{j}:{j + 1}, 0:{D}] : ({_t(n, D)}) -> {_t(1, D)}",
            f"%b{j} = stablehlo.reshape %b{j}2 : ({_t(1, D)}) -> {_t(D)}",
            f"%bb{j} = stablehlo.broadcast_in_dim %b{j}, dims = [1] : ({_t(D)}) -> {_t(B, D)}",
            f"%m{j} = stablehlo.dot_general {h}, %w{j}, contracting_dims = [1] x [0] : "
            f"({_t(B, D)}, {_t(D, D)}) -> {_t(B, D)}",
            f"%s{j} = stablehlo.add %m{j}, %bb{j} : {_t(B, D)}",
            f"%h{j} = stablehlo.tanh %s{j} : {_t(B, D)}",
        ]
        h = f"%h{j}"
    lines += [
        f"%tot = stablehlo.reduce({h} init: %zero) applies stablehlo.add across dimensions = "
        f"[0, 1] : ({_t(B, D)}, tensor<f32>) -> tensor<f32>",
        f"%totb = stablehlo.broadcast_in_dim %tot, dims = [] : (tensor<f32>) -> {_t(n, D, D)}",
        f"%g = stablehlo.multiply %w, %totb : {_t(n, D, D)}",
        f"%acc_out = stablehlo.add %acc, %g : {_t(n, D, D)}",
    ]
    returned = [h, "%acc_out"]
    if last:
        lines += [
            f"%sq = stablehlo.multiply {h}, {h} : {_t(B, D)}",
            f"%l = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = "
            f"[0, 1] : ({_t(B, D)}, tensor<f32>) -> tensor<f32>",
            "%loss_out = stablehlo.add %loss, %l : tensor<f32>",
        ]
        returned.append("%loss_out")
    body = "\n    ".join(lines)
    plain = ", ".join(r.split(" {")[0] for r in results)
    return (
        f"  func.func private @stage{s}_fwd({', '.join(args)}) -> ({', '.join(results)}) {{\n"
        f"    {body}\n    return {', '.join(returned)} : {plain}\n  }}\n"
    )


def _pre_function(rank: int, stages: list[int], layout: Layout, loss: bool, wa: str) -> str:
    types = [_t(layout.rows[s], D, D) for s in stages] + (["tensor<f32>"] if loss else [])
    results = [t + wa for t in types[: len(stages)]] + types[len(stages) :]
    lines = ["%zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>"]
    names = []
    for s in stages:
        lines.append(
            f"%a{s} = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> "
            f"{_t(layout.rows[s], D, D)}"
        )
        names.append(f"%a{s}")
    if loss:
        names.append("%zero")
    body = "\n    ".join(lines)
    return (
        f"  func.func private @pre_r{rank}() -> ({', '.join(results)}) {{\n    {body}\n"
        f"    return {', '.join(names)} : {', '.join(types)}\n  }}\n"
    )


def _post_function(rank: int, stages: list[int], layout: Layout, wa: str) -> str:
    args, types, lines, names = [], [], [], []
    lines.append(f"%lr = stablehlo.constant dense<{LR:e}> : tensor<f32>")
    for s in stages:
        t = _t(layout.rows[s], D, D)
        args += [f"%w{s}: {t}{wa}", f"%acc{s}: {t}{wa}"]
        types.append(t)
        lines += [
            f"%lrb{s} = stablehlo.broadcast_in_dim %lr, dims = [] : (tensor<f32>) -> {t}",
            f"%step{s} = stablehlo.multiply %lrb{s}, %acc{s} : {t}",
            f"%new{s} = stablehlo.subtract %w{s}, %step{s} : {t}",
        ]
        names.append(f"%new{s}")
    body = "\n    ".join(lines)
    return (
        f"  func.func private @post_r{rank}({', '.join(args)}) -> "
        f"({', '.join(t + wa for t in types)}) {{\n"
        f"    {body}\n    return {', '.join(names)} : {', '.join(types)}\n  }}\n"
    )


def _task(results: str, callee: str, operands: list[tuple[str, str]], out_types: list[str],
          kind: str, rank: int, stage: int) -> str:  # fmt: skip
    names = ", ".join(n for n, _ in operands)
    types = ", ".join(t for _, t in operands)
    lhs = f"{results} = " if out_types else ""
    return (
        f'{lhs}"jaxpp.task"({names}) {{callee = @{callee}, jaxpp.kind = "{kind}", '
        f"jaxpp.rank = {rank} : i64, jaxpp.stage = {stage} : i64}} : ({types}) -> "
        f"({', '.join(out_types)})"
    )


def module_text(
    layout: Layout,
    *,
    bias_ranks: bool = True,
    donate: tuple[str, ...] = (),
    weight_dims: tuple[str, str, str] | None = None,
) -> str:
    """The partitioned module of ``layout``.

    ``bias_ranks``: the bias chunks name their rank with ``jaxpp.rank`` (the weight
    chunks never do: their readers say it). ``donate``: the arguments the caller
    donates (``"w"``, ``"b"``).
    ``weight_dims``: each rank's weight rows (and their accumulators and updates) are
    laid out on its submesh (``stage=1, model=2``) with these axes per dimension
    (``("model", "", "")``: rows split over "model").
    """
    wa = ""
    if weight_dims is not None:
        dims = ", ".join("{" + (f'"{a}"' if a else "") + "}" for a in weight_dims)
        wa = f" {{sdy.sharding = #sdy.sharding<@mesh, [{dims}]>}}"
    num_stages, last = len(layout.rows), len(layout.rows) - 1
    rows, ranks, starts, m = layout.rows, layout.ranks, layout.starts, layout.num_microbatches
    big_l = layout.num_layers
    stages_on = {r: [s for s in range(num_stages) if ranks[s] == r] for r in sorted(set(ranks))}
    donor = {name: " {jax.buffer_donor = true}" if name in donate else "" for name in "wb"}
    main_args = (
        f"%w: {_t(big_l, D, D)}{donor['w']}, %b: {_t(big_l, D)}{donor['b']}, %xs: {_t(m, B, D)}"
    )
    out_types = [_t(big_l, D, D), _t(big_l, D), "tensor<f32>"]
    lines = []
    for s in range(num_stages):
        rank = f", jaxpp.rank = {ranks[s]} : i64" if bias_ranks else ""
        lines.append(
            f'%cw{s} = "jaxpp.chunk"(%w) {{jaxpp.rows = {rows[s]} : i64, jaxpp.start = '
            f"{starts[s]} : i64}} : ({_t(big_l, D, D)}) -> {_t(rows[s], D, D)}"
        )
        lines.append(
            f'%cb{s} = "jaxpp.chunk"(%b) {{jaxpp.rows = {rows[s]} : i64, jaxpp.start = '
            f"{starts[s]} : i64{rank}}} : ({_t(big_l, D)}) -> {_t(rows[s], D)}"
        )
    initial: dict[int, str] = {}
    for r, stages in stages_on.items():
        loss = ranks[last] == r
        types = [_t(rows[s], D, D) for s in stages] + (["tensor<f32>"] if loss else [])
        lines.append(_task(f"%pre{r}:{len(types)}", f"pre_r{r}", [], types, "pre", r, 0))
        for k, s in enumerate(stages):
            initial[s] = f"%pre{r}#{k}"
        if loss:
            initial[-1] = f"%pre{r}#{len(stages)}"
    state_types = ["tensor<f32>"] + [_t(rows[s], D, D) for s in range(num_stages)]
    state_ranks = [ranks[last], *ranks]
    loop_operands = [initial[-1]] + [initial[s] for s in range(num_stages)]
    block_args = ["%i: tensor<i32>", "%loss: tensor<f32>"] + [
        f"%acc{s}: {_t(rows[s], D, D)}" for s in range(num_stages)
    ]
    body = []
    channel = 0
    for s in range(num_stages):
        out = [_t(B, D), _t(rows[s], D, D)] + (["tensor<f32>"] if s == last else [])
        if s == 0:
            operands = [("%i", "tensor<i32>"), ("%xs", _t(m, B, D))]
        else:
            h = f"%f{s - 1}#0"
            if ranks[s] != ranks[s - 1]:
                body.append(
                    f'"jaxpp.send"({h}) {{jaxpp.channel = {channel} : i64, jaxpp.for_task = '
                    f'[{s - 1}, "fwd"], jaxpp.peer = {ranks[s]} : i64, jaxpp.rank = '
                    f"{ranks[s - 1]} : i64}} : ({_t(B, D)}) -> ()"
                )
                body.append(
                    f'%r{s} = "jaxpp.recv"() {{jaxpp.channel = {channel} : i64, jaxpp.for_task = '
                    f'[{s}, "fwd"], jaxpp.peer = {ranks[s - 1]} : i64, jaxpp.rank = '
                    f"{ranks[s]} : i64}} : () -> {_t(B, D)}"
                )
                h = f"%r{s}"
                channel += 1
            operands = [(h, _t(B, D))]
        operands += [
            (f"%cw{s}", _t(rows[s], D, D)),
            (f"%cb{s}", _t(rows[s], D)),
            (f"%acc{s}", _t(rows[s], D, D)),
        ]
        if s == last:
            operands.append(("%loss", "tensor<f32>"))
        body.append(_task(f"%f{s}:{len(out)}", f"stage{s}_fwd", operands, out, "fwd", ranks[s], s))
    yielded = [f"%f{last}#2"] + [f"%f{s}#1" for s in range(num_stages)]
    body.append(f'"jaxpp.yield"({", ".join(yielded)}) : ({", ".join(state_types)}) -> ()')
    body_text = "\n      ".join(body)
    lines.append(
        f'%loop:{len(state_types)} = "jaxpp.loop"({", ".join(loop_operands)}) ({{\n'
        f"    ^bb0({', '.join(block_args)}):\n      {body_text}\n"
        f"    }}) {{jaxpp.num_microbatches = {m} : i64, jaxpp.state_ranks = "
        f"[{', '.join(map(str, state_ranks))}]}} : ({', '.join(state_types)}) -> "
        f"({', '.join(state_types)})"
    )
    new_piece: dict[int, str] = {}
    for r, stages in stages_on.items():
        operands = []
        for s in stages:
            operands += [(f"%cw{s}", _t(rows[s], D, D)), (f"%loop#{s + 1}", _t(rows[s], D, D))]
        types = [_t(rows[s], D, D) for s in stages]
        lines.append(_task(f"%post{r}:{len(types)}", f"post_r{r}", operands, types, "post", r, 0))
        for k, s in enumerate(stages):
            new_piece[s] = f"%post{r}#{k}"
    pieces_w = ", ".join(new_piece[s] for s in range(num_stages))
    types_w = ", ".join(_t(rows[s], D, D) for s in range(num_stages))
    lines.append(f'%new_w = "jaxpp.assemble"({pieces_w}) : ({types_w}) -> {_t(big_l, D, D)}')
    pieces_b = ", ".join(f"%cb{s}" for s in range(num_stages))
    types_b = ", ".join(_t(rows[s], D) for s in range(num_stages))
    lines.append(f'%same_b = "jaxpp.assemble"({pieces_b}) : ({types_b}) -> {_t(big_l, D)}')
    lines.append(f"return %new_w, %same_b, %loop#0 : {', '.join(out_types)}")
    main_body = "\n    ".join(lines)
    functions = (
        "".join(_stage_function(s, rows[s], s == last, m, wa) for s in range(num_stages))
        + "".join(
            _pre_function(r, stages, layout, ranks[last] == r, wa)
            for r, stages in stages_on.items()
        )
        + "".join(_post_function(r, stages, layout, wa) for r, stages in stages_on.items())
    )
    mesh = ""
    attributes = (
        f"jaxpp.num_ranks = {layout.num_ranks} : i64, jaxpp.num_stages = {num_stages} : i64"
    )
    if weight_dims is not None:
        mesh = '  sdy.mesh @mesh = <["stage"=1, "model"=2]>\n'
        attributes += ", mhlo.num_partitions = 2 : i32"
    return (
        f"module @stacked attributes {{{attributes}}} {{\n{mesh}"
        f"  func.func public @main({main_args}) -> ({', '.join(out_types)}) {{\n"
        f"    {main_body}\n  }}\n{functions}}}\n"
    )


def program(
    layout: Layout, schedule: pp.Schedule, mesh: pp.MpmdMesh, **options
) -> pp.PartitionedProgram:
    """``PartitionedProgram`` of ``module_text(layout, **options)`` under ``schedule``."""
    module = parse_module(module_text(layout, **options))
    with module.context:
        jaxpp.set_schedule(module.operation, schedule_record(schedule))
    return pp.PartitionedProgram(module, mesh)


def inputs(layout: Layout, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``w``, ``b`` and ``xs`` of ``layout``'s shapes (host arrays)."""
    rng = np.random.default_rng(seed)
    big_l, m = layout.num_layers, layout.num_microbatches
    w = (rng.standard_normal((big_l, D, D)) / np.sqrt(D)).astype(np.float32)
    b = (0.1 * rng.standard_normal((big_l, D))).astype(np.float32)
    xs = rng.standard_normal((m, B, D)).astype(np.float32)
    return w, b, xs


@functools.partial(jax.jit, static_argnums=0)
def reference_step(rows: tuple[int, ...], w, b, xs):
    """The same step as one ``jax.jit`` program: new ``w``, ``b``, loss."""
    starts = [sum(rows[:s]) for s in range(len(rows))]
    acc = jnp.zeros_like(w)
    loss = jnp.zeros((), jnp.float32)
    for m in range(xs.shape[0]):
        h = xs[m]
        for s, n in enumerate(rows):
            for j in range(starts[s], starts[s] + n):
                h = jnp.tanh(h @ w[j] + b[j])
            rows_s = slice(starts[s], starts[s] + n)
            acc = acc.at[rows_s].add(w[rows_s] * jnp.sum(h))
        loss = loss + jnp.sum(h * h)
    return w - LR * acc, b, loss

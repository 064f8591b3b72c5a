"""``partition()``: a lowered step in, a ``PartitionedProgram`` out."""

from __future__ import annotations

import os
from typing import Any

from jax.extend.mlir import ir

from jaxpp_mlir import ir_context
from jaxpp_mlir.errors import PartitionError
from jaxpp_mlir.mesh import MpmdMesh
from jaxpp_mlir.passes import registry  # noqa: F401  (registers the passes)
from jaxpp_mlir.passes.assign_stages import AssignStages
from jaxpp_mlir.passes.inline_calls import InlineCalls
from jaxpp_mlir.passes.insert_transfers import InsertTransfers
from jaxpp_mlir.passes.outline_stages import OutlineStages
from jaxpp_mlir.passes.pipeline import (
    PipelineElement,
    PipelineFailure,
    make_element,
    run_pipeline,
)
from jaxpp_mlir.passes.place_stages import PlaceStages
from jaxpp_mlir.passes.verify_program import VerifyProgram
from jaxpp_mlir.program import PartitionedProgram

DUMP_DIR_ENV = "JAXPP_MLIR_DUMP_DIR"


def default_pipeline(*, mpmd_dim: int, placement: tuple[int, ...] = ()) -> list[PipelineElement]:
    """The passes ``partition()`` runs, in order."""
    return [
        make_element(InlineCalls()),
        make_element(AssignStages()),
        make_element(OutlineStages()),
        make_element(PlaceStages(mpmd_dim=mpmd_dim, placement=placement)),
        make_element(InsertTransfers()),
        make_element(VerifyProgram()),
    ]


def default_pipeline_text(*, mpmd_dim: int, placement: tuple[int, ...] = ()) -> str:
    elements = default_pipeline(mpmd_dim=mpmd_dim, placement=placement)
    return "builtin.module(" + ",".join(str(e) for e in elements) + ")"


def partition(
    x: Any,
    *,
    mesh: MpmdMesh,
    schedule: Any = None,
    dump_dir: str | os.PathLike | None = None,
) -> PartitionedProgram:
    """Partitions a lowered step into stage programs over ``mesh``'s submeshes.

    ``x`` is a ``jax.stages.Lowered``, an ``ir.Module`` or MLIR text (or
    bytecode). The input is copied; it is never modified. ``dump_dir`` (or the
    environment variable ``JAXPP_MLIR_DUMP_DIR``) receives the input module,
    the IR after every pass, every stage module and the schedule.
    """
    if not isinstance(mesh, MpmdMesh):
        raise TypeError(f"mesh must be a jaxpp_mlir.MpmdMesh, got {type(mesh).__name__}")
    if schedule is not None:
        raise NotImplementedError(
            "schedules need the microbatch loop (treduce), which is not supported yet"
        )
    module, tree_info = _import(x)
    dump_dir = dump_dir or os.environ.get(DUMP_DIR_ENV) or None
    pipeline = default_pipeline(mpmd_dim=mesh.mpmd_dim)
    after_pass = None
    if dump_dir is not None:
        os.makedirs(dump_dir, exist_ok=True)
        _write(dump_dir, "00_input.mlir", _print(module))

        def after_pass(index: int, element: PipelineElement, current: ir.Module) -> None:
            _write(dump_dir, f"{index + 1:02d}_after_{element.name}.mlir", _print(current))

    try:
        run_pipeline(module, pipeline, after_pass=after_pass)
    except PipelineFailure as failure:
        if failure.internal_error is not None:
            raise failure.internal_error
        text = "\n".join(d.render() for d in failure.diagnostics)
        raise PartitionError(
            text or f"pass {failure.pass_name} failed",
            tuple(d.render() for d in failure.diagnostics),
        ) from None
    program = PartitionedProgram(module, mesh, **tree_info)
    if dump_dir is not None:
        program.dump(os.path.join(dump_dir, "program"))
    return program


def _import(x: Any) -> tuple[ir.Module, dict[str, Any]]:
    """A private copy of the input in jaxpp_mlir's context, plus pytree information."""
    tree_info: dict[str, Any] = {}
    if hasattr(x, "compiler_ir") and hasattr(x, "in_tree"):
        tree_info = _lowered_tree_info(x)
        x = x.compiler_ir("stablehlo")
    if isinstance(x, ir.Module):
        x = x.operation.get_asm(binary=True, enable_debug_info=True)
    if not isinstance(x, (str, bytes)):
        raise TypeError(
            "partition() takes a jax.stages.Lowered, an ir.Module or MLIR text, "
            f"got {type(x).__name__}"
        )
    return ir_context.parse_module(x), tree_info


def _lowered_tree_info(lowered: Any) -> dict[str, Any]:
    in_tree = lowered.in_tree
    info: dict[str, Any] = {"in_tree": in_tree, "out_tree": lowered.out_tree}
    compile_args = getattr(getattr(lowered, "_lowering", None), "compile_args", {}) or {}
    kept = compile_args.get("kept_var_idx")
    if kept is not None and len(kept) != in_tree.num_leaves:
        info["kept_inputs"] = sorted(kept)
    return info


def _print(module: ir.Module) -> str:
    return module.operation.get_asm(enable_debug_info=True)


def _write(directory: str | os.PathLike, name: str, text: str) -> None:
    with open(os.path.join(directory, name), "w") as handle:
        handle.write(text)

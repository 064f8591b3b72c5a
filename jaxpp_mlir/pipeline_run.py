"""Running ``partition``'s pipeline on a module: dumps, timings, warnings and errors.

``PipelineRun(module, dump_dir, strict=..., verify_each=...).run(pipeline)`` runs the
passes in order, writes the input and the IR after every pass to ``dump_dir``
(``00_input.mlir``, ``NN_after_<pass>.mlir``), logs each pass's time (``partition_log``),
turns the passes' warnings into ``PartitionWarning``s (errors under ``strict``), and a
failed pass into a ``PartitionError`` (a ``PartitionScheduleError`` for a refused schedule
or split) with the located diagnostics, or the internal error itself. MLIR's verifier runs
after every pass that changed the module with ``verify_each`` (or a ``dump_dir``), else
once after the pipeline: invalid IR is then a ``PartitionError`` that says how to find
the pass that left it.
"""

from __future__ import annotations

import os

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics, partition_log
from jaxpp_mlir.errors import PartitionError, PartitionScheduleError, ScheduleError
from jaxpp_mlir.passes.pipeline import PipelineElement, PipelineFailure, run_pipeline


class PipelineRun:
    """Runs pipelines on one module, numbering dumps across them."""

    def __init__(
        self,
        module: ir.Module,
        dump_dir: str | os.PathLike | None,
        *,
        strict: bool = False,
        verify_each: bool = True,
    ):
        self.module = module
        self.strict = strict
        self.dump_dir = dump_dir
        self.verify_each = verify_each or dump_dir is not None
        self.count = 0
        self.completed: set[str] = set()  # jaxpp passes run so far, across pipelines
        if dump_dir is not None:
            os.makedirs(dump_dir, exist_ok=True)
            write_text(dump_dir, "00_input.mlir", _print(module))

    def run(self, pipeline: list[PipelineElement]) -> None:
        timer = partition_log.PassTimer()

        def after_pass(index: int, element: PipelineElement, current: ir.Module) -> None:
            timer.after_pass(index, element, current)
            self.count += 1
            if self.dump_dir is not None:
                name = f"{self.count:02d}_after_{element.name}.mlir"
                write_text(self.dump_dir, name, _print(current))

        try:
            found = run_pipeline(
                self.module,
                pipeline,
                verify_each=self.verify_each,
                before_pass=timer.before_pass,
                after_pass=after_pass,
                completed=self.completed,
            )
            if not self.verify_each:
                _verify_once(self.module, pipeline)
        except PipelineFailure as failure:
            if failure.internal_error is not None:
                raise failure.internal_error from None
            text = "\n".join(d.render() for d in failure.diagnostics)
            if failure.invalid_ir:
                text += f"\ninvalid IR after pass {failure.pass_name}"
            error = PartitionScheduleError if failure.category is ScheduleError else PartitionError
            raise error(
                text or f"pass {failure.pass_name} failed",
                tuple(d.render() for d in failure.diagnostics),
            ) from None
        partition_log.surface_warnings(found, strict=self.strict)


def _verify_once(module: ir.Module, pipeline: list[PipelineElement]) -> None:
    """MLIR's verifier on the module the whole pipeline left (none ran between passes)."""
    try:
        with module.context:
            module.operation.verify()
    except ir.MLIRError as exc:
        found = [diagnostics.from_mlir(d).render() for d in exc.error_diagnostics]
        passes = ", ".join(element.name for element in pipeline)
        raise PartitionError(
            "\n".join(found)
            + f"\ninvalid IR after the passes {passes}: JAXPP_MLIR_VERIFY_EACH_PASS=1 (or "
            "PartitionOptions(verify_each_pass=True)) names the pass that left it",
            tuple(found),
        ) from None


def _print(module: ir.Module) -> str:
    return module.operation.get_asm(enable_debug_info=True)


def write_text(directory: str | os.PathLike, name: str, text: str) -> None:
    with open(os.path.join(directory, name), "w") as handle:
        handle.write(text)

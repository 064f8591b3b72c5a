"""The compiler's options: ``PartitionOptions`` and the environment variables behind it.

Every setting of ``partition()`` is a field of ``PartitionOptions``, declared once:
``partition(x, mesh=..., options=PartitionOptions(...))`` takes them as data, and
``partition(x, mesh=..., dump_dir=...)`` takes any field by name.
``PartitionOptions.from_env()`` reads the compiler's environment variables (``OPTIONS``
below; the runtime's live in ``jaxpp_mlir.runtime.options``), the only place the
compiler reads them. The passes and the plan builder read no environment: the fields
reach them as pass options (``passes/pipelines.py``).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
from collections.abc import Mapping
from typing import Any

from jaxpp_mlir.runtime import records
from jaxpp_mlir.runtime.options import Option

DUMP_DIR = Option(
    "DUMP_DIR",
    str,
    None,
    "partition",
    "directory receiving the input, the IR after every pass and the stage modules",
)
MAX_MLIR_BYTES = Option(
    "MAX_MLIR_BYTES",
    int,
    4 << 30,
    "partition, jaxpp-opt",
    "largest MLIR input (text or bytecode) accepted, in bytes",
    minimum=1,
)
SETUP_WARNINGS = Option(
    "SETUP_WARNINGS",
    int,
    1,
    "partition",
    "1: PartitionWarning on set-ups that leave ranks idle (few microbatches, ranks without "
    "a stage, uneven stages); 0: none",
    choices=(0, 1),
)
REPLICATE_MAX_BYTES = Option(
    "REPLICATE_MAX_BYTES",
    int,
    1024,
    "partition",
    "largest step output computed on every rank that reads it and returned as one array "
    "over their devices (0: each output on one rank)",
    minimum=0,
)
PACK_ACCUMULATORS = Option(
    "PACK_ACCUMULATORS",
    int,
    0,
    "partition",
    "1: jaxpp-pack-accumulators carries each stage's gradient accumulators as a few packed "
    "buffers (fewer buffers per launch; slower on XLA:CPU, see benchmarks/RESULTS.md)",
    choices=(0, 1),
)
PACK_PARAMETERS = Option(
    "PACK_PARAMETERS",
    int,
    0,
    "partition",
    "1: jaxpp-pack-parameters passes the parameters each stage's tasks read as a few packed "
    "buffers, concatenated once per step (fewer buffers per launch; see benchmarks/RESULTS.md); "
    "2: the same without the operands of contractions (weights: XLA:CPU copies their slices)",
    choices=(0, 1, 2),
)
VERIFY_EACH_PASS = Option(
    "VERIFY_EACH_PASS",
    int,
    0,
    "partition",
    "1: MLIR's verifier runs after every pass that changed the module, naming the pass "
    "that left invalid IR (slower); 0: once, after the last pass",
    choices=(0, 1),
)
FUSE_TASKS = Option(
    "FUSE_TASKS",
    int,
    0,
    "partition",
    "1: partition fuses tasks that run back to back on one rank into one launch wherever "
    "the simulated schedule delays no task by it (schedules.AutoFused)",
    choices=(0, 1),
)

#: The compiler's environment variables, in the order of docs/options.md's table.
OPTIONS: tuple[Option, ...] = (
    DUMP_DIR,
    MAX_MLIR_BYTES,
    SETUP_WARNINGS,
    REPLICATE_MAX_BYTES,
    PACK_ACCUMULATORS,
    PACK_PARAMETERS,
    FUSE_TASKS,
    VERIFY_EACH_PASS,
)

# JAXPP_MLIR_PACK_PARAMETERS: 1 packs the parameters, 2 also leaves contraction operands alone.
_PACK_PARAMETERS_BUT_NOT_CONTRACTION_OPERANDS = 2
_BOOL_FIELDS = (
    "fuse_tasks",
    "pack_accumulators",
    "pack_parameters",
    "pack_contraction_operands",
    "setup_warnings",
    "strict",
    "merge_parallel_markers",
    "verify_each_pass",
)


@records.frozen
class PartitionOptions:
    """How ``partition()`` partitions; the defaults are those of an empty environment.

    - ``fuse_tasks``: run tasks that follow each other on one rank as one launch
      wherever that delays no task (``schedules.AutoFused``).
    - ``pack_accumulators``: run ``jaxpp-pack-accumulators``.
    - ``pack_parameters``: run ``jaxpp-pack-parameters``, which packs the operands of
      contractions too unless ``pack_contraction_operands`` is false.
    - ``replicate_max_bytes``: ``jaxpp-outline-outer-code``'s option of that name.
    - ``dump_dir``: a directory receiving the input, the IR after every pass, the
      stage modules and the schedule (None: no dump).
    - ``setup_warnings``: warn (``PartitionWarning``) about set-ups that waste the
      machine (fewer microbatches than stages, ranks without a stage, uneven stages).
    - ``strict``: what is legal but surprising (a stage marker JAX dropped, markers
      that end the same stage) is a ``PartitionError`` instead of a ``PartitionWarning``.
    - ``stage_split``: segments per stage, e.g. ``(2, 1, 1, 4)`` (None: one segment per
      stage, or the planner's split when the schedule has fewer stages than segments).
    - ``memory_limit_bytes``: the estimated peak bytes per rank a split the planner
      chooses must fit (None: no limit).
    - ``segmenter``: the pass that cuts the step into segments: ``"auto"`` (the
      first of the segment slot's chain that applies: the stage markers, else the
      iterations of layer scans, else the model's repeated blocks), or a name of
      ``passes.pipelines.SEGMENTERS`` (``"markers"``: the stage markers;
      ``"repeated-blocks"``: the model's repeated blocks, read from the module paths in
      the ops' locations; ``"layer-scans"``: the iterations of layer scans).
    - ``split_points``: module paths where stages start, e.g. ``("layers_4", "layers_8")``
      for a model one cannot mark (``jaxpp-segment-split-points``, in place of the
      segmenter; None: not used).
    - ``merge_parallel_markers``: stage markers that do not depend on each other end
      one segment (the rule of earlier releases) instead of one segment each, in
      program order (NVIDIA JaxPP's rule, the default).
    - ``verify_each_pass``: MLIR's verifier runs after every pass that changed the module
      (and always with ``dump_dir``), so that invalid IR names the pass that left it;
      otherwise once, after the last pass (each verification of a large module costs
      about a millisecond).
    """

    fuse_tasks: bool = False
    pack_accumulators: bool = False
    pack_parameters: bool = False
    pack_contraction_operands: bool = True
    replicate_max_bytes: int = REPLICATE_MAX_BYTES.default
    dump_dir: str | None = None
    setup_warnings: bool = True
    strict: bool = False
    stage_split: tuple[int, ...] | None = None
    memory_limit_bytes: int | None = None
    segmenter: str = "auto"
    split_points: tuple[str, ...] | None = None
    merge_parallel_markers: bool = False
    verify_each_pass: bool = False

    def __post_init__(self) -> None:
        for name in _BOOL_FIELDS:
            if not isinstance(getattr(self, name), bool):
                _refuse(TypeError, name, getattr(self, name), "a bool")
        _check_int(self, "replicate_max_bytes", minimum=0)
        if self.dump_dir is not None:
            if not isinstance(self.dump_dir, (str, os.PathLike)):
                _refuse(TypeError, "dump_dir", self.dump_dir, "a path (str or os.PathLike)")
            object.__setattr__(self, "dump_dir", os.fspath(self.dump_dir))
        if self.stage_split is not None:
            object.__setattr__(self, "stage_split", _checked_split(self.stage_split))
        if self.memory_limit_bytes is not None:
            _check_int(self, "memory_limit_bytes", minimum=1)
        _check_segmenter(self.segmenter)
        if self.split_points is not None:
            object.__setattr__(self, "split_points", _checked_split_points(self.split_points))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PartitionOptions:
        """The options the ``JAXPP_MLIR_*`` variables of ``environ`` (default: this
        process's environment) give; unset variables give the defaults."""
        environ = os.environ if environ is None else environ
        pack_parameters = PACK_PARAMETERS.value(environ)
        dump_dir = DUMP_DIR.value(environ)
        return cls(
            fuse_tasks=FUSE_TASKS.value(environ) != 0,
            pack_accumulators=PACK_ACCUMULATORS.value(environ) != 0,
            pack_parameters=pack_parameters != 0,
            pack_contraction_operands=(
                pack_parameters != _PACK_PARAMETERS_BUT_NOT_CONTRACTION_OPERANDS
            ),
            replicate_max_bytes=REPLICATE_MAX_BYTES.value(environ),
            dump_dir=dump_dir or None,
            setup_warnings=SETUP_WARNINGS.value(environ) != 0,
            verify_each_pass=VERIFY_EACH_PASS.value(environ) != 0,
        )

    @classmethod
    def with_settings(
        cls, options: PartitionOptions | None, settings: Mapping[str, Any]
    ) -> PartitionOptions:
        """``options`` (default: ``from_env()``) with the fields ``settings`` names replaced;
        a ``TypeError`` naming a setting that is not a field, and listing the fields."""
        if options is None:
            options = cls.from_env()
        elif not isinstance(options, PartitionOptions):
            raise TypeError(
                f"options must be a jaxpp_mlir.PartitionOptions, got {type(options).__name__}"
            )
        fields = [field.name for field in dataclasses.fields(cls)]
        unknown = sorted(set(settings) - set(fields))
        if unknown:
            raise TypeError(
                f"partition() got an unexpected keyword argument {unknown[0]!r}: its settings "
                f"are the fields of PartitionOptions ({', '.join(fields)})"
            )
        return dataclasses.replace(options, **settings) if settings else options


def _refuse(kind: type[Exception], name: str, value: Any, expected: str) -> None:
    raise kind(f"PartitionOptions.{name} must be {expected}, got {value!r}")


def _check_int(options: PartitionOptions, name: str, *, minimum: int) -> None:
    value = checked_byte_count(f"PartitionOptions.{name}", getattr(options, name), minimum)
    object.__setattr__(options, name, value)


def checked_byte_count(what: str, value: Any, minimum: int) -> int:
    """``value`` as an int of at least ``minimum`` (a numpy integer too): a ``TypeError``
    for another type (``"1GB"``, a float), a ``ValueError`` below ``minimum`` or not
    finite; ``what`` names the setting (``PartitionOptions.memory_limit_bytes``)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = int(value)
        if value < minimum:
            raise ValueError(f"{what} must be at least {minimum}, got {value}")
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{what} must be a finite int of at least {minimum}, got {value!r}")
    raise TypeError(f"{what} must be an int (bytes), got {value!r}")


def _checked_split(split: Any) -> tuple[int, ...]:
    if not isinstance(split, (tuple, list)):
        _refuse(TypeError, "stage_split", split, "a tuple of ints (segments per stage)")
    if not split or any(
        isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1 for n in split
    ):
        _refuse(ValueError, "stage_split", split, "a non-empty tuple of positive ints")
    return tuple(int(n) for n in split)


def _checked_split_points(points: Any) -> tuple[str, ...]:
    if isinstance(points, str) or not isinstance(points, (tuple, list)):
        _refuse(TypeError, "split_points", points, "a tuple of module paths (strs)")
    if not points or any(not isinstance(p, str) for p in points):
        _refuse(TypeError, "split_points", points, "a non-empty tuple of module paths (strs)")
    for point in points:
        # A pass option carries them comma-separated, options space-separated.
        if not point.strip("/") or any(c == "," or c.isspace() for c in point):
            _refuse(
                ValueError,
                "split_points",
                points,
                "module paths such as 'layers_4' or 'transformer/h/4' (non-empty, no commas "
                "or spaces)",
            )
    return tuple(points)


def _check_segmenter(name: Any) -> None:
    from jaxpp_mlir.passes.pipelines import AUTO_SEGMENTER, SEGMENTERS  # built on these options

    names = (AUTO_SEGMENTER, *SEGMENTERS)
    if name not in names:
        _refuse(ValueError, "segmenter", name, f"one of {', '.join(map(repr, names))}")

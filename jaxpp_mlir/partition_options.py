"""``PartitionOptions``: how ``partition()`` partitions, as data.

Every setting ``partition()`` once read from the environment is a field here;
``PartitionOptions.from_env()`` reads today's variables (the only place the
compiler reads them), and ``partition(..., options=)`` takes the result or
one built in code. The passes and the plan builder read no environment: the
fields reach them as pass options (``passes/pipelines.py``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from jaxpp_mlir.passes.pipelines import DEFAULT_REPLICATE_MAX_BYTES
from jaxpp_mlir.runtime import options as _options

# JAXPP_MLIR_PACK_PARAMETERS: 1 packs the parameters, 2 also leaves contraction operands alone.
_PACK_PARAMETERS_BUT_NOT_CONTRACTION_OPERANDS = 2


@dataclasses.dataclass(frozen=True)
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
    """

    fuse_tasks: bool = False
    pack_accumulators: bool = False
    pack_parameters: bool = False
    pack_contraction_operands: bool = True
    replicate_max_bytes: int = DEFAULT_REPLICATE_MAX_BYTES
    dump_dir: str | None = None
    setup_warnings: bool = True

    def __post_init__(self) -> None:
        if self.replicate_max_bytes < 0:
            raise ValueError(
                f"PartitionOptions.replicate_max_bytes must be at least 0, "
                f"got {self.replicate_max_bytes}"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PartitionOptions:
        """The options the ``JAXPP_MLIR_*`` variables of ``environ`` (default: this
        process's environment) give; unset variables give the defaults."""
        environ = os.environ if environ is None else environ
        pack_parameters = _options.PACK_PARAMETERS.value(environ)
        dump_dir = _options.DUMP_DIR.value(environ)
        return cls(
            fuse_tasks=_options.FUSE_TASKS.value(environ) != 0,
            pack_accumulators=_options.PACK_ACCUMULATORS.value(environ) != 0,
            pack_parameters=pack_parameters != 0,
            pack_contraction_operands=(
                pack_parameters != _PACK_PARAMETERS_BUT_NOT_CONTRACTION_OPERANDS
            ),
            replicate_max_bytes=_options.REPLICATE_MAX_BYTES.value(environ),
            dump_dir=dump_dir or None,
            setup_warnings=_options.SETUP_WARNINGS.value(environ) != 0,
        )

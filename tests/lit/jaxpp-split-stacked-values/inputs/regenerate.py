"""Writes adamw_clip_two_stages.mlir: the step of tests/py/passes/test_split_stacked_values.py
(two stages, each a lax.scan over its rows of a stacked parameter, treduce, then
optax.clip_by_global_norm and optax.adamw), lowered and run up to jaxpp-choose-stages.

Run from anywhere: ``python tests/lit/jaxpp-split-stacked-values/inputs/regenerate.py``.
"""

import importlib.util
import os
import pathlib
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

HERE = pathlib.Path(__file__).resolve().parent
TESTS = HERE.parents[2] / "py"

sys.path.insert(0, str(TESTS / "support"))  # the test module's helpers (numerics)
spec = importlib.util.spec_from_file_location(
    "test_split_stacked_values", TESTS / "passes" / "test_split_stacked_values.py"
)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
(HERE / "adamw_clip_two_stages.mlir").write_text(module.staged_text())

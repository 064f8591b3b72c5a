"""The one rule for numerical assertions in this suite.

* **Bit for bit** (``assert_same_program``) only where both sides run the same programs by
  construction: a run against a run again, one process against several, fused against
  unfused plans of the same stage programs, a cache hit against a fresh compile, a
  checkpoint round trip, packed against unpacked where the same ops run.
* **Within a stated number of ulps of the leaf's scale** (``assert_matches_reference``)
  against a *different* program: plain ``jax.jit``, a ``lax.scan`` or Python-loop
  reference, an unmarked model. XLA:CPU vectorizes a reduction with the widest vectors the
  CPU allows (SSE4.2, AVX2, AVX-512), so two programs that compute the same sums in another
  grouping (separate stage programs, a marker's fusion barrier, a loop against its
  unrolled form) round alike on one CPU and differently on another. The tolerance of a
  leaf is ``ulps`` spacings of float at the leaf's largest magnitude: a difference that
  size is rounding, anything larger is a wrong answer. Integer and boolean leaves are
  always compared exactly.

``.ci/run`` runs the numerics-heavy files with XLA capped at SSE4.2 and at AVX2 too
(``--xla_cpu_max_isa``), so an assertion that holds on one instruction set only fails on
every machine.
"""

from __future__ import annotations

import dataclasses

import jax
import ml_dtypes
import numpy as np


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """``ulps`` spacings of float at a leaf's largest magnitude, and why they are allowed."""

    ulps: int
    why: str

    def __post_init__(self) -> None:
        if self.ulps < 1:
            raise ValueError("less than 1 ulp is bit for bit: use assert_same_program")
        if not self.why.strip():
            raise ValueError("a tolerance states its reason")


# One step of a pipelined program against jax.jit: each stage is a separate program (and the
# markers are fusion barriers), so a reduction's sums are grouped by another vector width.
SEPARATE_PROGRAMS = Tolerance(
    ulps=8,
    why="stage programs are separate programs: XLA:CPU groups their reductions' sums by the "
    "CPU's vector width, not as jax.jit's one program does",
)

# Several optimizer steps (or a longer chain of reductions) against jax.jit: the rounding of
# one step feeds the next, so the bound grows with the number of dependent reductions.
SEVERAL_STEPS = Tolerance(
    ulps=64,
    why="rounding differences of separate programs feed later steps (optimizer updates, "
    "several layers of reductions) and grow with them",
)

# Several Adam(W) steps against jax.jit: an update divides an element's first moment by the
# root of its second, so an element whose gradient is far below its leaf's largest carries
# its own relative rounding (not the leaf's) into the parameter: after one step within
# SEPARATE_PROGRAMS, the parameters of the next steps drift further than SEVERAL_STEPS.
# Measured: 111 ulps on an 8-layer nnx scan after 3 AdamW steps (tests/py/e2e/
# test_scanned_layers.py, the moments themselves within 25).
ADAPTIVE_OPTIMIZER_STEPS = Tolerance(
    ulps=512,
    why="Adam divides each element's update by the root of its own second moment, so an "
    "element with a small gradient passes its relative rounding difference, not the leaf's, "
    "into the parameters of later steps",
)


def _leaves_with_paths(tree) -> list[tuple[str, object]]:
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [(jax.tree_util.keystr(path) or "<root>", leaf) for path, leaf in flat]


def _paired(actual, expected) -> list[tuple[str, np.ndarray, np.ndarray]]:
    actual_structure = jax.tree_util.tree_structure(actual)
    expected_structure = jax.tree_util.tree_structure(expected)
    assert actual_structure == expected_structure, f"{actual_structure} != {expected_structure}"
    pairs = []
    for (path, a), (_, e) in zip(
        _leaves_with_paths(actual), _leaves_with_paths(expected), strict=True
    ):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape, f"leaf {path}: shape {a.shape} != {e.shape}"
        assert a.dtype == e.dtype, f"leaf {path}: dtype {a.dtype} != {e.dtype}"
        pairs.append((path, a, e))
    return pairs


def assert_same_program(actual, expected) -> None:
    """Same pytree structure, shapes and dtypes, and every leaf equal bit for bit.

    Only for two results of the same programs by construction (see the module docstring).
    """
    for path, a, e in _paired(actual, expected):
        np.testing.assert_array_equal(a, e, err_msg=f"leaf {path} (the same programs)")


def _is_float(dtype: np.dtype) -> bool:
    return np.issubdtype(dtype, np.floating) or dtype in (
        np.dtype(ml_dtypes.bfloat16),
        np.dtype(ml_dtypes.float8_e4m3fn),
        np.dtype(ml_dtypes.float8_e5m2),
    )


def ulp_at(scale: float, dtype: np.dtype) -> float:
    """The spacing of ``dtype`` floats at magnitude ``scale`` (at least at its smallest normal)."""
    info = ml_dtypes.finfo(dtype)
    scale = max(abs(float(scale)), float(info.tiny))
    return float(info.eps) * 2.0 ** np.floor(np.log2(scale))


def ulps_apart(actual, expected) -> float:
    """The largest difference of two same-shaped float arrays, in ulps of ``expected``'s scale."""
    a, e = np.asarray(actual), np.asarray(expected)
    finite = np.isfinite(e) & np.isfinite(a)
    if not finite.any():
        return 0.0
    scale = float(np.max(np.abs(e[finite].astype(np.float64)), initial=0.0))
    difference = np.abs(a[finite].astype(np.float64) - e[finite].astype(np.float64))
    return float(difference.max(initial=0.0)) / ulp_at(scale, e.dtype)


def assert_matches_reference(actual, expected, tolerance: Tolerance) -> None:
    """Same pytree structure, shapes and dtypes; float leaves within ``tolerance.ulps`` ulps
    of the leaf's largest magnitude (NaN and infinities in the same places), other leaves
    exactly equal. For a result against a different program (see the module docstring)."""
    for path, a, e in _paired(actual, expected):
        if not _is_float(e.dtype):
            np.testing.assert_array_equal(a, e, err_msg=f"leaf {path} (not a float: exact)")
            continue
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        np.testing.assert_array_equal(
            np.isnan(a64), np.isnan(e64), err_msg=f"leaf {path}: NaN in other places"
        )
        infinite = np.isinf(e64) | np.isinf(a64)
        np.testing.assert_array_equal(
            a64[infinite], e64[infinite], err_msg=f"leaf {path}: infinities differ"
        )
        apart = ulps_apart(a, e)
        assert apart <= tolerance.ulps, (
            f"leaf {path} ({e.dtype}{list(e.shape)}): {apart:.1f} ulps of the leaf's scale "
            f"from the reference, more than the {tolerance.ulps} allowed ({tolerance.why})\n"
            f"  actual:   {a.ravel()[:6]}\n  expected: {e.ravel()[:6]}"
        )

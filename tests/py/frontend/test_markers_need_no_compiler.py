"""A marked model runs under plain ``jax.jit`` on a machine with no C++ compiler and a
read-only home directory: the markers are optimization barriers, nothing is built."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import toolkit

COMPILERS = ("g++", "gcc", "c++", "cc", "clang", "clang++")

CHILD = textwrap.dedent(
    """
    import shutil, sys
    import numpy as np
    assert not any(shutil.which(c) for c in sys.argv[2].split(",")), "a compiler is on PATH"
    import jax, jax.numpy as jnp
    import jaxpp_mlir as pp

    def mlp(params, x, marked):
        for w in params:
            x = jnp.tanh(x @ w)
            if marked:
                x = pp.pipeline_enter_stage(x)
        return x

    def loss(params, x, marked):
        return jnp.mean(mlp(params, x, marked) ** 2)

    def step(params, xs, marked):
        grad = lambda x: jax.grad(loss)(params, x, marked)
        if marked:
            return pp.treduce(grad, xs, operation=pp.Add)
        return jax.tree_util.tree_map(lambda g: g.sum(0), jax.vmap(grad)(xs))

    rng = np.random.default_rng(0)
    params = [rng.standard_normal((4, 4)).astype(np.float32) / 2 for _ in range(3)]
    xs = rng.standard_normal((4, 2, 4)).astype(np.float32)
    out = {}
    for marked in (True, False):
        out[f"fwd_{marked}"] = jax.jit(mlp, static_argnums=2)(params, xs[0], marked)
        grads = jax.jit(step, static_argnums=2)(params, xs, marked)
        for i, g in enumerate(grads):
            out[f"grad{i}_{marked}"] = g
    np.savez(sys.argv[1], **{k: np.asarray(v) for k, v in out.items()})
    """
)


def _path_without_compilers() -> str:
    kept = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not any(os.path.exists(os.path.join(d, c)) for c in COMPILERS)
    ]
    return os.pathsep.join(kept)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, np.ndarray]:
    home = tmp_path_factory.mktemp("readonly_home")
    home.chmod(stat.S_IRUSR | stat.S_IXUSR)
    out = tmp_path_factory.mktemp("out") / "results.npz"
    env = toolkit.subprocess_env(HOME=str(home), PATH=_path_without_compilers())
    for name in ("XDG_CACHE_HOME", "JAXPP_MLIR_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR"):
        env.pop(name, None)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(out), ",".join(COMPILERS)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=out.parent,
        )
    finally:
        home.chmod(stat.S_IRWXU)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FFI" not in proc.stderr and "g++" not in proc.stderr, proc.stderr
    assert not list(Path(home).iterdir()), "something was written to HOME"
    with np.load(out) as data:
        return dict(data)


def test_compiler_really_stripped_from_path():
    for compiler in COMPILERS:
        assert shutil.which(compiler, path=_path_without_compilers()) is None


@pytest.mark.slow
def test_marked_forward_matches_unmarked(results):
    toolkit.assert_matches_reference(
        results["fwd_True"], results["fwd_False"], toolkit.SEPARATE_PROGRAMS
    )


@pytest.mark.slow
def test_treduce_gradients_match_unmarked(results):
    for i in range(3):
        toolkit.assert_matches_reference(
            results[f"grad{i}_True"], results[f"grad{i}_False"], toolkit.SEVERAL_STEPS
        )

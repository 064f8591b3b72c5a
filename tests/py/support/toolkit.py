"""What the test files share: meshes, test inputs drawn by numpy, the small MLPs, a lowering
cache, stage compiles shared within a file, the environment of child processes, comparisons.

Importable from any test file as ``toolkit`` (conftest.py puts this folder on
``sys.path``); 8 CPU devices stand in for GPUs (conftest.py sets ``XLA_FLAGS``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numerics
import numpy as np
import optax
import pytest
from jax.sharding import Mesh
from jaxpp_mlir.runtime.compilation import compile as runtime_compile

import jaxpp_mlir as pp
from jaxpp_mlir import partition_options

WIDTH = 4  # the small MLP: XLA compiles narrower rows faster
CPU_DEVICES_FLAG = "--xla_force_host_platform_device_count=8"


def subprocess_env(**overrides: str) -> dict[str, str]:
    """This process's environment for a child Python: 8 CPU devices (as conftest.py gives
    this process), plus ``overrides``."""
    return dict(os.environ, XLA_FLAGS=os.environ.get("XLA_FLAGS", CPU_DEVICES_FLAG), **overrides)


def launch_two_processes(
    script: str, python_server: Any, env: dict[str, str], *, devices_per_proc: int = 2
) -> subprocess.CompletedProcess:
    """``script`` as 2 processes under ``jaxpp_mlir.launch`` (through the fork server),
    bounded to 150 s inside and 180 s outside; asserts that both exited with 0."""
    command = [
        sys.executable, "-m", "jaxpp_mlir.launch", "--nproc", "2",
        "--devices-per-proc", str(devices_per_proc), "--timeout", "150", script,
    ]  # fmt: skip
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **env, **python_server.env},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def load_example(name: str):
    """``examples/<name>.py`` imported as a module (registered in ``sys.modules``: flax
    modules resolve their annotations through it)."""
    return _load_script("examples", name)


def load_benchmark(name: str):
    """``benchmarks/<name>.py`` imported as a module (registered in ``sys.modules``: its
    dataclasses look their module up there)."""
    return _load_script("benchmarks", name)


def _load_script(folder: str, name: str):
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[3] / folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{folder}_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def on_device(values: np.ndarray) -> jax.Array:
    """``values`` as an array on the default device, uncommitted, like ``jnp.asarray``.

    Test inputs come from numpy and ``jax.device_put``: every ``jax.random`` call, every
    eager op, and even ``jnp.asarray`` (jax 0.10 stages the copy as a ``jit(stage)``
    program) is an XLA compilation per new shape, which costs more than most tests'
    own work; ``jax.device_put`` compiles nothing.
    """
    return jax.device_put(values)


# -- meshes -------------------------------------------------------------------------------


def make_mesh(num_ranks: int) -> pp.MpmdMesh:
    """A 1-D pipeline mesh over the first ``num_ranks`` devices, one device per rank."""
    devices = np.array(jax.devices()[:num_ranks])
    return pp.MpmdMesh(Mesh(devices, ("stage",)), "stage")


def mpmd_mesh(shape: dict[str, int]) -> pp.MpmdMesh:
    """A pipeline mesh of the given axis sizes (``"stage"`` is the pipeline axis)."""
    devices = np.array(jax.devices()[: int(np.prod(list(shape.values())))])
    return pp.MpmdMesh(Mesh(devices.reshape(tuple(shape.values())), tuple(shape)), "stage")


def lit_input_mesh(path: os.PathLike | str, num_ranks: int) -> pp.MpmdMesh:
    """The mesh to partition a module captured in tests/lit/inputs/ on: sharded captures
    (``sharded_*``) were lowered on a (stage=2, data=2, model=2) lowering mesh, the others
    get ``make_mesh(num_ranks)``."""
    if os.path.basename(path).startswith("sharded_"):
        return mpmd_mesh({"stage": 2, "data": 2, "model": 2})
    return make_mesh(num_ranks)


# -- the small MLP (one tanh layer per stage) ---------------------------------------------


def mlp_params(num_stages: int, width: int = WIDTH, seed: int = 0) -> list[jax.Array]:
    """One ``width x width`` weight per stage (drawn by numpy: no XLA compile per shape)."""
    rng = np.random.default_rng(seed)
    scale = np.float32(1 / np.sqrt(width))
    return [
        on_device(rng.standard_normal((width, width), dtype=np.float32) * scale)
        for _ in range(num_stages)
    ]


def mlp_batch(
    num_microbatches: int, microbatch_size: int = 2, width: int = WIDTH, seed: int = 1
) -> tuple[jax.Array, jax.Array]:
    """Inputs and targets with a leading microbatch axis."""
    shape = (num_microbatches, microbatch_size, width)
    return normal(shape, seed=seed), normal(shape, seed=seed + 1000)


def normal(shape: tuple[int, ...], *, seed: int, scale: float = 1.0, dtype=np.float32) -> jax.Array:
    """Normal values (mean 0, standard deviation ``scale``) from numpy on the default device.

    Drawn by numpy, put on the device by ``on_device`` (no XLA compilation).
    """
    values = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    return on_device((values * np.float32(scale)).astype(dtype))


def uniform_ints(shape: tuple[int, ...], high: int, *, seed: int) -> jax.Array:
    """Integers in ``[0, high)`` from numpy (int32) on the default device."""
    return on_device(np.random.default_rng(seed).integers(0, high, shape, dtype=np.int32))


def mlp_loss(params, microbatch):
    """Mean squared error of the MLP; every layer ends a stage."""
    x, y = microbatch
    for w in params:
        x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
    return jnp.mean((x - y) ** 2)


def mlp_train_step(params, batch):
    """One SGD step over the microbatches of ``batch`` (treduce), with the per-microbatch losses."""
    losses, grads = pp.treduce(
        lambda mb: jax.value_and_grad(mlp_loss)(params, mb), batch, operation=(pp.Concat(), pp.Add)
    )
    return [p - 0.1 * g for p, g in zip(params, grads, strict=True)], losses


def biased_layers_inputs(
    num_layers: int, width: int, num_microbatches: int, *, seed: int
) -> tuple[list[tuple[jax.Array, jax.Array]], jax.Array, jax.Array]:
    """``(weight, bias)`` per layer (bias 0.01), then inputs and targets of 2-row microbatches."""
    rng = np.random.default_rng(seed)
    scale = np.float32(1 / np.sqrt(width))
    params = [
        (
            on_device(rng.standard_normal((width, width), dtype=np.float32) * scale),
            on_device(np.full((width,), 0.01, np.float32)),
        )
        for _ in range(num_layers)
    ]
    shape = (num_microbatches, 2, width)
    xs, ys = (on_device(rng.standard_normal(shape, dtype=np.float32)) for _ in range(2))
    return params, xs, ys


def biased_layers_loss(params, microbatch, *, layers_per_stage: int = 0):
    """Mean squared error of ``tanh(x @ w + b)`` layers, a stage marker after every
    ``layers_per_stage`` layers (0: no markers, for the plain-JAX reference)."""
    x, y = microbatch
    for i, (w, b) in enumerate(params):
        x = jnp.tanh(x @ w + b)
        if layers_per_stage and i % layers_per_stage == layers_per_stage - 1:
            x = pp.pipeline_enter_stage(x)
    return jnp.mean((x - y) ** 2)


def biased_layers_sgd_step(params, xs, ys, *, layers_per_stage: int):
    """One SGD step (rate 0.1) over the microbatches of ``(xs, ys)`` with ``treduce``
    (gradients and losses summed), with the summed loss."""
    loss, grads = pp.treduce(
        lambda mb: jax.value_and_grad(
            lambda p: biased_layers_loss(p, mb, layers_per_stage=layers_per_stage)
        )(params),
        (xs, ys),
        operation=pp.Add,
    )
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), loss


def biased_layers_scan_step(params, xs, ys):
    """``biased_layers_sgd_step`` in plain JAX: a ``lax.scan`` over the microbatches."""

    def body(carry, microbatch):
        total, grads = carry
        value, g = jax.value_and_grad(biased_layers_loss)(params, microbatch)
        return (total + value, jax.tree_util.tree_map(jnp.add, grads, g)), None

    zeros = (jnp.zeros((), jnp.float32), jax.tree_util.tree_map(jnp.zeros_like, params))
    (total, grads), _ = jax.lax.scan(body, zeros, (xs, ys))
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), total


def partition_with_packed_accumulators(lowered, **kwargs) -> pp.PartitionedProgram:
    """``pp.partition(lowered, **kwargs)`` with ``JAXPP_MLIR_PACK_ACCUMULATORS=1``."""
    previous = os.environ.get(partition_options.PACK_ACCUMULATORS.env)
    os.environ[partition_options.PACK_ACCUMULATORS.env] = "1"
    try:
        return pp.partition(lowered, **kwargs)
    finally:
        if previous is None:
            del os.environ[partition_options.PACK_ACCUMULATORS.env]
        else:
            os.environ[partition_options.PACK_ACCUMULATORS.env] = previous


def partition_with_imbalance_warnings(lowered, **kwargs) -> tuple[pp.PartitionedProgram, list]:
    """``pp.partition(lowered, **kwargs)`` and the messages of the warnings it gave that
    its stages' estimated costs are far apart ("stage S costs about Nx stage T")."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = pp.partition(lowered, **kwargs)
    return program, [str(w.message) for w in caught if "costs about" in str(w.message)]


# -- the biased MLP trained with Adam (checkpoint tests) -----------------------------------

ADAM = optax.adam(1e-2)


def biased_mlp_loss(params, microbatch):
    """Mean squared error of ``tanh(x @ w + b)`` layers; every layer ends a stage."""
    x, y = microbatch
    for layer in params:
        x = pp.pipeline_enter_stage(jnp.tanh(x @ layer["w"] + layer["b"]))
    return jnp.mean((x - y) ** 2)


def adam_train_step(params, opt_state, batch):
    """One Adam step over the microbatches of ``batch`` (summed gradients), with the losses."""
    losses, grads = pp.treduce(lambda mb: jax.value_and_grad(biased_mlp_loss)(params, mb), batch)
    updates, opt_state = ADAM.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, losses


def adam_mlp_state(num_layers: int, width: int, num_microbatches: int = 4):
    """Parameters (``{"w", "b"}`` per layer), Adam's state and a batch of 2-row microbatches."""
    rng = np.random.default_rng(0)
    params = [
        {
            "w": on_device(rng.standard_normal((width, width), dtype=np.float32) / 2),
            "b": on_device(np.zeros((width,), np.float32)),
        }
        for _ in range(num_layers)
    ]
    shape = (num_microbatches, 2, width)
    batch = (normal(shape, seed=1), normal(shape, seed=2))
    return params, jax.jit(ADAM.init)(params), batch


# -- lowering cache -----------------------------------------------------------------------

_LOWERINGS: dict[tuple, Any] = {}


def _signature(tree) -> tuple:
    leaves, structure = jax.tree_util.tree_flatten(tree)
    return structure, tuple((np.shape(x), str(jnp.result_type(x))) for x in leaves)


def lower_cached(fn: Callable, *args) -> jax.stages.Lowered:
    """``jax.jit(fn).lower(*args)``, once per function and argument shapes.

    ``partition`` copies the module it is given, so one lowering serves any
    number of partitions.
    """
    key = (fn, _signature(args))
    if key not in _LOWERINGS:
        _LOWERINGS[key] = jax.jit(fn).lower(*args)
    return _LOWERINGS[key]


# -- compiled stages shared between programs -----------------------------------------------


@contextlib.contextmanager
def shared_stage_compiles() -> Iterator[dict]:
    """Within the block, a stage module already compiled (by an earlier program: schedules
    often produce identical stages) is not compiled again: for the same devices its
    executable is reused, for as many other devices it is rebound to them the way the
    runtime rebinds identical stages of one program (``compile_stages``).

    Yields the cache: ``(module text, device ids)`` to the executable.
    """
    original, original_rebind = runtime_compile.compile_stage, runtime_compile._rebind
    cache: dict[tuple[str, tuple[int, ...]], Any] = {}
    compiled_jobs: dict[tuple[str, int], tuple[Any, tuple]] = {}
    # A rebound executable cannot be serialized again (XLA:CPU), so rebinding one
    # rebinds the executable it came from.
    origin_of: dict[int, tuple[Any, tuple]] = {}

    def memoized(name, text, devices):
        devices = tuple(devices)
        key = (text, tuple(d.id for d in devices))
        if key not in cache:
            earlier = compiled_jobs.get((text, len(devices)))
            if earlier is None:
                cache[key] = original(name, text, devices)
                compiled_jobs[(text, len(devices))] = (cache[key], (name, text, devices))
            else:
                cache[key] = original_rebind(name, *earlier, devices)
                origin_of[id(cache[key])] = earlier
        return cache[key]

    def rebind_from_origin(name, exe, source, devices):
        return original_rebind(name, *origin_of.get(id(exe), (exe, source)), devices)

    runtime_compile.compile_stage, runtime_compile._rebind = memoized, rebind_from_origin
    try:
        yield cache
    finally:
        runtime_compile.compile_stage, runtime_compile._rebind = original, original_rebind


def stage_compiles_shared_by_file():
    """A module-scoped autouse fixture that runs a test file inside ``shared_stage_compiles``
    (its programs share identical stage modules: each compiles once). A test file assigns
    it: ``shared_stage_compiles = toolkit.stage_compiles_shared_by_file()``."""

    @pytest.fixture(scope="module", autouse=True, name="shared_stage_compiles")
    def fixture() -> Iterator[dict]:
        with shared_stage_compiles() as cache:
            yield cache

    return fixture


# -- comparisons --------------------------------------------------------------------------


# The suite's one rule for numerical assertions: numerics.py (bit for bit only between the
# same programs by construction, a tolerance in ulps against a different program).
assert_same_program = numerics.assert_same_program
assert_matches_reference = numerics.assert_matches_reference
SEPARATE_PROGRAMS = numerics.SEPARATE_PROGRAMS
SEVERAL_STEPS = numerics.SEVERAL_STEPS
ADAPTIVE_OPTIMIZER_STEPS = numerics.ADAPTIVE_OPTIMIZER_STEPS
Tolerance = numerics.Tolerance


# -- scripts run in forked processes (tests/py/script_runner.py) --------------------------

SCRIPT_RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "script_runner.py")


def run_scripts(
    jobs: list[tuple[list[str], str]], *, timeout_s: float, env: dict[str, str] | None = None
) -> list[dict]:
    """Runs each ``(argv, cwd)`` job as ``python *argv`` in ``cwd``, each in a process of its
    own forked from one runner that imported jax once (``script_runner.py``). Returns per
    job, in order: ``returncode`` (negative: killed by that signal), ``timed_out`` (after
    ``timeout_s``), and its ``stdout`` and ``stderr`` (kept in ``cwd`` as ``stdout.txt``
    and ``stderr.txt``)."""
    import json

    spec = [{"argv": [str(a) for a in argv], "cwd": str(cwd)} for argv, cwd in jobs]
    done = subprocess.run(
        [sys.executable, SCRIPT_RUNNER, str(timeout_s), json.dumps(spec)],
        env=subprocess_env() if env is None else env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s * len(spec) + 120,
        check=False,
    )
    assert done.returncode == 0, f"the script runner failed:\n{done.stderr[-4000:]}"
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["argv"] for r in results] == [job["argv"] for job in spec], done.stderr[-4000:]
    for result, job in zip(results, spec, strict=True):
        for stream in ("stdout", "stderr"):
            path = os.path.join(job["cwd"], f"{stream}.txt")
            result[stream] = open(path).read() if os.path.exists(path) else ""
    return results


# -- the Python fork server (tests/fork_servers/python_server.py) ----------------------------

FORK_SERVERS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
    "tests",
    "fork_servers",
)
PYTHON_CLIENT = os.path.join(FORK_SERVERS, "python_client.py")


@contextlib.contextmanager
def _running_fork_server(
    script: str, options: list[str], what: str, directory: str, start_seconds: float
) -> Iterator[str]:
    """``python -m module SOCKET *options`` (a fork server of ``jaxpp_mlir/tools``) on a
    socket in ``directory``, started with this process's environment; yields the socket's
    path, and at the end removes it (the server exits then) and checks that the server
    exited cleanly."""
    socket_path = os.path.join(directory, "server.sock")
    server = subprocess.Popen(
        [sys.executable, os.path.join(FORK_SERVERS, script), socket_path, *options],
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + start_seconds
        while not os.path.exists(socket_path):
            assert server.poll() is None, f"the {what} exited with {server.returncode}"
            assert time.monotonic() < deadline, f"the {what} did not come up"
            time.sleep(0.05)
        yield socket_path
    finally:
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
    assert server.returncode == 0, f"the {what} exited with {server.returncode}"


def running_opt_server(directory: str, *, start_seconds: float = 120.0):
    """A ``jaxpp-opt`` fork server (``tests/fork_servers/opt_server.py``) on a socket in
    ``directory``, as the lit suite starts it (see ``_running_fork_server``)."""
    return _running_fork_server(
        "opt_server.py",
        ["--idle-timeout", "300"],
        "jaxpp-opt server",
        directory,
        start_seconds,
    )


def running_python_server(directory: str, *, start_seconds: float = 120.0):
    """A Python fork server (``tests/fork_servers/python_server.py``) on a socket in
    ``directory`` (see ``_running_fork_server``)."""
    return _running_fork_server("python_server.py", [], "Python server", directory, start_seconds)


# -- a marked step for scripts run in a fresh interpreter -----------------------------------

#: Python that defines a two-stage marked step (``step``, ``params``, ``xs``) and ``lowered``
#: and ``mesh`` (2 devices, ``stage`` axis), for a script that partitions it in a fresh
#: process: what that process loads, or starts, is then its own.
TWO_STAGE_MARKED_STEP = """
import json, sys
import jax, jax.numpy as jnp, numpy as np
import jaxpp_mlir as pp

def loss(params, x):
    for w in params:
        x = pp.pipeline_enter_stage(jnp.tanh(x @ w))
    return jnp.mean(x ** 2)

def step(params, xs):
    return pp.treduce(lambda x: jax.grad(loss)(params, x), xs, operation=pp.Add)

params = [np.eye(4, dtype=np.float32) for _ in range(2)]
xs = np.ones((2, 2, 4), np.float32)
mesh = pp.MpmdMesh(jax.sharding.Mesh(np.array(jax.devices()[:2]), ("stage",)), "stage")
lowered = jax.jit(step).lower(params, xs)
"""


def run_fresh_python(
    code: str, *, devices: int = 2, timeout: float = 300, **env: str
) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh interpreter with ``devices`` CPU devices (and ``env``);
    returns the finished process (its ``stdout``, ``stderr``), or fails naming the end of
    its stderr."""
    environ = {
        **os.environ,
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
        **env,
    }
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=environ
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done

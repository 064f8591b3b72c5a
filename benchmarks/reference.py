"""The performance contract's reference workloads (issue 6), against plain jax.jit.

Run: python benchmarks/reference.py [--workloads W1,W2] [--steps 20] [--warmup 3]
                                    [--repeat-processes 3] [--breakdown]

W1: 8-layer MLP, width 512, float32, batch 64 as 8 microbatches of 8, 4 stages
(a marker after every 2nd layer, the last one included), 4 CPU devices.
W2: 32 layers, width 256, batch 64 as 16 microbatches of 4, 8 stages (4 layers
each), 8 CPU devices.

Layer i is ``x @ w_i + b_i`` with ``tanh`` after every layer but the last;
weights N(0, 1/width), zero biases, all drawn from ``PRNGKey(0)`` (split into
one key per layer, then one for the inputs and one for the targets). The loss
is each microbatch's MSE divided by the number of microbatches; ``treduce``
sums the losses and the gradients over microbatches (``Add`` for both), and
plain SGD (lr 0.01) follows the loop. The pipelined step is partitioned with
``Std1F1B``.

The baseline is the same step, without markers, under plain ``jax.jit`` on one
device, with the microbatch loop as ``lax.scan`` (same accumulation order).

For each workload it prints lower / partition / compile / first-call seconds,
the median step time over ``--steps`` steps after ``--warmup`` warm-up steps
(parameters fed back, inputs placed once on the ranks that read them), the
plain-jit lower / compile / first-call and step time measured in the same
process, the step ratio, and the max abs difference of parameters and loss
against plain jit (after the first step, and after all steps) with the same in ulps
of each leaf's largest magnitude (``max_ulps``: at most ``ULPS_ONE_STEP`` after one
step, ``ULPS_SEVERAL_STEPS`` after all; XLA:CPU rounds the separate stage programs'
reductions by the CPU's vector width, so bit for bit on one CPU, an ulp apart on
another); for W2 also the
warm partition time (least of 7, timed alternately) with 16 and with 64
microbatches and their ratio; then the same as one JSON line. With
``--repeat-processes N`` it re-runs itself in N fresh processes and reports the
median of every figure across them. The targets of
issue 6 are printed next to the figures they constrain.

``run_workload(spec)`` is the code path; a test can call it on a tiny spec.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

import jaxpp_mlir as pp  # noqa: E402

LEARNING_RATE = 0.01


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    num_layers: int
    width: int
    num_microbatches: int
    microbatch_size: int
    num_stages: int  # one CPU device per stage
    # Issue 6: partition time with this many microbatches (4x the workload's) must stay
    # within 20% of the workload's own (0: not measured).
    scaling_microbatches: int = 0

    @property
    def layers_per_stage(self) -> int:
        return self.num_layers // self.num_stages


WORKLOADS = {
    "W1": Workload(
        "W1", num_layers=8, width=512, num_microbatches=8, microbatch_size=8, num_stages=4
    ),
    "W2": Workload(
        "W2",
        num_layers=32,
        width=256,
        num_microbatches=16,
        microbatch_size=4,
        num_stages=8,
        scaling_microbatches=64,
    ),
}

# Issue 6's targets (medians of 3 fresh processes).
TARGET_STEP_RATIO = 1.2
TARGET_PARTITION_S = {"W2": 0.3}
TARGET_TIME_TO_FIRST_STEP_S = {"W1": 0.75, "W2": 1.75}  # lower + partition + compile + first call
TARGET_PARTITION_SCALING = 1.2  # partition at scaling_microbatches / at num_microbatches
JAXPP_STEP_RATIO = {"W1": 1.5, "W2": 2.3}  # measured NVIDIA JaxPP figures quoted in the issue


# ------------------------------------------------------------------ the model


def init(spec: Workload):
    keys = jax.random.split(jax.random.PRNGKey(0), spec.num_layers + 2)
    params = [
        (
            jax.random.normal(k, (spec.width, spec.width), jnp.float32) / np.sqrt(spec.width),
            jnp.zeros((spec.width,), jnp.float32),
        )
        for k in keys[: spec.num_layers]
    ]
    shape = (spec.num_microbatches, spec.microbatch_size, spec.width)
    xs = jax.random.normal(keys[-2], shape, jnp.float32)
    ys = jax.random.normal(keys[-1], shape, jnp.float32)
    return params, xs, ys


def make_loss(spec: Workload, *, markers: bool):
    """Per-microbatch loss: MSE / num_microbatches (markers only for the pipelined step)."""

    def loss(params, microbatch):
        x, y = microbatch
        for i, (w, b) in enumerate(params):
            x = x @ w + b
            if i < spec.num_layers - 1:
                x = jnp.tanh(x)
            if markers and i % spec.layers_per_stage == spec.layers_per_stage - 1:
                x = pp.pipeline_enter_stage(x)
        return jnp.mean((x - y) ** 2) / spec.num_microbatches

    return loss


def sgd(params, grads):
    return jax.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)


def pipelined_step_fn(spec: Workload):
    loss = make_loss(spec, markers=True)

    def step(params, xs, ys):
        total, grads = pp.treduce(
            lambda mb: jax.value_and_grad(loss)(params, mb), (xs, ys), operation=pp.Add
        )
        return sgd(params, grads), total

    return step


def reference_step_fn(spec: Workload):
    loss = make_loss(spec, markers=False)

    def step(params, xs, ys):
        def body(carry, microbatch):
            total, grads = carry
            value, g = jax.value_and_grad(loss)(params, microbatch)
            return (total + value, jax.tree_util.tree_map(jnp.add, grads, g)), None

        zeros = (jnp.zeros((), jnp.float32), jax.tree_util.tree_map(jnp.zeros_like, params))
        (total, grads), _ = lax.scan(body, zeros, (xs, ys))
        return sgd(params, grads), total

    return step


# ------------------------------------------------------------------ measuring


@contextlib.contextmanager
def environment(name: str, value: str):
    """``os.environ[name] = value`` inside the block; the previous value (or none) after."""
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            del os.environ[name]
        else:
            os.environ[name] = previous


def compile_uncached(program):
    """``program.compile()`` with the runtime's in-memory executable cache off
    (``JAXPP_MLIR_EXECUTABLE_MEMORY_CACHE=0``), so that a compile time measures compiling,
    not rebinding what an earlier row of the same process compiled."""
    with environment("JAXPP_MLIR_EXECUTABLE_MEMORY_CACHE", "0"):
        return program.compile()


def timed_steps(fns, states, steps: int, warmup: int):
    """Runs the step functions ``fns`` alternately (one step each, in turn), each on its own
    ``(params, xs, ys)`` with parameters fed back, so that both see the same machine load.

    Returns, per function: median seconds per step (call to results ready), median seconds
    until the call returned (the Python-side dispatch; execution is asynchronous), median
    CPU seconds of the calling thread during the call, and the final ``(params, loss)``.
    """
    params = [s[0] for s in states]
    loss = [None] * len(fns)
    for _ in range(warmup):
        for k, fn in enumerate(fns):
            params[k], loss[k] = fn(params[k], *states[k][1:])
            jax.block_until_ready((params[k], loss[k]))
    total = [[] for _ in fns]
    dispatch = [[] for _ in fns]
    cpu = [[] for _ in fns]
    for _ in range(steps):
        for k, fn in enumerate(fns):
            c0 = time.thread_time()
            t0 = time.perf_counter()
            params[k], loss[k] = fn(params[k], *states[k][1:])
            t1 = time.perf_counter()
            c1 = time.thread_time()
            jax.block_until_ready((params[k], loss[k]))
            t2 = time.perf_counter()
            total[k].append(t2 - t0)
            dispatch[k].append(t1 - t0)
            cpu[k].append(c1 - c0)
    med = statistics.median
    return [
        (med(total[k]), med(dispatch[k]), med(cpu[k]), (params[k], loss[k]))
        for k in range(len(fns))
    ]


def max_abs_diff(a, b) -> float:
    return max(
        (
            float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) if np.size(x) else 0.0
            for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True)
        ),
        default=0.0,
    )


# How far a pipelined result may be from plain jax.jit's, in ulps of each leaf's largest
# magnitude (tests/py/numerics.py states the same rule for the tests): the stage programs
# are separate programs, and XLA:CPU groups a reduction's sums by the CPU's vector width
# (SSE4.2, AVX2, AVX-512), so they round like jax.jit on one CPU and by an ulp apart on
# another. Several optimizer steps feed one step's rounding into the next.
ULPS_ONE_STEP = 8
ULPS_SEVERAL_STEPS = 64


def _leaf_ulps(actual, expected) -> float:
    """``actual``'s largest difference from ``expected`` in spacings of ``expected``'s float
    type at its largest finite magnitude; other leaves (and NaN or infinities in other
    places) 0 when equal, infinite when not."""
    a, e = np.asarray(actual), np.asarray(expected)
    if a.shape != e.shape:
        return math.inf
    if not jnp.issubdtype(e.dtype, jnp.floating):
        return 0.0 if np.array_equal(a, e) else math.inf
    a, e = a.astype(np.float64), e.astype(np.float64)
    finite = np.isfinite(a) & np.isfinite(e)
    if not np.array_equal(a[~finite], e[~finite], equal_nan=True):
        return math.inf
    if not finite.any():
        return 0.0
    info = jnp.finfo(np.asarray(expected).dtype)
    magnitude = max(float(np.abs(e[finite]).max()), float(info.tiny))
    spacing = float(info.eps) * 2.0 ** math.floor(math.log2(magnitude))
    return float(np.abs(a[finite] - e[finite]).max()) / spacing


def max_ulps(actual, expected) -> float:
    """The largest difference over the leaves of two pytrees, in ulps of each ``expected``
    leaf's largest magnitude (integer leaves: 0 if equal, infinite otherwise)."""
    return max(
        (
            _leaf_ulps(a, e)
            for a, e in zip(
                jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected), strict=True
            )
        ),
        default=0.0,
    )


def _same_bits(actual, expected) -> bool:
    a, e = np.asarray(actual), np.asarray(expected)
    return a.dtype == e.dtype and a.shape == e.shape and a.tobytes() == e.tobytes()


def same_bits(actual, expected) -> bool:
    """Whether two results of the same programs are equal bit for bit, leaf by leaf."""
    return all(
        _same_bits(a, e)
        for a, e in zip(
            jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected), strict=True
        )
    )


def place_pipelined_inputs(program, args):
    """Puts every non-parameter argument, once, on the rank the program reads it on.

    Uses the plan's input bindings (leaf i of the arguments is plan input i
    unless the lowering dropped unused arguments); a leaf read on several ranks
    stays where it is (the runtime copies it each call).
    """
    leaves, tree = jax.tree_util.tree_flatten(args)
    kept = program.kept_inputs if program.kept_inputs is not None else range(len(leaves))
    placed = list(leaves)
    for binding_index, leaf_index in enumerate(kept):
        ranks = program.plan.inputs[binding_index].ranks
        if len(ranks) == 1:
            device = program.mesh.rank_devices(ranks[0])[0]
            placed[leaf_index] = jax.device_put(
                leaves[leaf_index], jax.sharding.SingleDeviceSharding(device)
            )
    return jax.tree_util.tree_unflatten(tree, placed)


def run_workload(
    spec: Workload, *, steps: int = 20, warmup: int = 3, breakdown: bool = False
) -> dict:
    """Measures one workload, pipelined and under plain jit, in this process."""
    if len(jax.devices()) < spec.num_stages:
        raise SystemExit(
            f"{spec.name} needs {spec.num_stages} devices, this process has {len(jax.devices())}"
        )
    params, xs, ys = init(spec)
    mesh = pp.MpmdMesh(
        jax.sharding.Mesh(np.array(jax.devices()[: spec.num_stages]), ("stage",)), "stage"
    )
    schedule = pp.Std1F1B(spec.num_stages)

    # Pipelined: lower, partition (passes and plan), compile, first call.
    step = pipelined_step_fn(spec)
    t0 = time.perf_counter()
    lowered = jax.jit(step).lower(params, xs, ys)
    t1 = time.perf_counter()
    program = pp.partition(lowered, mesh=mesh, schedule=schedule)
    t2 = time.perf_counter()
    compiled = compile_uncached(program)
    t3 = time.perf_counter()
    first = jax.block_until_ready(compiled(params, xs, ys))
    t4 = time.perf_counter()

    # Plain jit on one device, lax.scan loop, no markers.
    device = jax.devices()[0]
    ref_params, ref_xs, ref_ys = jax.device_put((params, xs, ys), device)
    j0 = time.perf_counter()
    ref_lowered = jax.jit(reference_step_fn(spec)).lower(ref_params, ref_xs, ref_ys)
    j1 = time.perf_counter()
    ref_compiled = ref_lowered.compile()
    j2 = time.perf_counter()
    ref_first = jax.block_until_ready(ref_compiled(ref_params, ref_xs, ref_ys))
    j3 = time.perf_counter()

    # Steady state: inputs placed once, parameters fed back, the two steps alternating.
    pp_state = place_pipelined_inputs(program, (params, xs, ys))
    (
        (ours, our_dispatch, our_cpu, (our_params, our_loss)),
        (
            theirs,
            their_dispatch,
            _,
            (their_params, their_loss),
        ),
    ) = timed_steps(
        [compiled, ref_compiled], [pp_state, (ref_params, ref_xs, ref_ys)], steps, warmup
    )

    record = {
        "workload": spec.name,
        "config": dataclasses.asdict(spec),
        "lower_s": t1 - t0,
        "partition_s": t2 - t1,
        "compile_s": t3 - t2,
        "first_call_s": t4 - t3,
        "time_to_first_step_s": t4 - t0,
        "step_s": ours,
        "dispatch_s": our_dispatch,
        "dispatch_cpu_s": our_cpu,
        "jit_lower_s": j1 - j0,
        "jit_compile_s": j2 - j1,
        "jit_first_call_s": j3 - j2,
        "jit_step_s": theirs,
        "jit_dispatch_s": their_dispatch,
        "step_ratio": ours / theirs,
        "max_abs_diff_params_first_step": max_abs_diff(first[0], ref_first[0]),
        "max_abs_diff_loss_first_step": max_abs_diff(first[1], ref_first[1]),
        "max_abs_diff_params": max_abs_diff(our_params, their_params),
        "max_abs_diff_loss": max_abs_diff(our_loss, their_loss),
        "max_ulps_params_first_step": max_ulps(first[0], ref_first[0]),
        "max_ulps_loss_first_step": max_ulps(first[1], ref_first[1]),
        "max_ulps_params": max_ulps(our_params, their_params),
        "max_ulps_loss": max_ulps(our_loss, their_loss),
        "steps": steps,
        "warmup": warmup,
        # Other processes share this machine's cores: the 1-minute load average at the end.
        "loadavg_1min": os.getloadavg()[0],
    }
    if spec.scaling_microbatches:
        record.update(partition_scaling(spec, lowered, mesh))
    if breakdown:
        record["breakdown"] = step_breakdown(compiled, (our_params, pp_state[1], pp_state[2]))
    return record


def partition_scaling(spec: Workload, lowered, mesh, repeats: int = 7) -> dict:
    """Warm partition times (least of ``repeats``) at the workload's microbatch count and
    at ``spec.scaling_microbatches``, the same step otherwise (issue 6: within 20%).

    The two are timed alternately, so that both see the same machine load.
    """
    many = dataclasses.replace(spec, num_microbatches=spec.scaling_microbatches)
    params, xs, ys = init(many)
    lowered_many = jax.jit(pipelined_step_fn(many)).lower(params, xs, ys)
    times: dict[int, list[float]] = {0: [], 1: []}
    for _ in range(repeats):
        for which, lowered_step in enumerate((lowered, lowered_many)):
            t0 = time.perf_counter()
            pp.partition(lowered_step, mesh=mesh, schedule=pp.Std1F1B(spec.num_stages))
            times[which].append(time.perf_counter() - t0)
    # The least of the repeats: the partition's own cost, with as little of the machine's
    # noise (other processes, the garbage collector) as the repeats allow.
    base, scaled = min(times[0]), min(times[1])
    return {
        "partition_warm_s": base,
        "partition_scaled_warm_s": scaled,
        "partition_scaling_ratio": scaled / base,
    }


def step_breakdown(compiled, args, reps: int = 10) -> dict:
    """Where a pipelined step's time goes, from the runtime's generated operations.

    Uses runtime internals (``CompiledPlan._ops`` and friends), so it may break when the
    runtime changes; it then returns ``{"error": ...}``. Two measurements, ``reps`` steps
    each, medians per step:

    - async: every operation called as ``CompiledPlan.__call__`` does, timed one by one
      (Python wall and calling-thread CPU seconds per kind of operation): the runtime's
      Python dispatch cost, which on 2 cores competes with the device threads;
    - serialized: blocking on an operation's new values after each one, so each
      execution or copy runs alone: the sum is the device work without any overlap
      between ranks (plus one ``block_until_ready`` per operation, about 10-30 us).
    """
    try:
        plan = compiled.executable
        compiled._flatten_inputs(tuple(args), {}), compiled._index_arrays  # noqa: B018
        ops, num_slots, output_slots = plan._ops, plan._num_slots, plan._output_slots
        input_checks = plan._inputs
        out_tree = compiled.program.out_tree
        from jaxpp_mlir.runtime.execution.arguments import place_arguments
    except (AttributeError, ImportError) as e:  # the runtime changed
        return {"error": f"runtime internals not available: {e}"}
    kinds = sorted({op.kind for op in ops})
    counts = {k: sum(op.kind == k for op in ops) for k in kinds}
    med = statistics.median

    def fresh_env(params):
        leaves = list(compiled._flatten_inputs((params, *args[1:]), {}))
        env = [None] * num_slots
        place_arguments(leaves + list(compiled._index_arrays), input_checks, env)
        return env

    params = args[0]
    wall = {k: [] for k in kinds}
    cpu = {k: [] for k in kinds}
    for _ in range(reps):
        env = fresh_env(params)
        w = dict.fromkeys(kinds, 0.0)
        c = dict.fromkeys(kinds, 0.0)
        for op in ops:
            c0 = time.thread_time()
            t0 = time.perf_counter()
            op(env)
            w[op.kind] += time.perf_counter() - t0
            c[op.kind] += time.thread_time() - c0
        outputs = jax.block_until_ready([env[s] for s in output_slots])
        params = jax.tree_util.tree_unflatten(out_tree, outputs)[0]
        for k in kinds:
            wall[k].append(w[k])
            cpu[k].append(c[k])
    serial = {k: [] for k in kinds}
    per_executable: dict[str, list[float]] = {}
    for _ in range(reps):
        env = fresh_env(params)
        t = dict.fromkeys(kinds, 0.0)
        exe_t: dict[str, float] = {}
        for op in ops:
            before = list(env)
            t0 = time.perf_counter()
            op(env)
            jax.block_until_ready(
                [v for v, b in zip(env, before, strict=True) if v is not None and v is not b]
            )
            dt = time.perf_counter() - t0
            t[op.kind] += dt
            if op.kind == "run":
                name = op.what.split("'")[1] if "'" in op.what else op.what
                exe_t[name] = exe_t.get(name, 0.0) + dt
        outputs = jax.block_until_ready([env[s] for s in output_slots])
        params = jax.tree_util.tree_unflatten(out_tree, outputs)[0]
        for k in kinds:
            serial[k].append(t[k])
        for name, v in exe_t.items():
            per_executable.setdefault(name, []).append(v)
    return {
        "ops_per_step": counts,
        "python_wall_s": {k: med(v) for k, v in wall.items()},
        "python_cpu_s": {k: med(v) for k, v in cpu.items()},
        "serialized_s": {k: med(v) for k, v in serial.items()},
        "serialized_per_executable_s": {
            name: med(v) for name, v in sorted(per_executable.items(), key=lambda kv: -med(kv[1]))
        },
    }


def print_breakdown(record: dict) -> None:
    b = record.get("breakdown")
    if not b:
        return
    print(
        f"{record['workload']}: where a pipelined step goes (runtime internals, medians per step)"
    )
    if "error" in b:
        print(f"  {b['error']}")
        return
    print(
        f"  {'op kind':<8} {'count':>6} {'py wall ms':>11} {'py cpu ms':>10} {'us/op':>7} "
        f"{'serialized ms':>14}"
    )
    for k, n in b["ops_per_step"].items():
        print(
            f"  {k:<8} {n:>6} {b['python_wall_s'][k] * 1e3:>11.2f} "
            f"{b['python_cpu_s'][k] * 1e3:>10.2f} {b['python_wall_s'][k] / n * 1e6:>7.1f} "
            f"{b['serialized_s'][k] * 1e3:>14.2f}"
        )
    py = sum(b["python_wall_s"].values())
    py_cpu = sum(b["python_cpu_s"].values())
    serial = sum(b["serialized_s"].values())
    print(
        f"  total: Python dispatch {py * 1e3:.2f} ms wall / {py_cpu * 1e3:.2f} ms CPU; serialized "
        f"device work {serial * 1e3:.2f} ms; measured step {record['step_s'] * 1e3:.2f} ms; "
        f"plain jit {record['jit_step_s'] * 1e3:.2f} ms"
    )
    top = list(b["serialized_per_executable_s"].items())[:8]
    print(
        "  serialized ms per executable (all its runs): "
        + ", ".join(f"{n} {v * 1e3:.2f}" for n, v in top)
    )
    print()


# ------------------------------------------------------------------ reporting

FIELDS = [
    # key, label, format ("ms": seconds shown as milliseconds)
    ("lower_s", "lower s", "{:.3f}"),
    ("partition_s", "partition s (passes + plan)", "{:.3f}"),
    ("partition_warm_s", "  warm, least of 7 s", "{:.3f}"),
    ("partition_scaled_warm_s", "  warm, 4x the microbatches s", "{:.3f}"),
    ("partition_scaling_ratio", "  4x microbatches / as given", "{:.3f}"),
    ("compile_s", "compile s (all stages)", "{:.3f}"),
    ("first_call_s", "first call s", "{:.3f}"),
    ("time_to_first_step_s", "lower+partition+compile+first s", "{:.3f}"),
    ("step_s", "step ms (median)", "ms"),
    ("dispatch_s", "  of which until call returns ms", "ms"),
    ("dispatch_cpu_s", "  dispatch thread CPU ms", "ms"),
    ("jit_lower_s", "plain jit lower s", "{:.3f}"),
    ("jit_compile_s", "plain jit compile s", "{:.3f}"),
    ("jit_first_call_s", "plain jit first call s", "{:.3f}"),
    ("jit_step_s", "plain jit step ms (median)", "ms"),
    ("step_ratio", "step / plain jit", "{:.3f}"),
    ("max_abs_diff_params_first_step", "max |diff| params, step 1", "{:.3g}"),
    ("max_abs_diff_loss_first_step", "max |diff| loss, step 1", "{:.3g}"),
    ("max_abs_diff_params", "max |diff| params, last step", "{:.3g}"),
    ("max_abs_diff_loss", "max |diff| loss, last step", "{:.3g}"),
    ("max_ulps_params_first_step", "ulps from jit, params, step 1", "{:.3g}"),
    ("max_ulps_loss_first_step", "ulps from jit, loss, step 1", "{:.3g}"),
    ("max_ulps_params", "ulps from jit, params, last step", "{:.3g}"),
    ("max_ulps_loss", "ulps from jit, loss, last step", "{:.3g}"),
    ("loadavg_1min", "machine load (1 min avg, at end)", "{:.2f}"),
]


def _fmt(value: float, fmt: str) -> str:
    return f"{value * 1e3:.2f}" if fmt == "ms" else fmt.format(value)


def target_text(name: str, key: str, value: float) -> str:
    """Issue 6's target for ``key`` on workload ``name`` and whether ``value`` meets it."""
    if key == "step_ratio":
        limit, extra = (
            TARGET_STEP_RATIO,
            f" (JaxPP {JAXPP_STEP_RATIO[name]}x)" if name in JAXPP_STEP_RATIO else "",
        )
    elif key == "partition_s" and name in TARGET_PARTITION_S:
        limit, extra = TARGET_PARTITION_S[name], ""
    elif key == "partition_scaling_ratio":
        limit, extra = TARGET_PARTITION_SCALING, ""
    elif key == "time_to_first_step_s" and name in TARGET_TIME_TO_FIRST_STEP_S:
        limit, extra = TARGET_TIME_TO_FIRST_STEP_S[name], ""
    elif key.startswith("max_ulps"):
        limit, extra = (ULPS_ONE_STEP if key.endswith("first_step") else ULPS_SEVERAL_STEPS), ""
    else:
        return ""
    return f"<= {limit}{extra} " + ("ok" if value <= limit else "MISSED")


def print_table(records: list[dict], title: str) -> None:
    print(title)
    label_width = max(len(label) for _, label, _ in FIELDS)
    print(
        f"{'':<{label_width}}"
        + "".join(f" | {r['workload']:>9} {'target (issue 6)':<24}" for r in records)
    )
    for key, label, fmt in FIELDS:
        row = f"{label:<{label_width}}"
        if not any(key in record for record in records):
            continue
        for record in records:
            if key not in record:
                row += f" | {'-':>9} {'':<24}"
                continue
            value = record[key]
            row += f" | {_fmt(value, fmt):>9} {target_text(record['workload'], key, value):<24}"
        print(row.rstrip())
    print()


def median_records(runs: list[list[dict]]) -> list[dict]:
    """Per workload, the median of every numeric figure across processes."""
    out = []
    for per_process in zip(*runs, strict=True):
        merged = {k: v for k, v in per_process[0].items() if k != "breakdown"}
        for key, value in per_process[0].items():
            if isinstance(value, float):
                merged[key] = statistics.median(r[key] for r in per_process)
                merged[key + "_per_process"] = [r[key] for r in per_process]
        merged["processes"] = len(per_process)
        out.append(merged)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", default="W1,W2", help="comma-separated: W1, W2")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument(
        "--repeat-processes", type=int, default=1, help="run in N fresh processes, report medians"
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="also split a pipelined step into Python dispatch and serialized device work "
        "per kind of runtime operation (uses runtime internals)",
    )
    parser.add_argument("--json-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    for n in names:
        if n not in WORKLOADS:
            parser.error(f"unknown workload {n!r} (known: {', '.join(WORKLOADS)})")

    if args.repeat_processes > 1:
        runs = []
        for k in range(args.repeat_processes):
            command = [
                sys.executable,
                os.path.abspath(__file__),
                "--workloads",
                ",".join(names),
                "--steps",
                str(args.steps),
                "--warmup",
                str(args.warmup),
                "--json-only",
                *(["--breakdown"] if args.breakdown else []),
            ]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                sys.stderr.write(done.stderr)
                raise SystemExit(f"process {k + 1} failed with exit status {done.returncode}")
            records = [
                json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")
            ]
            runs.append(records)
            print_table(records, f"process {k + 1}/{args.repeat_processes}")
            for record in records:
                print_breakdown(record)
        medians = median_records(runs)
        print_table(medians, f"MEDIAN of {args.repeat_processes} fresh processes")
        for record in medians:
            print(json.dumps(record))
        return

    records = []
    for n in names:
        records.append(
            run_workload(
                WORKLOADS[n], steps=args.steps, warmup=args.warmup, breakdown=args.breakdown
            )
        )
        if args.json_only:
            print(json.dumps(records[-1]), flush=True)
    if args.json_only:
        return
    print_table(records, "one process")
    for record in records:
        print_breakdown(record)
    for record in records:
        print(json.dumps(record))


if __name__ == "__main__":
    main()

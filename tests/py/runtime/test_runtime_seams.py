"""The runtime's seams as functions: slot resolution into typed steps, the distributed
setup's pure steps, and the abort hook apart from the watchdog."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxpp_mlir.runtime.compilation.compile import compile_plan_executables
from jaxpp_mlir.runtime.execution.slot_table import ChannelKey
from jaxpp_mlir.runtime.execution.slots import resolve_slots
from jaxpp_mlir.runtime.failure import exit_hooks
from jaxpp_mlir.runtime.instructions.receive import ReceiveStep, Recv
from jaxpp_mlir.runtime.instructions.run import RunStage, RunStep
from jaxpp_mlir.runtime.instructions.send import Send, SendStep
from jaxpp_mlir.runtime.multiprocess.distributed_setup import find_feeds
from jaxpp_mlir.runtime.multiprocess.local_plan import Feed
from jaxpp_mlir.runtime.plan import (
    ExecutionPlan,
    InputBinding,
    OutputBinding,
    StageExecutable,
    TensorSpec,
    ValueInfo,
)

from jaxpp_mlir.errors import ScheduleError

SPEC = TensorSpec((2, 3), "float32")


def _stage(name: str, rank: int, fn) -> StageExecutable:
    x = jax.ShapeDtypeStruct(SPEC.shape, jnp.float32)
    text = jax.jit(fn).lower(x).as_text()
    return StageExecutable(name, rank, text, (SPEC,), (SPEC,))


@pytest.fixture(scope="module")
def chain():
    """Input 0 on rank 0 -> f -> send to rank 1 -> g -> output on rank 1."""
    plan = ExecutionPlan(
        num_ranks=2,
        executables={
            "f": _stage("f", 0, lambda x: x * 2.0),
            "g": _stage("g", 1, lambda x: x + 1.0),
        },
        inputs=(InputBinding(0, SPEC, (0,)),),
        outputs=(OutputBinding(3, 1, SPEC),),
        instructions=(
            RunStage(0, "f", (0,), (1,)),
            Send(0, 1, 0, 1),
            Recv(1, 0, 0, 2, SPEC),
            RunStage(1, "g", (2,), (3,)),
        ),
    )
    devices = [(jax.devices()[0],), (jax.devices()[1],)]
    executables, num_compiled = compile_plan_executables(plan, devices, list(plan.executables))
    return plan, devices, executables, num_compiled


def test_two_modules_compile_twice(chain):
    _, _, executables, num_compiled = chain
    assert num_compiled == 2 and set(executables) == {"f", "g"}


def test_slots_resolve_into_typed_steps(chain):
    plan, devices, executables, _ = chain
    resolved = resolve_slots(plan, devices, executables)
    run_f, send, receive, run_g = resolved.steps
    assert type(run_f) is RunStep and type(run_g) is RunStep
    assert type(send) is SendStep and type(receive) is ReceiveStep
    where = resolved.where
    assert run_f.inputs == (where[(0, 0)],) and run_f.outputs == (where[(0, 1)],)
    assert send.source == where[(0, 1)] and receive.channel == send.channel
    assert receive.destination == where[(1, 2)] and run_g.inputs == (where[(1, 2)],)
    assert resolved.output_slots == (where[(1, 3)],)
    assert resolved.slots[send.channel].key == ChannelKey(0)
    # f's result dies after the send; the channel slot after the receive.
    assert where[(0, 1)] in resolved.free_after[1]
    assert send.channel in resolved.free_after[2]


def test_the_value_table_says_where_each_value_is_defined_and_laid_out(chain):
    plan, *_ = chain
    assert dict(plan.values) == {
        (0, 0): ValueInfo(SPEC, -1, None, 0),  # an input, laid out by its reader f
        (0, 1): ValueInfo(SPEC, 0, None, 0),  # f's output
        (1, 2): ValueInfo(SPEC, 2, None, 3),  # received, laid out by its reader g
        (1, 3): ValueInfo(SPEC, 3, None, 3),  # g's output
    }
    assert plan.values is plan.values  # worked out once per plan


def test_slot_resolution_names_an_unpaired_send(chain):
    plan, devices, executables, _ = chain
    unpaired = dataclasses.replace(
        plan, instructions=plan.instructions[:2], outputs=(OutputBinding(1, 0, SPEC),)
    )
    with pytest.raises(ScheduleError, match="value 1 from rank 0 on channel 0 is never received"):
        resolve_slots(unpaired, devices, executables)


def test_feeds_are_outputs_coming_back_as_inputs_needed_elsewhere():
    step = TensorSpec((), "int32")
    plan = ExecutionPlan(
        num_ranks=3,
        executables={},
        inputs=(
            InputBinding(0, step, (0, 2)),  # a step count read on processes 0 and 1
            InputBinding(1, SPEC, (1,)),  # read on one process only: never forwarded
            InputBinding(2, step, (0, 2)),  # not a user input (a microbatch index)
        ),
        outputs=(OutputBinding(5, 2, step), OutputBinding(6, 1, SPEC)),
        instructions=(),
    )
    process_of = (0, 0, 1)
    feeds = find_feeds(plan, process_of, num_user_inputs=2)
    assert feeds == [Feed(0, 0, 2, 0, 1, 0)]


class _Dog:
    """What the abort hook reads of a watchdog that sees no lost peer."""

    process = 3
    failure = None
    options = None

    def __init__(self) -> None:
        self.kv_lost = False

    def lost_peer(self) -> None:
        return None

    def peer_states(self) -> str:
        return "process 0: program 0, call 2, 0.10 s ago"

    def stop_reporting(self) -> None:
        raise AssertionError("nothing is lost: the watchdog keeps reporting")


def test_an_abort_with_no_lost_peer_is_left_to_proceed(capfd):
    dog = _Dog()
    exit_hooks.on_abort(dog)  # returns: abort() then ends the process
    err = capfd.readouterr().err
    assert dog.kv_lost  # the key-value store is not used after an abort
    assert "jaxpp: process 3: aborted (SIGABRT" in err
    assert "no peer looks lost (last reports: process 0: program 0, call 2" in err


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8", "bool", "complex64"])
def test_transfer_modules_built_with_the_bindings_move_and_zero_every_dtype(dtype):
    """One process, two devices: the permute moves device 0's shard to device 1; the
    receive-buffer module gives zeros (the multi-process transfers run the same modules)."""
    from jaxpp_mlir.runtime.compilation.compile import compile_stages
    from jaxpp_mlir.runtime.multiprocess.collectives import permute_module, zeros_module

    spec = TensorSpec((2, 3), dtype)
    devices = jax.devices()[:2]
    permute, zeros = compile_stages(
        [
            ("permute", permute_module([spec], 1), devices),
            ("zeros", zeros_module([spec], 1), devices[:1]),
        ]
    )
    (buffer,) = zeros.execute_sharded([]).disassemble_into_single_device_arrays()[0]
    np.testing.assert_array_equal(np.asarray(buffer), np.zeros((2, 3), jnp.dtype(dtype)))
    value = (np.arange(6).reshape(2, 3) % 2).astype(jnp.dtype(dtype))
    # Shard 0 (device 0) is the sent value, shard 1 (device 1) the receive buffer.
    both = NamedSharding(Mesh(np.array(devices), ("p",)), PartitionSpec("p"))
    sent = jax.device_put(np.concatenate([value, np.asarray(buffer)]), both)
    (shards,) = permute.execute_sharded([sent]).disassemble_into_single_device_arrays()
    assert shards[1].devices() == {devices[1]}
    np.testing.assert_array_equal(np.asarray(shards[1]), value)


def test_a_shared_program_is_rebound_by_the_thread_that_compiled_it(monkeypatch):
    """Copies of a program for other ranks are made in the compile pool, right after its
    compile, not after the last compile; each executable lands on its job's devices."""
    import threading

    from jaxpp_mlir.runtime.compilation import compile as runtime_compile
    from jaxpp_mlir.runtime.multiprocess.collectives import zeros_module

    rebound_in: list[str] = []
    original = runtime_compile._rebind

    def recording(name, exe, source, devices):
        rebound_in.append(threading.current_thread().name)
        return original(name, exe, source, devices)

    monkeypatch.setattr(runtime_compile, "_rebind", recording)
    devices = jax.devices()
    small, large = (
        zeros_module([TensorSpec((2,), "float32")], 1),
        zeros_module([TensorSpec((3, 5), "int32")], 1),
    )
    jobs = [
        ("small0", small, devices[:1]),
        ("large0", large, devices[:1]),
        ("small1", small, devices[1:2]),
        ("small2", small, devices[2:3]),
    ]
    executables = runtime_compile.compile_stages(jobs)
    assert len(rebound_in) == 2
    assert all(name.startswith("jaxpp-compile") for name in rebound_in)
    for exe, (_, _, job_devices) in zip(executables, jobs, strict=True):
        assert list(exe.local_devices()) == list(job_devices)


def _sized_jobs() -> list[tuple[str, str, list[jax.Device]]]:
    """Three compile jobs on three devices whose module texts are small, large and medium
    (the compile order ranks texts by length when no FLOP estimate is given)."""
    from jaxpp_mlir.runtime.multiprocess.collectives import zeros_module

    devices = jax.devices()
    return [
        ("small", zeros_module([TensorSpec((2,), "float32")], 1), devices[:1]),
        ("large", zeros_module([TensorSpec((3, 5), "int32")] * 4, 1), devices[1:2]),
        ("medium", zeros_module([TensorSpec((4,), "int8")] * 2, 1), devices[2:3]),
    ]


@pytest.mark.parametrize("autotunes", [True, False])
def test_on_an_autotuning_backend_the_largest_program_compiles_alone_first(monkeypatch, autotunes):
    """Where XLA autotunes (GPUs), the largest program is compiled before any other
    starts, so that the others find its kernels' autotuning results; elsewhere every
    program is submitted at once (each still compiled, each on its job's devices)."""
    import threading
    import time

    from jaxpp_mlir.runtime.compilation import compile as runtime_compile

    monkeypatch.setenv("JAXPP_MLIR_PROGRESS", "0")
    monkeypatch.setattr(runtime_compile, "_autotunes", lambda devices: autotunes)
    events: list[tuple[str, str]] = []
    lock = threading.Lock()
    original = runtime_compile.compile_stage

    def recording(name, *args):
        with lock:
            events.append(("start", name))
        if name == "large":
            time.sleep(0.3)  # long enough for the others to start, unless they wait for it
        try:
            return original(name, *args)
        finally:
            with lock:
                events.append(("end", name))

    monkeypatch.setattr(runtime_compile, "compile_stage", recording)
    jobs = _sized_jobs()
    executables = runtime_compile.compile_stages(jobs)
    assert sorted(name for kind, name in events if kind == "end") == ["large", "medium", "small"]
    if autotunes:
        assert events[:2] == [("start", "large"), ("end", "large")], events
    for exe, (_, _, job_devices) in zip(executables, jobs, strict=True):
        assert list(exe.local_devices()) == list(job_devices)


@pytest.mark.parametrize("autotunes", [False, True])
def test_a_compile_past_the_timeout_is_named_and_does_not_hang(monkeypatch, autotunes):
    """A stage program whose compile does not return within JAXPP_MLIR_COMPILE_TIMEOUT
    makes compile_stages raise, naming it, also while it compiles alone first (where XLA
    autotunes); the others' compiles are not waited for."""
    import threading
    import time

    from jaxpp_mlir.runtime.compilation import compile as runtime_compile

    from jaxpp_mlir.errors import RuntimeFailure

    monkeypatch.setenv("JAXPP_MLIR_PROGRESS", "0")
    monkeypatch.setenv("JAXPP_MLIR_COMPILE_TIMEOUT", "0.5")
    monkeypatch.setattr(runtime_compile, "_autotunes", lambda devices: autotunes)
    release = threading.Event()
    original = runtime_compile.compile_stage

    def stuck_on_large(name, *args):
        if name == "large":
            release.wait(timeout=30)
        return original(name, *args)

    monkeypatch.setattr(runtime_compile, "compile_stage", stuck_on_large)
    jobs = _sized_jobs()[:2]
    began = time.monotonic()
    try:
        with pytest.raises(RuntimeFailure) as caught:
            runtime_compile.compile_stages(jobs)
    finally:
        release.set()
    assert time.monotonic() - began < 10
    message = str(caught.value)
    assert "JAXPP_MLIR_COMPILE_TIMEOUT=0.5 s" in message
    assert "still compiling: large" in message


@pytest.mark.parametrize("autotunes", [False, True])
def test_a_failing_compile_raises_its_failure_and_drops_the_jobs_not_started(
    monkeypatch, autotunes
):
    """The failure of one stage program's compile is what compile_stages raises, whatever
    job order the others have; compiling alone first (where XLA autotunes), the others are
    then never started."""
    from jaxpp_mlir.runtime.compilation import compile as runtime_compile

    from jaxpp_mlir.errors import RuntimeFailure

    monkeypatch.setenv("JAXPP_MLIR_PROGRESS", "0")
    monkeypatch.setattr(runtime_compile, "_autotunes", lambda devices: autotunes)
    started: list[str] = []
    original = runtime_compile.compile_stage

    def failing_large(name, *args):
        started.append(name)
        if name == "large":
            raise RuntimeFailure("compiling stage program 'large' failed: planted")
        return original(name, *args)

    monkeypatch.setattr(runtime_compile, "compile_stage", failing_large)
    jobs = _sized_jobs()
    with pytest.raises(RuntimeFailure, match="'large' failed: planted"):
        runtime_compile.compile_stages(jobs)
    if autotunes:
        assert started == ["large"]

"""The in-memory cache of stage executables (``runtime/compilation/executable_memo.py``): a program
compiled before is reused on its devices and rebound to others instead of compiled again,
results unchanged; the cache is bounded and can be turned off.

The persistent compilation cache is off in these tests (a kept cache would load the
programs instead), except where its interplay is checked in ``test_compilation_cache.py``.
"""

import jax
import numpy as np
import pytest
import toolkit
from jax.sharding import Mesh
from jaxpp_mlir.runtime.compilation import compile as runtime_compile
from jaxpp_mlir.runtime.compilation import executable_memo

import jaxpp_mlir as pp

# Compares numbers with plain jax.jit or between runs: CI runs it under capped ISAs too.
pytestmark = pytest.mark.numerics

NUM_STAGES = 2


@pytest.fixture(autouse=True)
def empty_memory_cache(monkeypatch):
    monkeypatch.setenv("JAXPP_MLIR_COMPILATION_CACHE", "0")
    monkeypatch.delenv("JAXPP_MLIR_EXECUTABLE_MEMORY_CACHE", raising=False)
    executable_memo.clear()
    yield
    executable_memo.clear()


@pytest.fixture(scope="module")
def step():
    """The lowered 2-stage MLP step, its inputs and plain ``jax.jit``'s outputs."""
    params = toolkit.mlp_params(NUM_STAGES)
    batch = toolkit.mlp_batch(2)
    lowered = jax.jit(toolkit.mlp_train_step).lower(params, batch)
    return lowered, params, batch, jax.jit(toolkit.mlp_train_step)(params, batch)


def _program(lowered, first_device: int) -> pp.PartitionedProgram:
    devices = np.array(jax.devices()[first_device : first_device + NUM_STAGES])
    mesh = pp.MpmdMesh(Mesh(devices, ("stage",)), "stage")
    return pp.partition(lowered, mesh=mesh, schedule=pp.Std1F1B(NUM_STAGES))


def _compile(program: pp.PartitionedProgram) -> tuple:
    """The compiled program, and the executables made and reused from memory meanwhile."""
    made, reused = runtime_compile.compile_count, executable_memo.reuses
    compiled = program.compile()
    return compiled, runtime_compile.compile_count - made, executable_memo.reuses - reused


def _executables(compiled) -> dict:
    """The PJRT executable of each stage (a union program's member: the union's)."""
    return {
        name: exe.union.exe if hasattr(exe, "union") else exe
        for name, exe in compiled.executable.executables.items()
    }


def test_other_devices_rebind_instead_of_compiling(step):
    lowered, params, batch, want = step
    first, first_made, reused = _compile(_program(lowered, 0))
    # One module text per rank compiles; identical ones (the update on each rank) rebind.
    num_executables = first.executable.num_compiled
    assert 0 < first_made < num_executables
    assert reused == num_executables - first_made
    second, made, reused = _compile(_program(lowered, 2))
    assert made == first_made
    assert reused == second.executable.num_compiled == num_executables
    devices = {d for exe in _executables(second).values() for d in exe.local_devices()}
    assert devices == set(jax.devices()[2:4])
    # Rebound executables are the same programs as the ones compiled first.
    toolkit.assert_matches_reference(first(params, batch), want, toolkit.SEPARATE_PROGRAMS)
    toolkit.assert_same_program(second(params, batch), first(params, batch))


def test_same_devices_share_the_executables(step):
    lowered, params, batch, want = step
    program = _program(lowered, 4)
    first, first_made, _ = _compile(program)
    second, made, reused = _compile(program)
    assert made == first_made and reused == second.executable.num_compiled
    for name, exe in _executables(second).items():
        assert exe is _executables(first)[name]
    toolkit.assert_matches_reference(second(params, batch), want, toolkit.SEPARATE_PROGRAMS)


def test_off_compiles_every_time(step, monkeypatch):
    monkeypatch.setenv("JAXPP_MLIR_EXECUTABLE_MEMORY_CACHE", "0")
    lowered, params, batch, want = step
    program = _program(lowered, 6)
    first, first_made, first_reused = _compile(program)
    second, made, reused = _compile(program)
    assert made == first_made > 0 and reused == first_reused == 0
    assert executable_memo.size() == 0
    for name, exe in _executables(second).items():
        assert exe is not _executables(first)[name]
    toolkit.assert_matches_reference(first(params, batch), want, toolkit.SEPARATE_PROGRAMS)
    toolkit.assert_same_program(second(params, batch), first(params, batch))


def test_key_leaves_out_the_device_ids_only():
    devices = jax.devices()
    text = "module { func.func public @main() { return } }"
    assert executable_memo.key(text, devices[0:2]) == executable_memo.key(text, devices[4:6])
    assert executable_memo.key(text, devices[0:2]) != executable_memo.key(text, devices[0:4])
    assert executable_memo.key(text, devices[0:2]) != executable_memo.key(text + " ", devices[0:2])


def _entry() -> executable_memo.Entry:
    return executable_memo.Entry(object(), jax.devices()[:1], lambda: b"", 0.0)


def test_least_recently_used_programs_go_first(monkeypatch):
    monkeypatch.setenv("JAXPP_MLIR_EXECUTABLE_MEMORY_CACHE", "2")
    first, second, third = _entry(), _entry(), _entry()
    executable_memo.add(("a",), first)
    executable_memo.add(("b",), second)
    assert executable_memo.find(("a",)) is first  # now used after "b"
    executable_memo.add(("c",), third)
    assert executable_memo.size() == 2
    assert executable_memo.find(("b",)) is None
    assert executable_memo.find(("a",)) is first and executable_memo.find(("c",)) is third
    assert executable_memo.add(("c",), _entry()) is third  # the first entry of a key stays


def test_unusable_entry_compiles_instead(step, caplog):
    lowered, params, batch, want = step
    _compile(_program(lowered, 0))
    for cache_key in list(executable_memo._entries):
        executable_memo._entries[cache_key] = executable_memo.Entry(
            object(), jax.devices()[:1], lambda: b"not an executable", 0.0
        )
    compiled, made, reused = _compile(_program(lowered, 2))
    # Every stage compiled again; only the rebinds within the plan come from memory.
    assert 0 < made and reused == compiled.executable.num_compiled - made
    assert caplog.text.count("cannot rebind the executable of") == made
    toolkit.assert_matches_reference(compiled(params, batch), want, toolkit.SEPARATE_PROGRAMS)


def test_negative_size_is_rejected(monkeypatch):
    monkeypatch.setenv("JAXPP_MLIR_EXECUTABLE_MEMORY_CACHE", "-1")
    with pytest.raises(ValueError, match="JAXPP_MLIR_EXECUTABLE_MEMORY_CACHE='-1' is not allowed"):
        executable_memo.capacity()

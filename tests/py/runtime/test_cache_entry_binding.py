"""A persistent-cache entry answers only the key it was stored under; an executable that
came from the cache says so, and where, when it disagrees with the plan."""

import logging
import types

import jax
import pytest
from jaxpp_mlir.runtime import _jax_compat as jc
from jaxpp_mlir.runtime.compilation import compile as runtime_compile
from jaxpp_mlir.runtime.compilation import executable_cache
from jaxpp_mlir.runtime.plan import StageExecutable, TensorSpec

from jaxpp_mlir.errors import RuntimeFailure


def _module(outputs: int, scale: float) -> str:
    results = ", ".join(["tensor<2xf32>"] * outputs)
    values = ", ".join(["%y"] * outputs)
    return (
        f"func.func public @main(%x: tensor<2xf32>) -> ({results}) {{\n"
        f"  %c = stablehlo.constant dense<{scale}> : tensor<2xf32>\n"
        f"  %y = stablehlo.multiply %x, %c : tensor<2xf32>\n"
        f"  return {values} : {results}\n}}"
    )


class FakeStore(dict):
    def put(self, key, value):
        self[key] = value


@pytest.fixture
def store(monkeypatch):
    fake = FakeStore()
    monkeypatch.setattr(jc, "persistent_cache_store", lambda client: fake)
    return fake


DEVICES = tuple(jax.devices()[:1])
OPTIONS = runtime_compile.compile_options(DEVICES)


def _entry_of(text: str, key: str) -> bytes:
    exe = DEVICES[0].client.compile_and_load(text, jc.device_list(DEVICES), OPTIONS)
    return executable_cache.pack(exe.serialize(), 1.0, key)


def _key(text: str) -> str:
    return executable_cache.cache_key(text, DEVICES, OPTIONS)


def test_an_intact_entry_under_another_programs_key_is_a_miss_with_a_warning(store, caplog):
    doubled, tripled = _module(1, 2.0), _module(1, 3.0)
    entry = _entry_of(doubled, _key(doubled))
    assert executable_cache.unpack(entry, _key(doubled))  # intact under its own key
    store[_key(tripled)] = entry  # the file copied over another program's
    _, misses = executable_cache.stats()
    with caplog.at_level(logging.WARNING):
        exe, slot = executable_cache.lookup("stage0_fwd", tripled, DEVICES, OPTIONS)
    assert exe is None and slot.key == _key(tripled)
    assert executable_cache.stats()[1] == misses + 1
    assert "does not match its key and contents" in caplog.text
    assert "'stage0_fwd' is unusable" in caplog.text


def test_an_entry_under_its_own_key_is_loaded_and_its_origin_known(store):
    doubled = _module(1, 2.0)
    store[_key(doubled)] = _entry_of(doubled, _key(doubled))
    exe, _ = executable_cache.lookup("stage0_fwd", doubled, DEVICES, OPTIONS)
    assert exe is not None
    where = executable_cache.origin(doubled, DEVICES, OPTIONS)
    assert where.startswith(
        f"loaded from JAX's persistent compilation cache: entry {_key(doubled)}"
    )
    assert f"in {jax.config.jax_compilation_cache_dir}" in where
    assert executable_cache.origin(_module(1, 5.0), DEVICES, OPTIONS) is None


def test_a_cached_executable_that_disagrees_with_the_plan_names_the_cache(store):
    two, three = _module(2, 2.0), _module(3, 2.0)
    store[_key(three)] = _entry_of(two, _key(three))  # a forged entry: bound, but wrong
    spec = TensorSpec((2,), "float32")
    stage = StageExecutable("stage0_fwd", 0, three, (spec,), (spec,) * 3)
    plan = types.SimpleNamespace(executables={"stage0_fwd": stage})
    with pytest.raises(RuntimeFailure) as caught:
        runtime_compile.compile_plan_executables(plan, [DEVICES], ["stage0_fwd"])
    message = str(caught.value)
    assert "executable 'stage0_fwd' has 2 outputs but the plan gives 3 output specs" in message
    assert "this executable was loaded from JAX's persistent compilation cache: entry " in message
    assert f"{_key(three)} in {jax.config.jax_compilation_cache_dir}" in message

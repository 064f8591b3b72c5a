"""Compile progress: nothing for a fast compile, records once slow, "loaded" told apart."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import jax
import pytest
from jaxpp_mlir.runtime.compilation import compile as runtime_compile
from jaxpp_mlir.runtime.compilation import progress
from jaxpp_mlir.runtime.compilation.progress import COMPILED, LOADED, CompileProgress

REPOSITORY_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def records(caplog, monkeypatch):
    """The progress logger's messages (enabled, at INFO, whatever earlier tests did)."""
    monkeypatch.setattr(progress.logger, "disabled", False)
    caplog.set_level(logging.INFO, logger=progress.logger.name)
    return caplog


def _fake_compile(seconds: float, how: str):
    def compile_one(name: str) -> tuple[str, str]:
        time.sleep(seconds)
        return f"exe:{name}", how

    return compile_one


def test_fast_compile_says_nothing(records):
    reporter = CompileProgress(3, show_after=5.0)
    compile_one = reporter.wrap(_fake_compile(0.0, COMPILED))
    assert [compile_one(n) for n in "abc"] == ["exe:a", "exe:b", "exe:c"]
    line = reporter.finish()
    assert line.startswith("3 stage programs compiled in ")
    assert records.messages == []


def test_slow_compile_names_what_runs_then_each_program(records):
    reporter = CompileProgress(2, show_after=0.05)
    slow = reporter.wrap(_fake_compile(0.4, COMPILED))
    cached = reporter.wrap(_fake_compile(0.0, LOADED))
    slow("stage0_bwd")
    cached("stage1_fwd")
    reporter.finish()
    assert records.messages[0].startswith("compiling stage programs: 0/2 done after ")
    assert records.messages[0].endswith("running: stage0_bwd (0 s)")
    assert records.messages[1].startswith("compiled 1/2 stage programs: stage0_bwd (0.")
    assert records.messages[2].startswith("loaded 2/2 stage programs: stage1_fwd (")
    assert records.messages[2].endswith(" from the cache")
    assert records.messages[3].startswith("1 stage programs compiled, 1 loaded from the cache in ")
    assert "; slowest: stage0_bwd (0.4" in records.messages[3]
    assert len(records.messages) == 4


def test_long_single_compile_keeps_saying_it_runs(records, monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.2)
    reporter = CompileProgress(1, show_after=0.05)
    thread = threading.Thread(target=reporter.wrap(_fake_compile(1.3, COMPILED)), args=("big",))
    thread.start()
    thread.join()
    reporter.finish()
    heartbeats = [
        line for line in records.messages if line.startswith("compiling stage programs: 0/1")
    ]
    assert len(heartbeats) >= 2, records.messages


def test_terminal_line_is_rewritten_in_place():
    stream = io.StringIO()
    handler = progress._OneLineHandler(stream)
    handler.setFormatter(logging.Formatter("jaxpp_mlir: %(message)s"))
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "compiled 1/2", None, None)
    final = logging.LogRecord("x", logging.INFO, __file__, 1, "done", None, None)
    final.final = True
    handler.emit(record)
    handler.emit(final)
    assert stream.getvalue() == "\r\x1b[2Kjaxpp_mlir: compiled 1/2\r\x1b[2Kjaxpp_mlir: done\n"


def test_compile_or_load_tells_a_program_taken_from_memory():
    devices = jax.devices()[:1]
    module = "func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {\n" + (
        "  %0 = stablehlo.sine %a : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n"
    )
    first = runtime_compile.compile_or_load("sine_once", module, devices)[1]
    second = runtime_compile.compile_or_load("sine_again", module, devices)[1]
    assert second == LOADED
    assert first in (COMPILED, LOADED)  # an earlier test may have compiled it already


@pytest.mark.slow
def test_readme_command_one_is_quiet():
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAXPP_MLIR_PROGRESS")}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    proc = subprocess.run(
        [sys.executable, "examples/train_mlp.py"],
        cwd=REPOSITORY_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(proc.stderr.splitlines()) <= 3, proc.stderr
    assert "ok" in proc.stdout

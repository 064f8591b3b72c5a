"""Compile progress: nothing for a fast compile, two lines once slow (one while compiling,
one at the end) off a terminal, compiled / reused / loaded told apart."""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import jax
import pytest
from jaxpp_mlir.runtime.compilation import compile as runtime_compile
from jaxpp_mlir.runtime.compilation import progress
from jaxpp_mlir.runtime.compilation.progress import COMPILED, LOADED, REUSED, CompileProgress

REPOSITORY_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def records(caplog, monkeypatch):
    """The progress logger's messages (enabled, at INFO, whatever earlier tests did)."""
    monkeypatch.setattr(progress.logger, "disabled", False)
    caplog.set_level(logging.INFO, logger=progress.logger.name)
    return caplog


def _fake_compile(seconds: float, how: str, *, until_shown: CompileProgress | None = None):
    """A compile of ``seconds``; with ``until_shown``, it also lasts until that reporter spoke
    (at most 30 s more), however late a loaded machine schedules the reporter's thread."""

    def compile_one(name: str) -> tuple[str, str]:
        time.sleep(seconds)
        deadline = time.monotonic() + 30.0
        while until_shown is not None and not until_shown.shown and time.monotonic() < deadline:
            time.sleep(0.01)
        return f"exe:{name}", how

    return compile_one


def test_fast_compile_says_nothing(records):
    reporter = CompileProgress(3, show_after=5.0)
    compile_one = reporter.wrap(_fake_compile(0.0, COMPILED))
    assert [compile_one(n) for n in "abc"] == ["exe:a", "exe:b", "exe:c"]
    line = reporter.finish()
    assert line.startswith("3 stage programs ready in ")
    assert ": 3 compiled; slowest: " in line
    assert records.messages == []


def test_slow_compile_off_a_terminal_says_what_is_left_then_a_summary(records):
    reporter = CompileProgress(3, show_after=0.05)
    slow = reporter.wrap(_fake_compile(0.4, COMPILED, until_shown=reporter))
    reused = reporter.wrap(_fake_compile(0.0, REUSED))
    cached = reporter.wrap(_fake_compile(0.0, LOADED))
    slow("stage0_bwd")
    reused("stage1_fwd")
    cached("stage2_fwd")
    reporter.finish()
    info = [r.getMessage() for r in records.records if r.levelno == logging.INFO]
    assert len(info) == 2, info
    assert info[0].startswith("compiling 3 stage programs: 0 done, 3 left after ")
    assert re.search(r"running: stage0_bwd \(\d+ s\)$", info[0]), info[0]
    assert info[1].startswith("3 stage programs ready in ")
    assert (
        ": 1 compiled, 1 loaded from the persistent compilation cache, 1 reused from memory "
        "(the same program compiled earlier in this process); slowest: stage0_bwd ("
    ) in info[1]


def test_each_program_is_a_debug_record_off_a_terminal(records):
    records.set_level(logging.DEBUG, logger=progress.logger.name)
    reporter = CompileProgress(2, show_after=0.05)
    slow = reporter.wrap(_fake_compile(0.3, COMPILED))
    slow("stage0_bwd")
    reporter.wrap(_fake_compile(0.0, REUSED))("stage1_fwd")
    reporter.finish()
    debug = [r.getMessage() for r in records.records if r.levelno == logging.DEBUG]
    assert debug[0].startswith("compiled 1/2 stage programs: stage0_bwd (0.")
    assert debug[1].startswith(
        "reused from memory (the same program compiled earlier in this process) 2/2 stage "
        "programs: stage1_fwd ("
    )


def test_long_compile_off_a_terminal_is_one_line_until_it_ends(records):
    reporter = CompileProgress(1, show_after=0.05)
    thread = threading.Thread(
        target=reporter.wrap(_fake_compile(1.3, COMPILED, until_shown=reporter)), args=("big",)
    )
    thread.start()
    thread.join(timeout=60.0)
    assert not thread.is_alive()
    reporter.finish()
    assert len(records.messages) == 2, records.messages
    assert re.match(r"compiling 1 stage programs: 0 done, 1 left after \d+ s", records.messages[0])


def test_long_compile_on_a_terminal_keeps_its_line_fresh(monkeypatch, caplog):
    stream = io.StringIO()
    handler = progress._OneLineHandler(stream)
    monkeypatch.setattr(progress.logger, "handlers", [handler])
    monkeypatch.setattr(progress.logger, "disabled", False)
    # setLevel, not the attribute: the logger caches isEnabledFor answers from earlier tests.
    caplog.set_level(logging.INFO, logger=progress.logger.name)
    monkeypatch.setattr(progress, "_TERMINAL_REFRESH_S", 0.1)
    running_line = "compiling 1 stage programs: 0 done, 1 left"

    def compile_until_refreshed(name: str) -> tuple[str, str]:
        # However slowly a loaded machine schedules the ticker: compile until the line was
        # written twice, for at most 30 s.
        deadline = time.monotonic() + 30.0
        while stream.getvalue().count(running_line) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        return f"exe:{name}", COMPILED

    reporter = CompileProgress(1, show_after=0.05)
    thread = threading.Thread(target=reporter.wrap(compile_until_refreshed), args=("big",))
    thread.start()
    thread.join(timeout=60.0)
    assert not thread.is_alive()
    reporter.finish()
    assert stream.getvalue().count(running_line) >= 2, stream.getvalue()
    assert "1 stage programs ready in " in stream.getvalue()
    assert re.search(r"; slowest: big \(\d+\.\d\d s\)\n$", stream.getvalue()), stream.getvalue()


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


def test_compile_or_load_tells_a_program_taken_from_memory(monkeypatch):
    monkeypatch.setenv("JAXPP_MLIR_COMPILATION_CACHE", "0")  # memory only, not the disk
    devices = jax.devices()[:1]
    module = "func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {\n" + (
        "  %0 = stablehlo.sine %a : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n"
    )
    first = runtime_compile.compile_or_load("sine_once", module, devices)[1]
    second = runtime_compile.compile_or_load("sine_again", module, devices)[1]
    assert second == REUSED
    assert first in (COMPILED, LOADED, REUSED)  # an earlier test may have compiled it already


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


def test_a_failed_compile_stops_the_report_without_a_ready_line(monkeypatch, caplog):
    """When a stage program fails to compile, the terminal's progress line stops being
    refreshed (its thread ends) and no "ready" line follows the error."""
    from jaxpp_mlir.runtime.multiprocess.collectives import zeros_module
    from jaxpp_mlir.runtime.plan import TensorSpec

    from jaxpp_mlir.errors import RuntimeFailure

    stream = io.StringIO()
    monkeypatch.setattr(progress.logger, "handlers", [progress._OneLineHandler(stream)])
    monkeypatch.setattr(progress.logger, "disabled", False)
    caplog.set_level(logging.INFO, logger=progress.logger.name)
    monkeypatch.setattr(progress, "_TERMINAL_REFRESH_S", 0.05)
    monkeypatch.setenv("JAXPP_MLIR_PROGRESS_AFTER", "0")

    def failing(name, *args):
        time.sleep(0.2)  # shown, refreshed at least once
        raise RuntimeFailure(f"compiling stage program {name!r} failed: planted")

    monkeypatch.setattr(runtime_compile, "compile_or_load", failing)
    devices = jax.devices()
    jobs = [("big", zeros_module([TensorSpec((2,), "float32")], 1), devices[:1])]
    with pytest.raises(RuntimeFailure, match="planted"):
        runtime_compile.compile_stages(jobs)
    tickers = [t for t in threading.enumerate() if t.name == "jaxpp-progress"]
    for ticker in tickers:
        ticker.join(timeout=5.0)
    assert not any(t.is_alive() for t in tickers)
    assert "compiling 1 stage programs" in stream.getvalue()
    assert "ready in" not in stream.getvalue()

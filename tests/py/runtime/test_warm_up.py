"""The backend warm-up that partition() starts (``runtime/compilation/warm_up.py``): once
per process on XLA:CPU, off with ``JAXPP_MLIR_WARM_UP=0``, nothing compiled through the
stage programs' path, and never an error of its own."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
import types

import jax
import pytest
import toolkit
from jaxpp_mlir.runtime.compilation import warm_up

PARTITION_TWICE = toolkit.TWO_STAGE_MARKED_STEP + textwrap.dedent(
    """
    import logging
    from jaxpp_mlir.runtime.compilation import compile as compile_module, warm_up

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger(warm_up.__name__).setLevel(logging.DEBUG)
    pp.partition(lowered, mesh=mesh, schedule=pp.GPipe(2))
    threads = dict(warm_up._started)
    for thread in threads.values():
        thread.join(60)
    pp.partition(lowered, mesh=mesh, schedule=pp.GPipe(2))
    print(json.dumps({
        "platforms": sorted(threads),
        "finished": [not t.is_alive() for t in threads.values()],
        "started_after_second": sorted(warm_up._started),
        "same_thread": all(warm_up._started[p] is t for p, t in threads.items()),
        "compile_count": compile_module.compile_count,
    }))
    """
)


def _partition_twice(**env: str) -> tuple[dict, str]:
    done = toolkit.run_fresh_python(PARTITION_TWICE, **env)
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_partition_warms_xla_cpu_up_once_per_process_outside_the_stage_compiles():
    report, log = _partition_twice()
    assert report["platforms"] == ["cpu"]
    assert report["finished"] == [True]
    assert report["started_after_second"] == ["cpu"] and report["same_thread"]
    assert report["compile_count"] == 0  # partition compiles no stage program
    assert "warmed cpu up in" in log
    assert "failed" not in log


def test_warm_up_is_off_with_its_variable():
    report, log = _partition_twice(JAXPP_MLIR_WARM_UP="0")
    assert report["platforms"] == []
    assert "warmed" not in log


def test_a_bad_value_of_the_variable_names_it(monkeypatch):
    monkeypatch.setenv("JAXPP_MLIR_WARM_UP", "yes")
    with pytest.raises(ValueError, match="JAXPP_MLIR_WARM_UP='yes'"):
        warm_up.start_warm_up(jax.devices())


def test_platforms_without_a_setup_to_warm_are_left_alone():
    accelerator = types.SimpleNamespace(platform="gpu", process_index=jax.process_index())
    assert warm_up.start_warm_up([accelerator]) is None


def test_no_device_of_this_process_no_warm_up():
    elsewhere = types.SimpleNamespace(platform="cpu", process_index=jax.process_index() + 1)
    assert warm_up.start_warm_up([elsewhere]) is None


def test_a_failing_warm_up_is_logged_and_raises_nothing(monkeypatch, caplog):
    monkeypatch.setattr(warm_up, "DOT_PROGRAM", "this is not MLIR")
    with caplog.at_level(logging.DEBUG, logger=warm_up.__name__):
        warm_up._run_dot(jax.devices()[0])
    assert f"warm-up of {jax.devices()[0]} failed" in caplog.text


def test_exiting_while_the_warm_up_runs_is_a_clean_exit():
    code = textwrap.dedent(
        """
        import jax
        from jaxpp_mlir.runtime.compilation import warm_up
        assert warm_up.start_warm_up(jax.devices()) is not None
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stderr.strip() == ""

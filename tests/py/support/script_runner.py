"""Runs Python scripts each in its own forked process, after importing jax once.

A fresh Python that imports jax, optax and jaxpp_mlir spends about a second of
CPU on that before the script's first line; the tests run the snippets of README.md and docs/*.md
and the benchmark scripts this way. This runner imports them once (without
starting any JAX backend, so each child creates its own with the environment's
``XLA_FLAGS``), then forks one child per job: the child changes to the job's
directory, sends its standard output and error to ``stdout.txt`` and
``stderr.txt`` there, and runs the script as ``__main__`` with the job's
arguments in ``sys.argv`` and a namespace of its own. Nothing a script does
reaches the next one: each runs in its own process, as ``python script ARG...``
would.

Run: ``python script_runner.py TIMEOUT_S JOBS_JSON``, where ``JOBS_JSON`` is a
list of ``{"argv": [script, arg...], "cwd": directory}``; prints one JSON line
per job: ``{"argv": [...], "returncode": int, "timed_out": bool}``.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import time
import traceback

# Imported before forking; the children find them in sys.modules. No backend starts here.
import jax  # noqa: F401
import jax.numpy  # noqa: F401
import numpy  # noqa: F401
import optax  # noqa: F401

import jaxpp_mlir  # noqa: F401


def _run_child(argv: list[str], cwd: str) -> None:
    """In the forked child: runs ``python *argv`` in ``cwd`` and never returns."""
    code = 1
    try:
        os.chdir(cwd)
        for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
            target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        script = os.path.abspath(argv[0])
        sys.argv = [script, *argv[1:]]
        sys.path[0] = os.path.dirname(script)
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int | None):
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, timeout_s: float) -> tuple[int, bool]:
    """The child's exit code (negative: killed by that signal), and whether it timed out."""
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status), True
        time.sleep(delay)
        delay = min(2 * delay, 0.1)


def main(argv: list[str]) -> int:
    timeout_s, jobs = float(argv[0]), json.loads(argv[1])
    for job in jobs:
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _run_child(job["argv"], job["cwd"])
        returncode, timed_out = _wait(pid, timeout_s)
        print(json.dumps({"argv": job["argv"], "returncode": returncode, "timed_out": timed_out}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

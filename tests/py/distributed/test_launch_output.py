"""The launcher's output: child lines whole and prefixed, Gloo's connection chatter dropped
unless asked for."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

import pytest

from jaxpp_mlir.distributed import child_output

GLOO = b"[Gloo] Rank 1 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1"


def _pumped(data: bytes, *, drop_gloo: bool) -> bytes:
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    out = io.BytesIO()
    with os.fdopen(read, "rb") as stream:
        child_output.pump_lines(stream, out, b"[p1] ", drop_gloo)
    return out.getvalue()


def test_gloo_lines_are_dropped_and_other_lines_kept_whole():
    data = b"step 0: ok\n" + GLOO + b"\n" + b"step 1: " + GLOO + b"ok\n" + b"last words"
    assert _pumped(data, drop_gloo=True) == b"[p1] step 0: ok\n[p1] step 1: ok\n[p1] last words\n"


def test_gloo_lines_kept_when_asked():
    data = b"step 0: ok\n" + GLOO + b"\n"
    assert _pumped(data, drop_gloo=False) == b"[p1] step 0: ok\n[p1] " + GLOO + b"\n"


@pytest.mark.parametrize("flag", [[], ["--gloo-log"]])
def test_launcher_drops_gloo_chatter_unless_asked(tmp_path, flag):
    script = tmp_path / "chatty.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, sys
            pid = os.environ["JAXPP_PROCESS_ID"]
            sys.stdout.write({GLOO.decode()!r} + "\\n")
            sys.stdout.write("hello from " + pid + "\\n")
            """
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "jaxpp_mlir.launch", "--nproc", "2", *flag, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = sorted(proc.stdout.splitlines())
    chatter = [f"[p0] {GLOO.decode()}", f"[p1] {GLOO.decode()}"] if flag else []
    assert lines == sorted(["[p0] hello from 0", "[p1] hello from 1", *chatter])

"""The launcher names the process whose failure caused the others', even when that
process ends last: a peer whose transfer broke notes it (``JAXPP_MLIR_FAILURE_NOTES``),
as the runtime's exit hooks do, and the launch takes the cause's exit code."""

import sys

from jaxpp_mlir.runtime.failure import exit_hooks

from jaxpp_mlir.distributed import supervision

# Process 0 fails at once, noting that a peer caused it; process 1, the cause, ends
# later with its own code.
CHILD = """
import os, sys, time
sys.path[:0] = {path!r}
from jaxpp_mlir.runtime.failure import exit_hooks
process = int(os.environ["JAXPP_MLIR_PROCESS_ID"])
if process == 0:
    exit_hooks.note_peer_caused_failure(process)
    sys.exit(1)
time.sleep(0.5)
sys.exit(3)
"""


def _run(source: str, capsys) -> tuple[int, str]:
    run = supervision.Launch([sys.executable, "-c", source], 2, prefix=False)
    code = run.wait(grace_s=10.0, timeout_s=60.0)
    return code, capsys.readouterr().err


def test_the_cause_is_named_first_though_it_ends_last(capsys):
    code, err = _run(CHILD.format(path=sys.path), capsys)
    assert code == 3, err
    assert "process 1" in err.split("failed first")[0].splitlines()[-1], err


def test_without_a_note_the_first_to_end_is_first(capsys):
    source = CHILD.format(path=sys.path).replace(
        "    exit_hooks.note_peer_caused_failure(process)\n", ""
    )
    code, err = _run(source, capsys)
    assert code == 1, err
    assert "process 0" in err.split("failed first")[0].splitlines()[-1], err


def test_the_note_is_written_only_under_a_launcher(tmp_path, monkeypatch):
    monkeypatch.delenv("JAXPP_MLIR_FAILURE_NOTES", raising=False)
    exit_hooks.note_peer_caused_failure(7)  # no directory named: nothing to write
    monkeypatch.setenv("JAXPP_MLIR_FAILURE_NOTES", str(tmp_path))
    exit_hooks.note_peer_caused_failure(7)
    assert [p.name for p in tmp_path.iterdir()] == ["peer_caused.7"]

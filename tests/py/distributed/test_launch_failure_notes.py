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


# Process 0 finished, waited for process 1 (the runtime's shutdown wait) and exits with the
# watchdog's code, noting the peer it waited for; process 1 stalls in plain Python.
FINISHED_WAITING = """
import os, sys, time
sys.path[:0] = {path!r}
from jaxpp_mlir.runtime.failure import exit_hooks
process = int(os.environ["JAXPP_MLIR_PROCESS_ID"])
if process == 0:
    time.sleep(0.3)
    exit_hooks.note_stalled_peers(process, [1])
    sys.exit(70)
while True:
    time.sleep(0.05)
"""


def test_the_process_that_stalled_is_blamed_not_the_one_that_waited_for_it(capsys):
    code, err = _run(FINISHED_WAITING.format(path=sys.path), capsys)
    assert code == 124, err
    assert "failed first" not in err, err
    assert "process 1 still running" in err and "after process 0 finished" in err, err
    assert "process 0 waited for it, then exited with code 70" in err, err
    assert "exit code 124: process 1 stalled" in err, err
    lines = [line for line in err.splitlines() if "(pid" in line]
    assert "process 1" in lines[0] and "stalled" in lines[0], err
    assert "process 0" in lines[1] and "finished, waited for process 1" in lines[1], err


def test_the_stalled_peers_note_lists_them(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXPP_MLIR_FAILURE_NOTES", str(tmp_path))
    exit_hooks.note_stalled_peers(0, [1, 3])
    assert (tmp_path / "stalled_peers.0").read_text() == "1,3"

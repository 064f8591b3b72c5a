"""``python ARGS...`` through the Python fork server (``python_server.py``), or the plain
interpreter without it.

Run as ``python -I -S path/to/python_client.py ARGS...`` (ARGS: a script and its
arguments, ``-m module ...`` or ``-c code ...``): it uses the standard library only, so
it starts in milliseconds. It sends its arguments, working directory, environment and
stdin/stdout/stderr file descriptors to the server named by ``$JAXPP_PYTHON_SERVER``,
forwards the signals it receives (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2)
to the forked child, and ends as the child ended: with its exit code, or killed by
the same signal. Killing the client (SIGKILL) makes the server kill the child.

Where the variable is unset, the server is not there or refuses the request (its
environment differs where jax reads it at import), the client replaces itself with
``python ARGS...``: the same run, started the slow way.
"""

import os
import signal
import sys

# `python -I` leaves the script's directory off sys.path: the sibling module is found there.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fork_client  # noqa: E402 - stdlib only; importing jaxpp_mlir would import jax

SERVER_ENV = "JAXPP_PYTHON_SERVER"
EXIT_NO_STATUS = 3  # the server lost the run without a status: an internal error
FORWARDED_SIGNALS = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)


def run_plain(argv: list[str]) -> None:
    os.execv(sys.executable, [sys.executable, *argv])


def end_like(ending: str) -> int:
    """The exit code for ``exit N``; for ``signal N``, this process ends by signal N."""
    kind, _, value = ending.partition(" ")
    if kind == "exit" and value.isdigit():
        return int(value)
    if kind == "signal" and value.isdigit():
        number = int(value)
        if number in FORWARDED_SIGNALS:
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        return 128 + number  # a signal whose default is not to end the process
    return EXIT_NO_STATUS


def main() -> int:
    argv = sys.argv[1:]
    path = os.environ.get(SERVER_ENV, "")
    client = fork_client.connect(path) if path else None
    if client is None:
        run_plain(argv)
    with client:
        try:
            fork_client.send_request(client, {"argv": argv})
            replies = client.makefile("r", encoding="ascii")
            first = replies.readline().strip()
        except OSError:  # the server went away
            first = ""
        if not first.startswith("pid "):
            client.close()
            run_plain(argv)  # refused (or the server went away before forking)
        child = int(first.split()[1])

        def forward(signum: int, _frame: object) -> None:
            try:
                os.kill(child, signum)
            except ProcessLookupError:
                pass

        for sig in FORWARDED_SIGNALS:
            signal.signal(sig, forward)
        return end_like(replies.readline().strip())


if __name__ == "__main__":
    sys.exit(main())

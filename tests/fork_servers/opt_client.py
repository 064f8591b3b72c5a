"""``jaxpp-opt`` through the fork server (``opt_server.py``), or the plain tool without it.

Run as a script (``python -I -S path/to/opt_client.py ARGS...``): it uses the
standard library only and imports neither jax nor jaxpp_mlir, so it starts in
milliseconds. It sends its arguments, working directory, environment and its
stdin/stdout/stderr file descriptors to the server named by
``$JAXPP_OPT_SERVER`` and exits with the status of the run. Where the variable
is unset, the socket is missing or the server does not answer, it replaces
itself with ``python -m jaxpp_mlir.tools.opt ARGS...``: the same tool, started
the slow way.

``python -I -S opt_client.py --tool=filecheck ARGS...`` runs FileCheck the same
way (``python -m filecheck ARGS...`` without the server).
"""

import os
import socket
import sys

# `python -I` leaves the script's directory off sys.path: the sibling module is found there.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fork_client  # noqa: E402 - stdlib only; importing jaxpp_mlir would import jax

SERVER_ENV = "JAXPP_OPT_SERVER"
TOOL_MODULE = "jaxpp_mlir.tools.opt"
TOOL_FLAG = "--tool="
TOOL_MODULES = {"jaxpp-opt": TOOL_MODULE, "filecheck": "filecheck"}
EXIT_NO_STATUS = 3  # the server lost the run without a status: an internal error


def receive_status(client: socket.socket) -> int:
    reply = b""
    while chunk := client.recv(64):
        reply += chunk
    return int(reply) if reply.strip().isdigit() else EXIT_NO_STATUS


def run_plain_tool(tool: str, argv: list[str]) -> None:
    python = sys.executable
    os.execv(python, [python, "-m", TOOL_MODULES[tool], *argv])


def main() -> int:
    argv = sys.argv[1:]
    tool = "jaxpp-opt"
    if argv and argv[0].startswith(TOOL_FLAG):
        tool = argv.pop(0)[len(TOOL_FLAG) :]
        if tool not in TOOL_MODULES:
            sys.stderr.write(f"opt_client: unknown tool {tool!r} (one of {sorted(TOOL_MODULES)})\n")
            return 2
    path = os.environ.get(SERVER_ENV, "")
    client = fork_client.connect(path) if path else None
    if client is None:
        run_plain_tool(tool, argv)
    with client:
        fork_client.send_request(client, {"tool": tool, "argv": argv})
        return receive_status(client)


if __name__ == "__main__":
    sys.exit(main())

"""What the fork servers' clients (``opt_client.py``, ``python_client.py``) share: the
connection to a server's Unix socket and the request (``fork_server.py`` reads it).

Standard library only, and importable without the package: the clients run as
``python -I -S CLIENT.py`` and load this module from their own directory, so they
start in milliseconds without jax or jaxpp_mlir.
"""

import array
import json
import os
import socket

LENGTH_BYTES = 8
STANDARD_STREAMS = (0, 1, 2)


def connect(path: str) -> socket.socket | None:
    """A connection to the server listening at ``path``; None where none listens."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(path)
    except OSError:
        client.close()
        return None
    return client


def send_request(client: socket.socket, header: dict) -> None:
    """Sends ``header`` with this process's directory and environment, and its stdin,
    stdout and stderr as descriptors: the server's child runs in this process's place."""
    body = json.dumps({**header, "cwd": os.getcwd(), "env": dict(os.environ)}).encode("utf-8")
    message = len(body).to_bytes(LENGTH_BYTES, "big") + body
    fds = array.array("i", STANDARD_STREAMS)
    sent = client.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())])
    if sent < len(message):
        client.sendall(message[sent:])

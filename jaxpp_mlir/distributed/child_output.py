"""The launcher's output: every child line whole, prefixed with its process, Gloo's
connection chatter dropped; the launcher's own messages on their own lines."""

from __future__ import annotations

import re
import sys
import threading
from typing import IO

# One writer at a time on the launcher's stdout and stderr, a whole line each: the
# children's prefixed lines and the launcher's own messages never share a line.
OUTPUT_LOCK = threading.Lock()


# Gloo (the CPU collectives) prints one of these per connection set up, from C++.
GLOO_CHATTER = re.compile(
    rb"\[Gloo\] Rank \d+ is connected to \d+ peer ranks\. "
    rb"Expected number of connected peer ranks is : \d+"
)


def pump_lines(stream: IO[bytes], out: IO[bytes], prefix: bytes, drop_gloo: bool = True) -> None:
    """Copies ``stream`` to ``out`` line by line, each line whole and led by ``prefix``
    (Gloo's connection messages dropped with ``drop_gloo``), then closes ``stream``."""
    for line in iter(stream.readline, b""):
        if drop_gloo and GLOO_CHATTER.search(line):
            # The message may share a line with the child's own output (two writers, one fd).
            line = GLOO_CHATTER.sub(b"", line)
            if not line.strip():
                continue
        if not line.endswith(b"\n"):  # a child's last words without a newline
            line += b"\n"
        with OUTPUT_LOCK:
            out.write(prefix + line)
            out.flush()
    stream.close()


def say(message: str) -> None:
    """Writes the launcher's own ``message`` on stderr, one whole line."""
    with OUTPUT_LOCK:
        sys.stderr.write(f"jaxpp.launch: {message}\n")
        sys.stderr.flush()

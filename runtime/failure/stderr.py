"""Last words of a failing process: writes to stderr that never raise.

The watchdog and the exit hooks report through these while the process may be
ending (streams closed, another thread holding Python's buffer locks).
"""

from __future__ import annotations

import os
import sys


def write_fd(text: str) -> None:
    """Writes to stderr's file descriptor, bypassing Python's buffers and locks."""
    try:
        os.write(2, text.encode(errors="replace"))
    except OSError:
        pass


def write(text: str) -> None:
    """Writes ``text`` to stderr and flushes stdout and stderr; a closed stream is skipped."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is sys.stderr:
                stream.write(text)
            stream.flush()
        except Exception:  # a closed stream must not hide the exit
            pass

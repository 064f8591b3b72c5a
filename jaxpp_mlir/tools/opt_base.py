"""What the parts of ``jaxpp-opt`` share: its name, exit codes and exceptions."""

from __future__ import annotations

import signal

PROG = "jaxpp-opt"
SPLIT_MARKER = "// -----"
BYTECODE_MAGIC = b"ML\xefR"

# Exit codes.
EXIT_OK = 0
EXIT_FAILURE = 1  # the input does not parse, a pass failed, or diagnostics did not verify
EXIT_USAGE = 2  # the command line is wrong (unknown pass or flag, bad option)
EXIT_INTERNAL = 3  # a bug in jaxpp-opt or in a pass
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # the reader of the output went away, as for `cat`


class UsageError(Exception):
    """The command line is wrong; exit with ``EXIT_USAGE``."""


class InputError(Exception):
    """The input cannot be read or the output cannot be written; exit with ``EXIT_FAILURE``."""

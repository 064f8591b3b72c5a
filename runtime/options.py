"""The runtime's environment options, declared once, and the ``Option`` they are made of.

Each option has one environment variable, ``JAXPP_MLIR_<NAME>``; the names of
earlier releases (``JAXPP_<NAME>``) are still read, with a
``DeprecationWarning``, when the new one is not set. The compiler's options are
declared beside ``PartitionOptions`` (``jaxpp_mlir.partition_options.OPTIONS``), with
this ``Option``; docs/options.md lists both tables, checked against the declarations.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping
from typing import Any

from . import records

PREFIX = "JAXPP_MLIR_"
_LEGACY_PREFIX = "JAXPP_"


@records.frozen
class Option:
    """One option: its variable is ``PREFIX + name``; ``default`` None means unset."""

    name: str
    type: type
    default: Any
    read_by: str
    help: str
    legacy: bool = False  # also read as JAXPP_<NAME> (deprecated)
    minimum: float | None = None  # the smallest value allowed
    above: float | None = None  # every value must be greater than this
    choices: tuple[Any, ...] = ()  # the only values allowed, when not empty

    @property
    def env(self) -> str:
        return PREFIX + self.name

    @property
    def legacy_env(self) -> str | None:
        return _LEGACY_PREFIX + self.name if self.legacy else None

    def raw(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The variable's text ('' counts as unset), from the new name or the old one."""
        environ = os.environ if environ is None else environ
        text = environ.get(self.env)
        if text:
            return text
        old = self.legacy_env
        if old is not None and environ.get(old):
            warnings.warn(
                f"{old} is deprecated: set {self.env} instead", DeprecationWarning, stacklevel=3
            )
            return environ[old]
        return None

    def value(self, environ: Mapping[str, str] | None = None) -> Any:
        """The option's value: the environment's, parsed, else ``default``."""
        text = self.raw(environ)
        if text is None:
            return self.default
        try:
            value = self.type(text.strip().lower() if self.choices and self.type is str else text)
        except ValueError:
            raise ValueError(
                f"{self.env}={text!r} is not a valid {self.type.__name__}: {self.help}"
            ) from None
        allowed = self.allowed()
        if allowed and not self._allows(value):
            raise ValueError(f"{self.env}={text!r} is not allowed: {allowed} ({self.help})")
        return value

    def allowed(self) -> str:
        """The values allowed, in words ('' when any value of the type is)."""
        if self.choices:
            return "one of " + ", ".join(str(c) for c in self.choices)
        if self.above is not None:
            return f"a finite number greater than {self.above:g}"
        if self.minimum is not None:
            finite = "a finite number" if self.type is float else "an integer"
            return f"{finite} of at least {self.minimum:g}"
        return ""

    def _allows(self, value: Any) -> bool:
        if self.choices:
            return value in self.choices
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.above is not None:
            return value > self.above
        return self.minimum is None or value >= self.minimum


def _option(
    name: str, type_: type, default: Any, read_by: str, help_: str, **allowed: Any
) -> Option:
    return Option(name, type_, default, read_by, help_, legacy=True, **allowed)


NUM_PROCESSES = _option(
    "NUM_PROCESSES",
    int,
    None,
    "initialize_from_env",
    "process count (set by the launcher)",
    minimum=1,
)
PROCESS_ID = _option(
    "PROCESS_ID",
    int,
    None,
    "initialize_from_env",
    "this process's id (set by the launcher)",
    minimum=0,
)
HEARTBEAT_TIMEOUT = _option(
    "HEARTBEAT_TIMEOUT",
    int,
    20,
    "initialize_from_env",
    "seconds jax's coordination service waits for a silent process",
    minimum=1,
)
INIT_TIMEOUT = _option(
    "INIT_TIMEOUT",
    int,
    300,
    "initialize_from_env",
    "seconds the processes wait for each other to start",
    minimum=1,
)
HEARTBEAT_INTERVAL = _option(
    "HEARTBEAT_INTERVAL",
    float,
    1.0,
    "watchdog",
    "seconds between two heartbeats of a process",
    above=0,
)
PEER_TIMEOUT = _option(
    "PEER_TIMEOUT",
    float,
    20.0,
    "watchdog",
    "seconds without a peer heartbeat before the peer is declared lost",
    above=0,
)
PEER_FAILURE_GRACE = Option(
    "PEER_FAILURE_GRACE",
    float,
    3.0,
    "watchdog",
    "seconds a process whose peer failed lets its own main thread fail first (with the more "
    "specific error) before it exits naming the peer",
    minimum=0,
)
TRANSFER_TIMEOUT = _option(
    "TRANSFER_TIMEOUT",
    float,
    300.0,
    "watchdog",
    "seconds a transfer (or `gather`) may wait for its peer",
    above=0,
)
SETUP_TIMEOUT = _option(
    "SETUP_TIMEOUT",
    float,
    900.0,
    "runtime",
    "seconds each setup barrier waits (a peer still partitioning or compiling)",
    above=0,
)
SHUTDOWN_TIMEOUT = Option(
    "SHUTDOWN_TIMEOUT",
    float,
    300.0,
    "watchdog",
    "seconds a finished process waits for its peers to finish before naming them and exiting",
    above=0,
)
PROGRESS = Option(
    "PROGRESS",
    str,
    "1",
    "runtime",
    "compile progress once a compile is slow: 1 (log records; one updating line on a terminal), "
    "tqdm (a bar) or 0 (off)",
    choices=("0", "1", "tqdm"),
)
PROGRESS_AFTER = Option(
    "PROGRESS_AFTER",
    float,
    3.0,
    "runtime",
    "seconds a compile of stage programs runs before its progress is shown",
    minimum=0,
)
COMPILE_THREADS = Option(
    "COMPILE_THREADS",
    int,
    0,
    "runtime",
    "stage programs compiled at once: 0 (one per core, at most 16) or a number",
    minimum=0,
)
MERGE_PROGRAMS = Option(
    "MERGE_PROGRAMS",
    str,
    "off",
    "runtime",
    "on: small one-device stage programs on XLA:CPU compile as union programs (each "
    "kernel built once: a faster first step on few cores, dearer launches); first-steps: "
    "unions until the second call, then each program compiled alone in the background; "
    "off: each alone",
    choices=("on", "first-steps", "off"),
)
COMPILE_TIMEOUT = Option(
    "COMPILE_TIMEOUT",
    float,
    3600.0,
    "runtime",
    "seconds compile() waits for its stage programs before it raises, naming the programs "
    "still compiling",
    minimum=0,
)
CHECKPOINT_IO_TIMEOUT = Option(
    "CHECKPOINT_IO_TIMEOUT",
    float,
    1800.0,
    "checkpoint",
    "seconds a checkpoint's save or restore waits for the storage to open, write or read "
    "one array before it raises, naming the array's file",
    minimum=0,
)
SHARED_OUTPUT_MAX_BYTES = Option(
    "SHARED_OUTPUT_MAX_BYTES",
    int,
    1024,
    "runtime (several processes)",
    "largest step output held by another process that every process receives after each "
    "call, readable there with np.asarray (0: none; larger ones through step.gather)",
    minimum=0,
)


COMPILATION_CACHE = Option(
    "COMPILATION_CACHE",
    int,
    1,
    "runtime",
    "1: stage executables go through JAX's persistent compilation cache when JAX's is on "
    "(`JAX_COMPILATION_CACHE_DIR`); 0: always compiled",
    choices=(0, 1),
)


EXECUTABLE_MEMORY_CACHE = Option(
    "EXECUTABLE_MEMORY_CACHE",
    int,
    256,
    "runtime",
    "how many compiled stage programs a process keeps in memory to reuse, or to rebind to "
    "other devices instead of compiling them again (least recently used go first); 0: off",
    minimum=0,
)


WARM_UP = Option(
    "WARM_UP",
    int,
    1,
    "partition",
    "1: on XLA:CPU, partition() runs one tiny dot on a thread of its own, so that the "
    "first step does not wait for the backend's one-time setup of its dot library; 0: off",
    choices=(0, 1),
)

FAILURE_NOTES = Option(
    "FAILURE_NOTES",
    str,
    None,
    "the launcher",
    "a directory (set by the launcher) where a process that fails because a peer failed "
    "says so, so that the launcher names the peer as the first failure",
)

KILL_GRACE = Option(
    "KILL_GRACE",
    float,
    3.0,
    "the launcher",
    "seconds a process the launcher stops gets between its SIGTERM and its SIGKILL",
    minimum=0,
)

LAUNCH_PYTHON = Option(
    "LAUNCH_PYTHON",
    str,
    None,
    "the launcher",
    "the command that starts each process's Python, the script and its arguments after it "
    "(default: the launcher's own interpreter), e.g. a wrapper or a fork server's client",
)

OPTIONS: tuple[Option, ...] = (
    NUM_PROCESSES,
    PROCESS_ID,
    FAILURE_NOTES,
    KILL_GRACE,
    LAUNCH_PYTHON,
    HEARTBEAT_TIMEOUT,
    INIT_TIMEOUT,
    HEARTBEAT_INTERVAL,
    PEER_TIMEOUT,
    PEER_FAILURE_GRACE,
    TRANSFER_TIMEOUT,
    SETUP_TIMEOUT,
    SHUTDOWN_TIMEOUT,
    PROGRESS,
    PROGRESS_AFTER,
    COMPILE_THREADS,
    MERGE_PROGRAMS,
    COMPILE_TIMEOUT,
    CHECKPOINT_IO_TIMEOUT,
    SHARED_OUTPUT_MAX_BYTES,
    COMPILATION_CACHE,
    EXECUTABLE_MEMORY_CACHE,
    WARM_UP,
)


def markdown_row(option: Option) -> str:
    """The option's row in docs/options.md's table of environment variables."""
    if option.default is None:
        default = ""
    elif isinstance(option.default, str):
        default = f" ({option.default})"
    else:
        default = f" ({option.default:g})"
    old = f" (was `{option.legacy_env}`)" if option.legacy else ""
    return f"| `{option.env}`{default} | {option.read_by} | {option.help}{old} |"

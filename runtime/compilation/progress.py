"""Progress of compiling stage programs: silent when fast, told once it gets slow.

A compile that ends within ``JAXPP_MLIR_PROGRESS_AFTER`` seconds (3 by default) says
nothing. Past that, the ``jaxpp_mlir.runtime.compilation.progress`` logger reports at INFO: a line
naming what is still compiling, one line per finished program (``compiled 3/12 stage
programs: stage1_bwd (0.42 s)``, or ``loaded ... from the cache`` for a program taken
from JAX's persistent compilation cache or from memory), a line every
``HEARTBEAT_S`` seconds while nothing finishes, and a closing line naming the slowest.

When the application configured no logging, the records go to stderr; on a terminal they
rewrite one line in place instead of scrolling. ``JAXPP_MLIR_PROGRESS=tqdm`` shows a
tqdm bar (once slow, too), ``JAXPP_MLIR_PROGRESS=0`` (or the logger's level) nothing.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .. import options

logger = logging.getLogger("jaxpp_mlir.runtime.compilation.progress")

_T = TypeVar("_T")

#: While nothing finishes, a "still compiling" line this often (log records; a terminal
#: line is refreshed every second).
HEARTBEAT_S = 30.0
_TERMINAL_REFRESH_S = 1.0
#: How a program came to be: compiled by XLA, or loaded (persistent cache or memory).
COMPILED = "compiled"
LOADED = "loaded"


class _OneLineHandler(logging.StreamHandler):
    """Renders every record over the previous one on a terminal; the last line stays."""

    terminator = ""

    def format(self, record: logging.LogRecord) -> str:
        end = "\n" if getattr(record, "final", False) else ""
        return "\r\x1b[2K" + super().format(record) + end


def _show_by_default() -> None:
    """Progress goes to stderr unless the application configured logging itself."""
    if logger.hasHandlers():
        return
    stream = sys.stderr
    on_terminal = hasattr(stream, "isatty") and stream.isatty()
    handler = _OneLineHandler(stream) if on_terminal else logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("jaxpp_mlir: %(message)s"))
    logger.addHandler(handler)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)


def _on_terminal() -> bool:
    return any(isinstance(h, _OneLineHandler) for h in logger.handlers)


class CompileProgress:
    """Counts finished compilations of ``total`` programs; speaks once ``show_after`` passed."""

    def __init__(self, total: int, *, show_after: float, use_tqdm: bool = False):
        self.total = total
        self.done = 0
        self.loaded = 0
        self.slowest: tuple[float, str] = (0.0, "")
        self.started = time.perf_counter()
        self.shown = False
        self._show_after = show_after
        self._use_tqdm = use_tqdm
        self._bar: Any = None
        self._running: dict[str, float] = {}
        self._last_said = self.started
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="jaxpp-progress", daemon=True)
        self._ticker.start()

    @classmethod
    def start(cls, total: int) -> CompileProgress | None:
        """A progress reporter for ``total`` programs, or ``None`` when switched off."""
        mode = str(options.PROGRESS.value()).strip().lower()
        if total < 1 or mode in ("0", "off", "false", "no"):
            return None
        show_after = max(0.0, float(options.PROGRESS_AFTER.value()))
        if mode == "tqdm":
            try:
                import tqdm  # noqa: F401
            except ImportError:
                logger.warning("JAXPP_MLIR_PROGRESS=tqdm but tqdm is not installed: logging")
            else:
                return cls(total, show_after=show_after, use_tqdm=True)
        _show_by_default()
        if not logger.isEnabledFor(logging.INFO):
            return None
        return cls(total, show_after=show_after)

    def wrap(self, compile_one: Callable[..., tuple[_T, str]]) -> Callable[..., _T]:
        """``compile_one(name, ...) -> (executable, how)`` that also reports its completion;
        the wrapped function returns the executable."""

        def timed(name: str, *args: object) -> _T:
            begin = time.perf_counter()
            with self._lock:
                self._running[name] = begin
            try:
                result, how = compile_one(name, *args)
            finally:
                with self._lock:
                    self._running.pop(name, None)
            self.finished(name, time.perf_counter() - begin, how)
            return result

        return timed

    def finished(self, name: str, seconds: float, how: str = COMPILED) -> None:
        with self._lock:
            self.done += 1
            self.loaded += how == LOADED
            self.slowest = max(self.slowest, (seconds, name))
            if not self.shown:
                return
            self._last_said = time.perf_counter()
            if self._bar is not None:
                self._bar.update(1)
                return
            verb = "compiled" if how == COMPILED else "loaded"
            origin = "" if how == COMPILED else " from the cache"
            logger.info(
                "%s %d/%d stage programs: %s (%.2f s)%s",
                verb,
                self.done,
                self.total,
                name,
                seconds,
                origin,
            )

    def finish(self) -> str:
        """Closes the report; returns the closing line (logged only if progress was shown)."""
        self._stop.set()
        self._ticker.join(timeout=5.0)
        with self._lock:
            seconds, name = self.slowest
            compiled = self.done - self.loaded
            loaded = f", {self.loaded} loaded from the cache" if self.loaded else ""
            line = (
                f"{compiled} stage programs compiled{loaded} in "
                f"{time.perf_counter() - self.started:.2f} s; slowest: {name} ({seconds:.2f} s)"
            )
            if self._bar is not None:
                self._bar.close()
            elif self.shown:
                logger.info(line, extra={"final": True})
        return line

    def _tick(self) -> None:
        if self._stop.wait(self._show_after):
            return
        with self._lock:
            self.shown = True
            if self._use_tqdm:
                from tqdm import tqdm

                self._bar = tqdm(
                    total=self.total, initial=self.done, desc="compiling stage programs"
                )
            else:
                self._say_running()
        interval = _TERMINAL_REFRESH_S if _on_terminal() else HEARTBEAT_S
        while not self._stop.wait(min(interval, 1.0)):
            with self._lock:
                if self._bar is None and time.perf_counter() - self._last_said >= interval:
                    self._say_running()

    def _say_running(self) -> None:
        now = time.perf_counter()
        self._last_said = now
        running = ", ".join(
            f"{name} ({now - since:.0f} s)" for name, since in sorted(self._running.items())
        )
        logger.info(
            "compiling stage programs: %d/%d done after %.0f s%s",
            self.done,
            self.total,
            now - self.started,
            f"; running: {running}" if running else "",
        )

"""Progress of compiling stage programs: silent when fast, told once it gets slow.

A compile that ends within ``JAXPP_MLIR_PROGRESS_AFTER`` seconds (3 by default) says
nothing. Past that, the ``jaxpp_mlir.runtime.compilation.progress`` logger reports at
INFO one line saying how many programs are done and how many are left, naming those
still compiling, and when all are ready one closing line: how many were compiled by
XLA, reused from memory (a program identical to one this process compiled before, for
these or other devices) or loaded from JAX's persistent compilation cache, and the
slowest. So a slow compile writes two lines to a log or a file; each finished program
(``compiled 3/12 stage programs: stage1_bwd (0.42 s)``) is a DEBUG record.

When the application configured no logging, the records go to stderr; on a terminal
they rewrite one line in place instead of scrolling, and that line also follows each
finished program and refreshes every second. ``JAXPP_MLIR_PROGRESS=tqdm`` shows a tqdm
bar (once slow, too), ``JAXPP_MLIR_PROGRESS=0`` (or the logger's level) nothing.
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

#: How often the terminal line is refreshed while nothing finishes.
_TERMINAL_REFRESH_S = 1.0
#: How a program came to be: compiled by XLA, loaded from JAX's persistent compilation
#: cache, or reused from memory (the same program compiled earlier in this process).
COMPILED = "compiled"
LOADED = "loaded"
REUSED = "reused"
#: How each way reads in the report.
_SAID = {
    COMPILED: "compiled",
    LOADED: "loaded from the persistent compilation cache",
    REUSED: "reused from memory (the same program compiled earlier in this process)",
}


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
        self.made: dict[str, int] = dict.fromkeys(_SAID, 0)  # how -> programs made so far
        self.slowest: tuple[float, str] = (0.0, "")
        self.started = time.perf_counter()
        self.shown = False
        self._show_after = show_after
        self._use_tqdm = use_tqdm
        self._bar: Any = None
        self._running: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="jaxpp-progress", daemon=True)
        self._ticker.start()

    @property
    def loaded(self) -> int:
        """Programs not compiled here: loaded from the persistent cache or reused."""
        return self.done - self.made[COMPILED]

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
            self.made[how] = self.made.get(how, 0) + 1
            self.slowest = max(self.slowest, (seconds, name))
            if not self.shown:
                return
            if self._bar is not None:
                self._bar.update(1)
                return
            # One line on a terminal (rewritten in place); a DEBUG record in a log.
            logger.log(
                logging.INFO if _on_terminal() else logging.DEBUG,
                "%s %d/%d stage programs: %s (%.2f s)",
                _SAID.get(how, how),
                self.done,
                self.total,
                name,
                seconds,
            )

    def finish(self) -> str:
        """Closes the report; returns the closing line (logged only if progress was shown)."""
        self._stop_ticking()
        with self._lock:
            seconds, name = self.slowest
            ways = ", ".join(f"{n} {_SAID.get(how, how)}" for how, n in self.made.items() if n)
            line = (
                f"{self.done} stage programs ready in "
                f"{time.perf_counter() - self.started:.2f} s: {ways or 'none'}; "
                f"slowest: {name} ({seconds:.2f} s)"
            )
            if self._bar is not None:
                self._bar.close()
            elif self.shown:
                logger.info(line, extra={"final": True})
        return line

    def abandon(self) -> None:
        """Stops the report without a closing line: the compile failed, and its error says
        why."""
        self._stop_ticking()
        with self._lock:
            if self._bar is not None:
                self._bar.close()

    def _stop_ticking(self) -> None:
        self._stop.set()
        self._ticker.join(timeout=5.0)

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
                return
            self._say_running()
        if not _on_terminal():
            return  # a log gets one line now and the closing line
        while not self._stop.wait(_TERMINAL_REFRESH_S):
            with self._lock:
                self._say_running()

    def _say_running(self) -> None:
        now = time.perf_counter()
        running = ", ".join(
            f"{name} ({now - since:.0f} s)" for name, since in sorted(self._running.items())
        )
        logger.info(
            "compiling %d stage programs: %d done, %d left after %.0f s%s",
            self.total,
            self.done,
            self.total - self.done,
            now - self.started,
            f"; running: {running}" if running else "",
        )

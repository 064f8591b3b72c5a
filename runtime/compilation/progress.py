"""Progress of compiling many stage programs: a log line per program, the slowest named.

Compiling at least ``MIN_JOBS`` distinct stage programs logs, on the
``jaxpp_mlir.runtime.progress`` logger at INFO (to stderr when the application has
configured no logging), one line per finished program
(``compiled 3/12 stage programs: stage1_bwd (0.42 s)``) and a closing line naming the
slowest. With tqdm installed and ``JAXPP_MLIR_PROGRESS=tqdm`` it shows a progress bar
instead. ``JAXPP_MLIR_PROGRESS=0`` (or the logger's level) switches it off.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import options

logger = logging.getLogger("jaxpp_mlir.runtime.progress")

#: Fewer distinct programs than this compile silently.
MIN_JOBS = 6


def _show_by_default() -> None:
    """Progress lines go to stderr unless the application configured logging itself."""
    if not logger.hasHandlers():
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("jaxpp_mlir: %(message)s"))
        logger.addHandler(handler)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)


class CompileProgress:
    """Counts finished compilations of ``total`` programs and remembers the slowest."""

    def __init__(self, total: int, bar: Any = None):
        self.total = total
        self.done = 0
        self.slowest: tuple[float, str] = (0.0, "")
        self.started = time.perf_counter()
        self._bar = bar
        self._lock = threading.Lock()

    @classmethod
    def start(cls, total: int) -> CompileProgress | None:
        """A progress reporter for ``total`` programs, or ``None`` when it would be silent."""
        mode = str(options.PROGRESS.value()).strip().lower()
        if total < MIN_JOBS or mode in ("0", "off", "false", "no"):
            return None
        if mode == "tqdm":
            try:
                from tqdm import tqdm
            except ImportError:
                logger.warning("JAXPP_MLIR_PROGRESS=tqdm but tqdm is not installed: logging")
            else:
                return cls(total, tqdm(total=total, desc="compiling stage programs", unit="prog"))
        _show_by_default()
        if not logger.isEnabledFor(logging.INFO):
            return None
        return cls(total)

    def wrap(self, compile_one: Callable[..., Any]) -> Callable[..., Any]:
        """``compile_one(name, ...)`` that also reports its completion."""

        def timed(name: str, *args: Any) -> Any:
            begin = time.perf_counter()
            result = compile_one(name, *args)
            self.finished(name, time.perf_counter() - begin)
            return result

        return timed

    def finished(self, name: str, seconds: float) -> None:
        with self._lock:
            self.done += 1
            self.slowest = max(self.slowest, (seconds, name))
            if self._bar is not None:
                self._bar.update(1)
            else:
                logger.info(
                    "compiled %d/%d stage programs: %s (%.2f s)",
                    self.done,
                    self.total,
                    name,
                    seconds,
                )

    def finish(self) -> str:
        """Closes the report; returns (and logs) the closing line."""
        if self._bar is not None:
            self._bar.close()
        seconds, name = self.slowest
        line = (
            f"compiled {self.done} stage programs in {time.perf_counter() - self.started:.2f} s; "
            f"slowest: {name} ({seconds:.2f} s)"
        )
        logger.info(line)
        return line

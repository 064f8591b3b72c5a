"""Per-pass wall time for ``jaxpp-opt --timing``, reported like ``mlir-opt -mlir-timing``."""

from __future__ import annotations

import time
from typing import IO


class PassTimer:
    """Accumulates the wall time of each pipeline element between its before and after hooks."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, float]] = []  # (pass name, seconds), in run order
        self._started: float | None = None

    def start(self) -> None:
        self._started = time.perf_counter()

    def stop(self, name: str) -> None:
        if self._started is not None:
            self.entries.append((name, time.perf_counter() - self._started))
            self._started = None

    def report(self, out: IO[str]) -> None:
        """Writes the execution time report: one line per pass run, then the total."""
        total = sum(seconds for _, seconds in self.entries)
        rule = "===" + "-" * 73 + "==="
        out.write(f"{rule}\n{'... Execution time report ...':^79}\n{rule}\n")
        out.write(f"  Total Execution Time: {total:.4f} seconds\n\n")
        out.write("  ----Wall Time----  ----Name----\n")
        for name, seconds in [*self.entries, ("Total", total)]:
            share = 100.0 * seconds / total if total > 0 else 0.0
            out.write(f"  {seconds:8.4f} ({share:5.1f}%)  {name}\n")
        out.flush()

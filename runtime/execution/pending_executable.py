"""An executable still compiling, stood in for while the dispatch code is generated.

``compile_plan`` builds the dispatch of a plan whose ranks have one device each while its
stage programs compile (slot resolution and code generation need no compiled program
there: one-device values have one layout). The generated operations launch through
``exe.execute_sharded``; ``bind`` sets it to the compiled executable's, so the stand-in
adds one attribute read per launch and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import RuntimeFailure


class PendingExecutable:
    """Executable ``name`` until ``bind(exe)``: then every call goes to ``exe``."""

    __slots__ = ("_exe", "execute_sharded", "name")

    def __init__(self, name: str):
        self.name = name
        self._exe: Any = None
        self.execute_sharded = self._not_compiled

    def _not_compiled(self, arguments: Sequence[Any]) -> Any:
        raise RuntimeFailure(f"executable {self.name!r} ran before its compile finished")

    def bind(self, exe: Any) -> None:
        self._exe = exe
        self.execute_sharded = exe.execute_sharded

    @property
    def bound(self) -> Any:
        """The compiled executable (``RuntimeFailure`` before ``bind``)."""
        if self._exe is None:
            self._not_compiled(())
        return self._exe

    def get_parameter_shardings(self) -> Sequence[Any] | None:
        return self.bound.get_parameter_shardings()

    def get_output_shardings(self) -> Sequence[Any] | None:
        return self.bound.get_output_shardings()

    def hlo_modules(self) -> list[Any]:
        return self.bound.hlo_modules()

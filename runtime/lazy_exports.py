"""Names of a package that load on first use (PEP 562), for this package and the compiler's."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any

from .host_heap import collector_paused


def lazy_getattr(
    package: str, sources: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``sources[name]`` is the module defining
    ``name``; a name it lacks may be a submodule. A loaded name is kept in ``namespace``.
    The modules load with the cyclic collector paused (``host_heap``)."""

    def __getattr__(name: str) -> Any:
        module = sources.get(name)
        if module is None:
            if importlib.util.find_spec(f"{package}.{name}") is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            with collector_paused():
                return importlib.import_module(f"{package}.{name}")
        with collector_paused():
            value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__

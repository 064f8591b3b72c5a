"""Moved to ``jaxpp_mlir.ir.utils``; this name stays for code written against it."""

from jaxpp_mlir.ir.utils import *  # noqa: F403
from jaxpp_mlir.ir.utils import __all__  # noqa: F401

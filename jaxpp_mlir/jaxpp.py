"""Short import path for :mod:`jaxpp_mlir.compat.jaxpp`: ``import jaxpp_mlir.jaxpp as jaxpp``."""

from jaxpp_mlir.compat.jaxpp import *  # noqa: F403
from jaxpp_mlir.compat.jaxpp import __all__  # noqa: F401

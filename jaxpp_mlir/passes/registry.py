"""Imports every module of ``jaxpp_mlir.passes``, so that each pass registers itself by
name: a new pass is its own file, listed nowhere else."""

import importlib
import pkgutil

from jaxpp_mlir import passes

for _module in pkgutil.iter_modules(passes.__path__, f"{passes.__name__}."):
    importlib.import_module(_module.name)

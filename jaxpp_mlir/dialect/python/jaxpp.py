"""The (empty) Python module of the unregistered ``jaxpp`` dialect.

The MLIR bindings look for a Python module for the dialect of every op they
wrap and do not remember a failed lookup; without this module each wrapped
``jaxpp.*`` op costs several failed imports (seconds per partition of a large
pipeline).
"""

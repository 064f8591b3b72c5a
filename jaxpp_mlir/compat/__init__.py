"""Compatibility layers for code written against other pipeline libraries.

``jaxpp_mlir.compat.jaxpp`` (short path ``jaxpp_mlir.jaxpp``) offers NVIDIA
JaxPP's ``jaxpp.api`` names on top of jaxpp_mlir.
"""

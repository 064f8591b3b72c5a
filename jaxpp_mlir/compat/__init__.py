"""The parts behind ``jaxpp_mlir.jaxpp``, NVIDIA JaxPP's ``jaxpp.api`` names on jaxpp_mlir:
its arrays, its jit entry points, its primitives and its schedules."""

"""Shared pytest setup: 8 CPU devices stand in for GPUs (set before jax is imported)."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

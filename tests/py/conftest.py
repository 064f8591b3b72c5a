"""Shared pytest setup: 8 CPU devices stand in for GPUs (set here, once, before jax is
imported), and this folder on ``sys.path`` so that test files can ``import toolkit``."""

import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

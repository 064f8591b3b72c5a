"""The robustness suite: its helper modules importable by name, and its markers."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a multi-process test taking tens of seconds")

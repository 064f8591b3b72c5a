"""The launcher's argument types: each value is checked where argparse reads it, so a bad
one is a usage error (exit 2) naming the flag, never a crash later."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

MAX_PROCESSES = 1024
MAX_DEVICES_PER_PROCESS = 4096


def count(limit: int) -> Callable[[str], int]:
    """An argparse type: an integer from 1 to ``limit``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not 1 <= value <= limit:
            raise argparse.ArgumentTypeError(f"{value} is out of range (1 to {limit})")
        return value

    return parse


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is out of range (1 to 65535)")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds")
    return value


def non_negative_seconds(text: str) -> float:
    value = seconds(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value:g} is negative")
    return value


def positive_seconds(text: str) -> float:
    value = seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value:g} is not positive")
    return value

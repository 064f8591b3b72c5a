"""Small exchanges between processes through ``jax.distributed``'s key-value store.

Every wait here is bounded: a process publishes its part under a key, then
polls for the other processes' keys until all are there, a process reports an
error under the ``error/`` key of the same exchange (it is raised here, naming
that process), the watchdog detects a lost peer (``check``), or the timeout
passes.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from .. import options
from ..errors import RuntimeFailure

ROOT = "jaxpp"
log = logging.getLogger(__name__)

# The all-to-all exchanges (``Exchange.gather``) this process has made: each one a
# round through the key-value store where every process waits for every other.
gather_count = 0


def client() -> Any:
    """The ``jax.distributed`` client of this process (raises if not initialized)."""
    from .. import _jax_compat

    c = _jax_compat.distributed_client()
    if c is None:
        raise RuntimeFailure(
            "jax.distributed is not initialized: call jaxpp_mlir.launch.initialize_from_env() "
            "or jax.distributed.initialize(...) before compiling a program for several processes"
        )
    return c


class Exchange:
    """Bounded all-to-all exchanges of strings among ``num_processes`` processes.

    Keys live under ``jaxpp/<prefix>/``. ``fail`` publishes an error that makes
    every other process's pending or later ``gather`` under this prefix raise.
    """

    def __init__(
        self,
        prefix: str,
        process: int,
        num_processes: int,
        timeout_s: float,
        check: Callable[[], None] | None = None,
    ):
        self.prefix = f"{ROOT}/{prefix}"
        self.process = process
        self.num_processes = num_processes
        self.timeout_s = timeout_s
        self.check = check  # raises when a failure is known (the watchdog's check)

    def fail(self, message: str) -> None:
        """Tells the other processes that this one failed (best effort)."""
        try:
            client().key_value_set(f"{self.prefix}/error/{self.process}", message[:4000], True)
        except Exception:
            pass

    def gather(self, name: str, value: str, processes: Sequence[int] | None = None) -> list[str]:
        """Publishes ``value`` as this process's part of ``name``; returns every part.

        ``processes`` (default: all) are the processes whose parts are awaited;
        the result lists their values in that order.
        """
        global gather_count
        gather_count += 1
        log.debug("key-value exchange %s/%s", self.prefix, name)
        kv = client()
        directory = f"{self.prefix}/{name}/"
        kv.key_value_set(f"{directory}{self.process}", value)
        wanted = list(range(self.num_processes)) if processes is None else list(processes)
        deadline = time.monotonic() + self.timeout_s
        delay = 0.001
        while True:
            parts = {key.rsplit("/", 1)[1]: v for key, v in kv.key_value_dir_get(directory)}
            errors = kv.key_value_dir_get(f"{self.prefix}/error/")
            if errors:
                key, message = errors[0]
                raise RuntimeFailure(
                    f"process {key.rsplit('/', 1)[1]} failed while this process (process "
                    f"{self.process}) waited for '{name}': {message}"
                )
            missing = [p for p in wanted if str(p) not in parts]
            if not missing:
                return [parts[str(p)] for p in wanted]
            if self.check is not None:
                self.check()
            if time.monotonic() > deadline:
                raise RuntimeFailure(
                    f"process {self.process} timed out after {self.timeout_s:.0f} s waiting for "
                    f"processes {missing} at '{name}' (are they running the same program? "
                    f"raise the limit with {options.SETUP_TIMEOUT.env})"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def get(self, name: str, process: int, timeout_s: float | None = None) -> str:
        """Blocks until ``process`` published ``name`` (no polling), bounded by the timeout."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        try:
            return client().blocking_key_value_get(
                f"{self.prefix}/{name}/{process}", int(timeout * 1000)
            )
        except Exception as e:
            raise RuntimeFailure(
                f"process {self.process} got no '{name}' from process {process} within "
                f"{timeout:.0f} s: {e}"
            ) from e

    def put(self, name: str, value: str) -> None:
        client().key_value_set(f"{self.prefix}/{name}/{self.process}", value)

    def delete(self, name: str) -> None:
        """Deletes this process's part of ``name`` (best effort)."""
        try:
            client().key_value_delete(f"{self.prefix}/{name}/{self.process}")
        except Exception:
            pass


def probe_coordinator() -> str | None:
    """Why the coordination service's address refuses a TCP connection (None if it
    accepts one, or if the address is unknown)."""
    from .. import _jax_compat

    address = _jax_compat.coordinator_address()
    if not address or ":" not in address:
        return None
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0):
            return None
    except ConnectionRefusedError:
        return f"{address} refuses connections"
    except (OSError, ValueError) as e:
        return f"{address} is unreachable ({e})"

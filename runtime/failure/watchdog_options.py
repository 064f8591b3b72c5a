"""The failure detector's timeouts (``watchdog.Watchdog``), from ``runtime.options``."""

from __future__ import annotations

from .. import options, records


@records.frozen
class WatchdogOptions:
    """Timeouts of the failure detection (seconds); environment variables override."""

    interval_s: float = options.HEARTBEAT_INTERVAL.default
    peer_timeout_s: float = options.PEER_TIMEOUT.default
    transfer_timeout_s: float = options.TRANSFER_TIMEOUT.default
    grace_s: float = options.PEER_FAILURE_GRACE.default
    shutdown_timeout_s: float = options.SHUTDOWN_TIMEOUT.default

    @classmethod
    def from_env(cls) -> WatchdogOptions:
        """From the environment (``runtime.options``: heartbeat interval, peer, transfer
        and shutdown timeouts, the grace after a peer's failure)."""
        return cls(
            interval_s=options.HEARTBEAT_INTERVAL.value(),
            peer_timeout_s=options.PEER_TIMEOUT.value(),
            transfer_timeout_s=options.TRANSFER_TIMEOUT.value(),
            grace_s=options.PEER_FAILURE_GRACE.value(),
            shutdown_timeout_s=options.SHUTDOWN_TIMEOUT.value(),
        )

"""Failure detection: the heartbeat watchdog, exit hooks and their options."""

"""Compiling stage programs: PJRT compile, the in-memory and persistent caches, progress."""

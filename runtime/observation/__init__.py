"""Observing a run: traces of the dispatch loop and peak memory per rank."""

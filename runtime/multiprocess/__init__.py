"""Plans whose ranks live in several processes: local plans, cross-process transfers, setup."""

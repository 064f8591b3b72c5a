"""Instruction kinds: one module per kind (its data, slot resolution and dispatch code),
and ``registry``, the one table the rest of the runtime reads them through."""

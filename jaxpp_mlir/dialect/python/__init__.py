"""Python modules the MLIR bindings load for dialects without generated bindings."""

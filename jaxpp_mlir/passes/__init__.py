"""The jaxpp passes: one pass per module, registered by name on import."""

"""The jaxpp ops (names, builders, accessors); see ``ops``."""

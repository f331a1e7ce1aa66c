"""The error every configuration problem is reported as, shared by the config modules."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value or key that cannot be used; names the dotted key."""

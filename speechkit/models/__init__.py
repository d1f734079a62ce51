"""speechkit.models."""

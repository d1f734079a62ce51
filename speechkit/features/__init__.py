"""speechkit.features."""

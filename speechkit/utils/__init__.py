"""speechkit.utils."""

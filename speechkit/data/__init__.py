"""speechkit.data."""

"""speechkit.decode."""

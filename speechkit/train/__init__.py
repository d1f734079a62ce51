"""speechkit.train."""

"""speechkit.nn."""

"""speechkit.text."""

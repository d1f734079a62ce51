"""speechkit.bin."""

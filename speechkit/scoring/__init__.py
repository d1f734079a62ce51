"""speechkit.scoring."""

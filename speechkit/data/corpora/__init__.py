"""speechkit.data.corpora."""

"""trainscale.data."""

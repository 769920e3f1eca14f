"""trainscale.results."""

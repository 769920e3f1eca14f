"""trainscale.train."""

"""trainscale.parallel."""

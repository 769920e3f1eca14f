"""trainscale.metrics."""

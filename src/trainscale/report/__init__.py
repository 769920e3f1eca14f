"""trainscale.report."""

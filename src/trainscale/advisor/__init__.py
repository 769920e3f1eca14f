"""`trainscale recommend`: search this machine for the fastest setting that keeps accuracy."""

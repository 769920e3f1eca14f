"""`trainscale recommend`: search this machine for the fastest setting that keeps accuracy
(`space` the candidates, `search` successive halving within a budget over `trials`, then the
accuracy check; `run` the whole recommendation in one call)."""

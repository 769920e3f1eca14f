"""trainscale.models."""

"""Sweeps: many runs from one spec, one at a time, resumable."""

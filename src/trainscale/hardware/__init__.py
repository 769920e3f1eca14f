"""The machine: its facts, its theoretical peaks, what it can hold, and a run's hardware figures."""

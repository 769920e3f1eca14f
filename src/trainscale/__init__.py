"""trainscale: how much faster training gets with parallel hardware, and at what accuracy cost."""

__version__ = "0.1.0"

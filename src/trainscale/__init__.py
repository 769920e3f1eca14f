"""trainscale: how much faster does training get with parallel hardware, and at what accuracy cost."""

__version__ = "0.1.0"

"""Sweeps: many runs from one spec, one at a time, resumable.

Called, the package is the Python API's `trainscale.sweep` (see trainscale/entry.py).
"""

from trainscale.entry import callable_package

callable_package(__name__)

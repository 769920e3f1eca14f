"""One run: resolve the options, launch the workers (or join a launcher), record the result.

Called, the package is the Python API's `trainscale.run` (see trainscale/entry.py).
"""

from trainscale.entry import callable_package

callable_package(__name__)

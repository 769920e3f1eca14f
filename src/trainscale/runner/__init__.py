"""One run: resolve the options, launch the workers (or join a launcher), record the result."""

"""The test suite: a package, so tests import their helpers as `tests.helpers...` and
spawned worker processes import test modules by name (`tests.distributed...`)."""

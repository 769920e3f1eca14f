"""The `trainscale` console script's entry point, kept apart from the command line's modules.

Workers start by multiprocessing's spawn method, which first re-runs the imports of the
parent's main script in each new process (as `__mp_main__`). The script pip writes for a
console command imports its entry point's module: this one costs nothing there, where
`trainscale.cli`, which imports every command's module, cost each worker about 0.3 s of its
start. (`python -m trainscale` is not re-run: spawn skips a package's `__main__`.)
"""

import sys


def main() -> int:
    """Run the command line (`trainscale.cli.main`) and return its exit status."""
    try:
        from trainscale.cli import main as command_line

        return command_line()
    except KeyboardInterrupt:
        # Ctrl-C while the command line loads, before a command's own handling of it: no
        # work has started; one line, not Python's traceback of an import.
        print("trainscale: interrupted (SIGINT)", file=sys.stderr)
        return 130

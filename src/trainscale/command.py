"""The `trainscale` console script's entry point, kept apart from the command line's modules.

Workers start by multiprocessing's spawn method, which first re-runs the imports of the
parent's main script in each new process (as `__mp_main__`). The script pip writes for a
console command imports its entry point's module: this one costs nothing there, where
`trainscale.cli`, which imports every command's module, cost each worker about 0.3 s of its
start. (`python -m trainscale` is not re-run: spawn skips a package's `__main__`.)
"""


def main() -> int:
    """Run the command line (`trainscale.cli.main`) and return its exit status."""
    from trainscale.cli import main as command_line

    return command_line()

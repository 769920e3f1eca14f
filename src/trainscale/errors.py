"""Errors that mean "the user asked for something we cannot do".

The CLI prints these as one line and exits with status 2; anything else is a bug and keeps
its traceback.
"""


class TrainscaleError(Exception):
    """A user-facing error with a message that explains what to change."""


class ConfigError(TrainscaleError):
    """An invalid option, number, or combination of options."""


class DataError(TrainscaleError):
    """Missing, corrupt or unreadable dataset files."""


class DataNotFound(DataError):
    """The dataset's files are not where they were looked for: nothing found, as opposed to
    files found and unreadable (a DataError of its own)."""


class StoreError(TrainscaleError):
    """The results store cannot be opened, written, or has no such run."""


class WorkloadError(TrainscaleError):
    """A custom workload that cannot be used: its file or module is missing or broken, or
    what it names is not a workload spec. The message names the file and the problem."""


MAX_REASON_CHARS = 2_000
"""The longest failure reason printed and stored: an exception of megabytes (a workload
that puts a whole tensor in its message) would otherwise be one line of megabytes on the
terminal and in every listing. The worker's full traceback is saved apart."""


def capped_reason(reason: str) -> str:
    """`reason`, cut to MAX_REASON_CHARS with a note of how much was cut."""
    if len(reason) <= MAX_REASON_CHARS:
        return reason
    cut = len(reason) - MAX_REASON_CHARS
    return f"{reason[:MAX_REASON_CHARS]}... ({cut:,} more characters cut)"

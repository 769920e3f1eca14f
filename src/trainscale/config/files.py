"""Reading the TOML files users give trainscale (sweeps, clusters, prices), with one-line errors.

Every way such a file can fail to be read becomes one ConfigError (or the subclass the caller
names) that names the file: missing, a folder, unreadable, not UTF-8 (TOML files must be),
not valid TOML, or nested too deeply for the parser (tomllib recurses once per level of
arrays or inline tables, so ``x = [[[[...]]]]`` a hundred thousand levels deep would end in
a RecursionError traceback).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainscale.errors import ConfigError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as a package
    import tomli as tomllib  # type: ignore[no-redef]


def load_toml(
    path: Path | str, what: str, error: type[ConfigError] = ConfigError
) -> dict[str, Any]:
    """The parsed contents of the TOML file at ``path``.

    Args:
        path: the file.
        what: what the file is, for messages ('sweep file', 'cluster file', ...).
        error: the ConfigError subclass to raise.

    Raises:
        ``error``: one line naming ``what`` and ``path``, for a file that is missing, a
            folder, unreadable, not UTF-8, not valid TOML, or nested too deeply.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise error(f"{what} {path} is a directory, not a file") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{what} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}); TOML files must be UTF-8"
        ) from None
    return parse_toml(text, f"{what} {path}", error)


def parse_toml(text: str, where: str, error: type[ConfigError] = ConfigError) -> dict[str, Any]:
    """``text`` parsed as TOML; ``error`` naming ``where`` if it is not valid or too deep."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        reason = " ".join(str(exc).split())  # one line, whatever the parser says
        raise error(f"{where} is not valid TOML: {reason}") from None
    except RecursionError:
        raise error(
            f"{where} is nested too deeply to read (arrays or inline tables inside each "
            "other beyond what the TOML parser can follow); flatten it"
        ) from None

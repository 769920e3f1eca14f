"""The dataset locator: where every dataset is looked for, in one order, with one message.

Search order, the same for every dataset:

1. an explicit directory (``--data-dir``). When one is given it is the only place looked
   at: the dataset is read from it, or refused with one line that names the directory and
   what it should hold. It never falls back to the places below, and nothing is downloaded.
2. ``$TRAINSCALE_DATA_DIR``;
3. the cache, ``cache_dir()/<name>`` (where downloads land);
4. other tools' caches, where the dataset is one they keep (``./data``, ``~/data``,
   ``~/.cache/torchvision``, ``~/.keras/datasets``).

Each place is tried as is and with each of the dataset's named sub-folders (``mnist/``,
``MNIST/raw/``, ...). When nothing is found and the dataset has a download, it is downloaded
into the cache, checksummed, unless downloads are off (``--no-download``).

What counts as "the dataset is here" is the caller's probe: a function of one directory that
returns what it found there (or None) and a note on a near miss (a partial set, a tree in the
wrong shape), which the not-found message shows next to that directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from trainscale.data import cache
from trainscale.errors import DataError

DATA_ENV = "TRAINSCALE_DATA_DIR"

# Other tools' usual places, as given to DatasetPlaces.other_tools: "./x" is relative to the
# working directory at search time, "~/x" to the home directory.
CWD_DATA = "./data"
HOME_DATA = "~/data"
TORCHVISION = "~/.cache/torchvision"
KERAS = "~/.keras/datasets"

T = TypeVar("T")

Probe = Callable[[Path], tuple[T | None, str]]
"""(what the directory holds, or None; a note on a near miss, '' for none)."""


@dataclass(frozen=True)
class DatasetPlaces:
    """Where one dataset is looked for, and how messages speak of it."""

    name: str
    """Our name for it: the cache sub-folder, ``cache_dir()/<name>``."""
    missing: str
    """How a not-found message starts, e.g. 'mnist not found'."""
    expected: str
    """What a folder must hold, for messages, e.g. 'the four IDX files (...)'."""
    folders: tuple[str, ...] = ()
    """Named sub-folders tried under every place, e.g. ('mnist', 'MNIST/raw')."""
    other_tools: tuple[str, ...] = ()
    """Other tools' caches searched last ('./data', '~/.cache/torchvision', ...)."""
    hint: str = ""
    """Another way to give the data, appended to messages (', or give ... with -o file=')."""

    @property
    def cache(self) -> Path:
        """The dataset's folder in the trainscale cache (not created here)."""
        return cache.cache_dir() / self.name


def _tool_root(spec: str) -> Path:
    if spec.startswith("~"):
        return Path(spec).expanduser()
    return Path.cwd() / spec.removeprefix("./")


def _explicit(data_dir: Path | str | None) -> Path | None:
    return None if data_dir is None else Path(data_dir).expanduser()


def roots(places: DatasetPlaces, data_dir: Path | str | None = None) -> list[Path]:
    """The places searched, in order: ``data_dir`` alone when given, else
    ``$TRAINSCALE_DATA_DIR``, the cache and other tools' caches."""
    explicit = _explicit(data_dir)
    if explicit is not None:
        return [explicit]
    env = os.environ.get(DATA_ENV)
    found = [Path(env).expanduser()] if env else []
    return [*found, places.cache, *(_tool_root(spec) for spec in places.other_tools)]


def candidate_dirs(places: DatasetPlaces, data_dir: Path | str | None = None) -> list[Path]:
    """Every directory looked in, in order, without duplicates: each root as is, then with
    each named sub-folder."""
    seen: set[str] = set()
    unique: list[Path] = []
    for root in roots(places, data_dir):
        for directory in (root, *(root / sub for sub in places.folders)):
            key = os.path.abspath(directory)
            if key not in seen:
                seen.add(key)
                unique.append(directory)
    return unique


def search(
    places: DatasetPlaces, probe: Probe[T], data_dir: Path | str | None = None
) -> tuple[T | None, list[str]]:
    """(the first hit, or None; every directory looked at before it, each with its note)."""
    looked: list[str] = []
    for directory in candidate_dirs(places, data_dir):
        hit, note = probe(directory)
        if hit is not None:
            return hit, looked
        looked.append(f"{directory} ({note})" if note else str(directory))
    return None, looked


def _elsewhere(places: DatasetPlaces) -> str:
    others = " and other tools' folders" if places.other_tools else ""
    return f"${DATA_ENV}, the cache ({places.cache}){others}"


def refuse_explicit(places: DatasetPlaces, directory: Path, reason: str) -> DataError:
    """The one-line refusal of an explicit directory that does not hold the dataset."""
    return DataError(
        f"{places.missing} in {directory} (--data-dir): {reason}. Put {places.expected} there"
        f"{places.hint}, or leave out --data-dir to search {_elsewhere(places)}"
    )


def not_found(
    places: DatasetPlaces, looked: list[str], *, off: bool = False, failure: str = ""
) -> DataError:
    """The one-line not-found error of the default search: every place looked at, the
    download failure if any, and where to put the files."""
    disabled = " (download disabled)" if off else ""
    tried = f"; download failed: {failure}" if failure else ""
    return DataError(
        f"{places.missing}{disabled}; looked in: {'; '.join(looked)}{tried}. Put "
        f"{places.expected} in {places.cache}, or in a directory given by --data-dir or "
        f"{DATA_ENV}{places.hint}"
    )


def locate(
    places: DatasetPlaces,
    probe: Probe[T],
    data_dir: Path | str | None = None,
    *,
    download: bool = True,
    fetch: Callable[[Path], T] | None = None,
    on_file: Callable[[Path], T] | None = None,
) -> T:
    """Find a dataset (see the module docstring for the order), downloading it if allowed.

    Args:
        places: where the dataset is looked for and how messages name it.
        probe: what a directory holds (see ``Probe``).
        data_dir: the explicit directory; when given, the only place looked at.
        download: whether ``fetch`` may run when the default search finds nothing.
        fetch: downloads the dataset into the folder it is given (``places.cache``) and
            returns what ``probe`` would; DataError on failure. None: no download exists.
        on_file: what an explicit path that is a file means (the file itself, for
            datasets shipped as one file); None: a file is refused.

    Raises:
        DataError: one line; for an explicit directory it names the directory and what it
            should hold, otherwise it lists every place looked at and any download failure.
    """
    explicit = _explicit(data_dir)
    if explicit is not None:
        if explicit.is_file():
            if on_file is not None:
                return on_file(explicit)
            raise refuse_explicit(places, explicit, "it is a file, not a folder")
        if not explicit.is_dir():
            raise refuse_explicit(places, explicit, "it does not exist")
    hit, looked = search(places, probe, explicit)
    if hit is not None:
        return hit
    if explicit is not None:
        raise refuse_explicit(places, explicit, f"looked in: {'; '.join(looked)}")
    failure = ""
    if fetch is not None and download:
        try:
            return fetch(places.cache)
        except DataError as exc:
            failure = str(exc)
    raise not_found(places, looked, off=fetch is not None and not download, failure=failure)

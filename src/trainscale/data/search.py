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
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from trainscale.data import cache
from trainscale.errors import DataError, DataNotFound

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
    brief: str = ""
    """`expected` in a few words, for the not-found line (default: `expected`)."""

    @property
    def what(self) -> str:
        """What a folder must hold, as short as the not-found line wants it."""
        return self.brief or self.expected

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


SYNTHETIC_HINT = "or --data synthetic (throughput only)"
"""How every not-found line ends: the way to measure without the data."""


def refuse_explicit(places: DatasetPlaces, directory: Path, reason: str) -> DataNotFound:
    """The one-line refusal of an explicit directory that does not hold the dataset."""
    return DataNotFound(
        f"{places.missing} in {directory} (--data-dir): {reason}. Put {places.expected} there"
        f"{places.hint}, or leave out --data-dir to search {DATA_ENV} and the cache, "
        f"{SYNTHETIC_HINT}"
    )


def _places_text(places: DatasetPlaces) -> str:
    """The roots searched, short: $TRAINSCALE_DATA_DIR's value when set, the cache, other
    tools' folders as users write them ('./data', '~/.cache/torchvision')."""
    env = os.environ.get(DATA_ENV)
    shown = [f"{DATA_ENV}={env}"] if env else []
    shown += [str(places.cache), *places.other_tools]
    return ", ".join(shown)


_NETWORK_FAILURE = re.compile(
    r"could not download (?P<url>\S+) \((?P<reason>.*?)\); check the network"
)


def short_failure(failure: str) -> str:
    """A download failure in a few words: an unreachable network is its reason ('Name or
    service not known'), once, not every mirror's URL and advice; a server's refusal keeps
    its URL ('https://...: HTTP Error 404: Not Found'); any other failure (a checksum
    mismatch, a damaged archive) is kept whole, as it names the file to look at."""
    first = failure.split(" | ")[0]
    match = _NETWORK_FAILURE.search(first)
    if match is None:
        return first
    reason = re.sub(r"^\[Errno [^\]]*\]\s*", "", match.group("reason"))
    return f"{match.group('url')}: {reason}" if reason.startswith("HTTP") else reason


def not_found(
    places: DatasetPlaces, looked: list[str], *, off: bool = False, failure: str = ""
) -> DataNotFound:
    """The one-line not-found error of the default search: the places searched (each also
    with the dataset's sub-folders), near misses, the download failure if any, and the three
    ways on: --data-dir, TRAINSCALE_DATA_DIR, --data synthetic."""
    disabled = " (download disabled)" if off else ""
    near = [entry for entry in looked if " (" in entry and entry.endswith(")")]
    near_text = f"; near miss: {'; '.join(near)}" if near else ""
    tried = f"; download failed: {short_failure(failure)}" if failure else ""
    return DataNotFound(
        f"{places.missing}{disabled} in {_places_text(places)}{near_text}{tried}. Put "
        f"{places.what} in --data-dir DIR or {DATA_ENV}{places.hint}, {SYNTHETIC_HINT}"
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

"""The one dataset locator (trainscale.data.search): its order, the explicit directory that is
used or refused, sub-folders, partial-set notes and downloads; and the tweet file, which
finds its way through it too.

HOME, the cache, the data-dir variable and the working directory point into tmp_path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.data import search
from trainscale.data.tensors import DataRequest
from trainscale.errors import ConfigError, DataError
from trainscale.workloads import tweets_text
from trainscale.workloads.text_common import parse_options
from trainscale.workloads.tweets_text import DEFAULTS, find_tweets

PLACES = search.DatasetPlaces(
    name="toy",
    missing="toy not found",
    expected="toy.txt",
    folders=("toy", "Toy/raw"),
    other_tools=(search.CWD_DATA, search.TORCHVISION),
    hint=", or give it with -o file=PATH",
)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("home", "cache", "cwd"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path


def probe(directory: Path) -> tuple[Path | None, str]:
    """A toy dataset: toy.txt; a lone toy.part is a near miss."""
    if (directory / "toy.txt").is_file():
        return directory, ""
    return None, "has toy.part only" if (directory / "toy.part").is_file() else ""


def put(directory: Path, name: str = "toy.txt") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text("x")
    return directory


def test_order_env_then_cache_then_other_tools(env: Path, monkeypatch) -> None:
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(env / "envdir"))
    assert search.roots(PLACES) == [
        env / "envdir",
        env / "cache" / "toy",
        env / "cwd" / "data",
        env / "home" / ".cache" / "torchvision",
    ]
    assert search.candidate_dirs(PLACES)[:6] == [
        env / "envdir",
        env / "envdir" / "toy",
        env / "envdir" / "Toy" / "raw",
        env / "cache" / "toy",
        env / "cache" / "toy" / "toy",
        env / "cache" / "toy" / "Toy" / "raw",
    ]
    torchvision = put(env / "home" / ".cache" / "torchvision" / "Toy" / "raw")
    assert search.locate(PLACES, probe) == torchvision
    cached = put(env / "cache" / "toy")
    assert search.locate(PLACES, probe) == cached
    from_env = put(env / "envdir" / "toy")
    assert search.locate(PLACES, probe) == from_env


def test_explicit_dir_is_used(env: Path, monkeypatch) -> None:
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(put(env / "envdir")))
    assert search.roots(PLACES, env / "arg") == [env / "arg"]
    target = put(env / "arg" / "Toy" / "raw")
    assert search.locate(PLACES, probe, env / "arg") == target


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda d: None, "it does not exist"),
        (lambda d: d.mkdir(), "looked in: {d}; {d}/toy; {d}/Toy/raw. "),
        (lambda d: put(d / "toy", "toy.part"), "; {d}/toy (has toy.part only); "),
        (lambda d: d.write_text("not a folder"), "it is a file, not a folder"),
    ],
    ids=["missing", "empty", "partial", "file"],
)
def test_explicit_dir_is_refused_never_falls_back(env: Path, monkeypatch, make, reason) -> None:
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(put(env / "envdir")))
    put(env / "cache" / "toy")
    explicit = env / "arg"
    make(explicit)
    fetched = []
    with pytest.raises(DataError) as info:
        search.locate(PLACES, probe, explicit, fetch=fetched.append)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"toy not found in {explicit} (--data-dir): ")
    assert reason.format(d=explicit) in message
    assert "Put toy.txt there, or give it with -o file=PATH" in message
    assert "or leave out --data-dir to search TRAINSCALE_DATA_DIR and the cache" in message
    assert message.endswith(", or --data synthetic (throughput only)")
    assert str(env / "envdir") not in message
    assert fetched == []  # an explicit directory is never filled by a download


def test_partial_note_and_everything_listed(env: Path, monkeypatch) -> None:
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(env / "envdir"))
    put(env / "envdir" / "toy", "toy.part")
    with pytest.raises(DataError) as info:
        search.locate(PLACES, probe, download=False, fetch=lambda target: target)
    message = str(info.value)
    assert "\n" not in message
    # Every root, once (each is also searched with the dataset's sub-folders), the near miss
    # with its note, and the three ways on.
    assert message.startswith(
        f"toy not found (download disabled) in TRAINSCALE_DATA_DIR={env / 'envdir'}, "
        f"{env / 'cache' / 'toy'}, ./data, ~/.cache/torchvision; "
        f"near miss: {env / 'envdir' / 'toy'} (has toy.part only). "
    )
    assert message.endswith(
        "Put toy.txt in --data-dir DIR or TRAINSCALE_DATA_DIR, or give it with -o file=PATH, "
        "or --data synthetic (throughput only)"
    )


def test_not_found_is_one_short_line(env: Path) -> None:
    """A failed download over three mirrors is one reason, not three URLs and advice each."""
    failure = " | ".join(
        f"could not download https://mirror{i}.example/toy.gz ([Errno -2] Name or service not "
        f"known); check the network, or fetch the file by hand into {env / 'cache' / 'toy'}"
        for i in range(3)
    )

    def failing(target: Path) -> Path:
        raise DataError(failure)

    with pytest.raises(DataError) as info:
        search.locate(PLACES, probe, fetch=failing)
    message = str(info.value)
    assert "; download failed: Name or service not known. Put toy.txt" in message
    assert "mirror" not in message and len(message) < 300
    assert "--data-dir DIR" in message and "TRAINSCALE_DATA_DIR" in message
    assert "--data synthetic" in message


def test_download_into_the_cache_only_when_allowed(env: Path) -> None:
    def fetch(target: Path) -> Path:
        return put(target)

    with pytest.raises(DataError) as info:
        search.locate(PLACES, probe, download=False, fetch=fetch)
    assert "(download disabled)" in str(info.value)
    assert not (env / "cache" / "toy").exists()
    assert search.locate(PLACES, probe, fetch=fetch) == env / "cache" / "toy"

    def failing(target: Path) -> Path:
        raise DataError("mirror said 404")

    (env / "cache" / "toy" / "toy.txt").unlink()
    with pytest.raises(DataError) as info:
        search.locate(PLACES, probe, fetch=failing)
    assert "; download failed: mirror said 404. Put toy.txt" in str(info.value)
    # Without a download at all, no "(download disabled)" is claimed.
    with pytest.raises(DataError) as info:
        search.locate(PLACES, probe, download=False)
    assert str(info.value).startswith("toy not found in ")


def test_explicit_file_for_single_file_datasets(env: Path) -> None:
    file = env / "toy.txt"
    file.write_text("x")
    assert search.locate(PLACES, probe, file, on_file=lambda path: path) == file


# --- tweets.csv ------------------------------------------------------------------------------


def test_tweets_search_path_and_explicit_dir(env: Path, monkeypatch) -> None:
    opts = parse_options({}, **DEFAULTS)
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(env / "envdir"))
    assert [d / "tweets.csv" for d in search.candidate_dirs(tweets_text.PLACES)] == [
        env / "envdir" / "tweets.csv",
        env / "envdir" / "tweets" / "tweets.csv",
        env / "cache" / "tweets" / "tweets.csv",
        env / "cache" / "tweets" / "tweets" / "tweets.csv",
    ]
    cached = put(env / "cache" / "tweets", "tweets.csv") / "tweets.csv"
    assert find_tweets(opts, DataRequest()) == cached
    from_env = put(env / "envdir" / "tweets", "tweets.csv") / "tweets.csv"
    assert find_tweets(opts, DataRequest()) == from_env
    mine = put(env / "mine", "tweets.csv") / "tweets.csv"
    assert find_tweets(opts, DataRequest(data_dir=env / "mine")) == mine
    assert find_tweets(opts, DataRequest(data_dir=mine)) == mine  # the file itself
    (env / "empty").mkdir()
    with pytest.raises(DataError) as info:
        find_tweets(opts, DataRequest(data_dir=env / "empty"))
    message = str(info.value)
    assert message.startswith(f"no tweet file found in {env / 'empty'} (--data-dir)")
    assert "-o file=PATH" in message and str(env / "envdir") not in message
    # A file and a folder: one of them would be ignored without a word.
    given = parse_options({"file": str(mine)}, **DEFAULTS)
    with pytest.raises(ConfigError, match="both say where the data is; give one"):
        find_tweets(given, DataRequest(data_dir=env / "mine"))
    assert find_tweets(given, DataRequest()) == mine

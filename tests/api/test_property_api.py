"""Property: whatever keywords a caller passes, the API answers with one of its documented
errors (docs/python-api.md, "Errors") on one line, or gets past its checks; never another
exception, and no run is left `running` in the store.

Hypothesis draws keyword sets for every function from its own valid names (read from the
ConfigError an unknown keyword raises), a few misspelt ones, and hostile values of every
type: huge and negative numbers, NaN, empty and odd strings, None, bytes, lists, dicts,
paths and objects. The functions that train, measure or read are replaced by stand-ins that
stop the call once its checks passed, so an example costs milliseconds and no worker starts.
"""

from __future__ import annotations

import functools
import math
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import trainscale
from trainscale.api import calls, machine, questions, store_calls
from trainscale.errors import ConfigError, TrainscaleError
from trainscale.probing import run as probing

from tests.helpers.fuzz import fuzz_settings

FUZZ = fuzz_settings(40)

POSITIONAL: dict[str, tuple[Any, ...]] = {
    "run": ("mnist-cnn",),
    "bench": (),
    "sweep": ("cpu-parallel",),
    "compare": ("a", "b"),
    "runs": (),
    "report": (),
    "recommend": ("mnist-cnn",),
    "simulate": ("mnist-cnn",),
    "emulate": ("mnist-cnn",),
    "predict_time_to_accuracy": ("mnist-cnn",),
    "probe": (),
    "probes": (),
    "env": (),
    "import_runs": ("other.db",),
    "delete_runs": (),
}
"""What each function is given by position (report's `out` is required: it is drawn too)."""
TAKEN_BY_POSITION = {
    "run": {"workload"},
    "sweep": {"spec_or_recipe"},
    "compare": {"a", "b"},
    "recommend": {"workload"},
    "import_runs": {"source"},
}

# No '/', '\\' or '.': a random path must stay inside the test's working directory.
SAFE_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/\\.\x00"),
    max_size=10,
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**13), max_value=10**13),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "0", "-1", "nan", "auto", "synthetic", "bf16", "compact", "a\nb"]),
    SAFE_TEXT,
    st.binary(max_size=4),
    st.just(object()),
    st.builds(Path, st.sampled_from(["p", "", "nope-dir"])),
)
VALUES = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=3),
    st.dictionaries(SAFE_TEXT, SCALARS, max_size=2),
    st.tuples(SCALARS, SCALARS),
)
MISSPELT = ["wokers", "step", "Workers", "", "no_eval", "__class__", "stor"]


class _Reached(Exception):
    """The call got past its checks to the function that does the work."""


def _stand_in(function: Any) -> Any:
    @functools.wraps(function)  # the same signature and annotations: the keywords' types
    def reached(*args: Any, **kwargs: Any) -> Any:
        raise _Reached(function.__name__)

    return reached


@pytest.fixture
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every function through which a call would start, measure or read work stops it."""
    for module, name in (
        (calls, "start_run"),
        (calls, "run_bench"),
        (calls, "run_sweep"),
        (calls, "compare_runs"),
        (calls, "list_runs"),
        (calls, "build_report"),
        (questions, "search_recommendation"),
        (questions, "simulate_scaling"),
        (questions, "run_emulation"),
        (questions, "time_to_accuracy"),
        (probing, "execute_probe"),  # after the probe's plan, which checks every value
        (machine, "list_probes"),
        (machine, "describe_machine"),
        (store_calls, "RunStore"),
        (store_calls, "open_for_reading"),
    ):
        monkeypatch.setattr(module, name, _stand_in(getattr(module, name)))


def _valid_keywords(function: str) -> list[str]:
    """The keywords `function` takes, as its ConfigError for an unknown one lists them."""
    extra = {"out": "r"} if function == "report" else {}
    with pytest.raises(ConfigError) as info:
        getattr(trainscale, function)(*POSITIONAL[function], zz_not_an_option=1, **extra)
    listed = re.search(r"valid options: (.*)$", str(info.value))
    assert listed is not None, str(info.value)
    names = [name.strip() for name in listed.group(1).split(",")]
    return sorted(set(names) - TAKEN_BY_POSITION.get(function, set()))


def _running_runs(store: Path) -> list[str]:
    if not store.is_file():
        return []
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        try:
            rows = db.execute("SELECT run_id FROM runs WHERE status = 'running'").fetchall()
        except sqlite3.DatabaseError:
            return []
    return [row[0] for row in rows]


def _shown(keywords: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in keywords.items())


@pytest.mark.parametrize("function", sorted(POSITIONAL))
def test_any_keyword_values_end_in_a_documented_one_line_error_or_pass_the_checks(
    function: str, tmp_path: Path, nothing_starts: None
) -> None:
    names = _valid_keywords(function)
    store = tmp_path / "store.db"

    @FUZZ
    @given(
        chosen=st.dictionaries(st.sampled_from(names), VALUES, max_size=4),
        misspelt=st.dictionaries(st.sampled_from(MISSPELT), VALUES, max_size=1),
    )
    def check(chosen: dict[str, Any], misspelt: dict[str, Any]) -> None:
        keywords = {"store": store, **chosen, **misspelt}
        if function == "report":
            keywords.setdefault("out", "report-dir")
        try:
            getattr(trainscale, function)(*POSITIONAL[function], **keywords)
        except _Reached:
            pass
        except TrainscaleError as error:
            message = str(error)
            assert message.strip(), (function, _shown(keywords))
            assert len(message.splitlines()) == 1, (function, _shown(keywords), message)
        # Anything else (TypeError, ValueError, OverflowError, SystemExit) fails the test,
        # with the keywords hypothesis found.
        assert _running_runs(store) == [], (function, _shown(keywords))

    check()


def test_nan_and_huge_numbers_are_refused_as_values_not_crashes(
    tmp_path: Path, nothing_starts: None
) -> None:
    # Sharp edges the property draws only by chance; each one line or past the checks.
    for keywords in (
        {"steps": 10**30},
        {"lr": math.nan},
        {"lr": math.inf},
        {"workers": -(10**18)},
        {"timeout_s": -math.inf},
        {"global_batch_size": 2**63},
    ):
        try:
            trainscale.run("mnist-cnn", store=tmp_path / "s.db", **keywords)
        except _Reached:
            continue
        except TrainscaleError as error:
            assert len(str(error).splitlines()) == 1, (keywords, str(error))

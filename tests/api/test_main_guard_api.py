"""A script calls the API under `if __name__ == "__main__":`: spawned workers import the
script again, so a call at its top level is refused in one line, before anything starts."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from trainscale.api.main_guard import check_main_guard
from trainscale.errors import ConfigError
from trainscale.results.store import RunStore

RULE = 'trainscale.run() under `if __name__ == "__main__":`'


def _call_as_main(
    monkeypatch: pytest.MonkeyPatch, script: Path, text: str, name: str = "__main__"
) -> None:
    """Run `text` as the top-level code of a main module with `script`'s file, as
    `python script.py` (name '__main__') or a spawned worker's re-import ('__mp_main__')
    would; `check()` in it is the API's check."""
    script.write_text(text)
    main = types.ModuleType(name)
    main.__file__ = str(script)
    main.__spec__ = None
    main.__dict__["check"] = lambda: check_main_guard("run")
    monkeypatch.setitem(sys.modules, "__main__", main)
    exec(compile(text, str(script), "exec"), main.__dict__)


def test_a_call_at_the_top_of_a_script_is_one_config_error_naming_the_line(tmp_path, monkeypatch):
    with pytest.raises(ConfigError) as caught:
        _call_as_main(monkeypatch, tmp_path / "train.py", "import os\ncheck()\n")
    assert str(caught.value).startswith("train.py line 2: ")
    assert RULE in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "text",
    [
        'if __name__ == "__main__":\n    check()\n',
        "def main():\n    check()\n\nif '__main__' == __name__:\n    x = 1\n    main()\n",
        'if __name__ != "__main__":\n    pass\nelse:\n    check()\n',
    ],
    ids=["guarded", "guarded-main-function", "guarded-else"],
)
def test_a_guarded_call_passes(tmp_path, monkeypatch, text):
    _call_as_main(monkeypatch, tmp_path / "train.py", text)


def test_a_worker_re_importing_the_script_exits_with_the_one_line(tmp_path, monkeypatch):
    with pytest.raises(SystemExit) as caught:
        _call_as_main(monkeypatch, tmp_path / "train.py", "check()\n", name="__mp_main__")
    assert str(caught.value.code).startswith("trainscale: error: train.py line 1: ")


def test_a_notebook_or_a_function_call_is_not_checked():
    check_main_guard("run")  # from a test function: no top-level code of a script


SCRIPT = """import trainscale
trainscale.run("mnist-cnn", data="synthetic", steps=6, evaluate=False)
"""


def test_a_script_without_the_guard_fails_in_one_line_and_stores_nothing(tmp_path):
    # End to end (about 4 s; 12 s and two failed runs stored without the check).
    (tmp_path / "train.py").write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) <= 10, done.stderr
    assert lines[-1].startswith("trainscale.errors.ConfigError: train.py line 2: ")
    assert RULE in lines[-1]
    store = tmp_path / "trainscale.db"
    if store.exists():
        with RunStore(store) as runs:
            assert runs.list_runs() == []

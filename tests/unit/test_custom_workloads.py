"""Custom workloads: references, loading, checks, the array helper and errors in user code."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import trainscale.workloads as workloads
from trainscale.data.tensors import DataRequest
from trainscale.errors import ConfigError, DataError, WorkloadError
from trainscale.workloads import Recipe, array_workload, get_workload, workload_source
from trainscale.workloads.custom import (
    file_changed,
    is_reference,
    load_reference,
    parse_reference,
)

from tests.helpers.custom_workloads import (
    BROKEN,
    EXAMPLE,
    EXAMPLE_REF,
    fresh_custom_workloads,
    tiny_workload,
)

pytestmark = pytest.mark.usefixtures("fresh_custom_workloads")
__all__ = ["fresh_custom_workloads"]

RECIPE = Recipe(optimizer="adam", lr=1e-3, batch_size=8, epochs=1)


def test_references_are_told_from_names():
    assert is_reference("my_workload.py") and is_reference("pkg.mod:make")
    assert not is_reference("mnist-cnn")


def test_a_file_reference_loads_registers_its_name_and_keeps_its_source(tmp_path):
    path = tiny_workload(tmp_path, "tiny-a")
    spec = get_workload(f"{path}:make_workload")
    assert spec.name == "tiny-a"
    # The name answers from now on, and the source is the canonical, absolute reference.
    assert get_workload("tiny-a") is spec
    assert workload_source("tiny-a") == f"{path.resolve()}:make_workload"
    assert workload_source("mnist-cnn") is None


def _edit(path, name):
    """Rewrite the workload file under another workload name, a second later (as an editor
    would: the file's time and size both change)."""
    text = path.read_text().replace('"tiny-e"', f'"{name}"')
    path.write_text(text)
    status = path.stat()
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns + 10**9))


def test_an_edited_file_is_imported_again_and_an_unchanged_one_is_not(tmp_path):
    reference = parse_reference(f"{tiny_workload(tmp_path, 'tiny-e')}:make_workload")
    first = load_reference(reference)
    assert first.name == "tiny-e" and not file_changed(reference)
    # The model builder is the file's own lambda: the module it lives in is the file's.
    module = sys.modules[first.models["pytorch"].__wrapped__.__module__]
    assert module.__file__ == reference.target
    again = load_reference(reference).models["pytorch"].__wrapped__
    assert sys.modules[again.__module__] is module  # unchanged: not imported again
    _edit(Path(reference.target), "tiny-e-edited")
    assert file_changed(reference)
    assert load_reference(reference).name == "tiny-e-edited"  # what the workers will load
    assert not file_changed(reference)


def test_a_workload_looked_up_again_after_its_file_was_edited_is_the_new_version(tmp_path):
    path = tiny_workload(tmp_path, "tiny-e")
    assert get_workload(f"{path}:make_workload").name == "tiny-e"
    assert get_workload(f"{path}:make_workload") is get_workload(f"{path}:make_workload")
    _edit(path, "tiny-e-edited")
    assert get_workload(f"{path}:make_workload").name == "tiny-e-edited"


def test_a_file_without_attribute_means_make_workload_and_relative_paths_resolve(
    tmp_path, monkeypatch
):
    tiny_workload(tmp_path, "tiny-b")
    monkeypatch.chdir(tmp_path)
    assert get_workload("tiny_b_workload.py").name == "tiny-b"
    assert (
        workload_source("tiny-b") == f"{(tmp_path / 'tiny_b_workload.py').resolve()}:make_workload"
    )


def test_a_module_reference_imports_from_the_working_directory(tmp_path, monkeypatch):
    package = tmp_path / "userpkg_for_test"
    package.mkdir()
    (package / "__init__.py").write_text("")
    tiny_workload(package, "tiny-mod").rename(package / "wl.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    spec = get_workload("userpkg_for_test.wl:make_workload")
    assert spec.name == "tiny-mod"
    # The workers import it relative to the same directory, wherever they start.
    source = workload_source("tiny-mod")
    assert source == f"userpkg_for_test.wl:make_workload@{tmp_path}"
    assert parse_reference(source).search_dir == str(tmp_path)


def test_an_attribute_holding_a_spec_is_used_as_it_is(tmp_path):
    path = tiny_workload(tmp_path, "tiny-c")
    path.write_text(path.read_text() + "\nSPEC = make_workload()\n")
    assert get_workload(f"{path}:SPEC").name == "tiny-c"


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_each_broken_file_is_one_line_naming_the_file(tmp_path, kind):
    text, expected = BROKEN[kind]
    (tmp_path / "broken.py").write_text(text)
    with pytest.raises(WorkloadError) as caught:
        get_workload(f"{tmp_path / 'broken.py'}:make_workload")
    message = str(caught.value)
    assert message.startswith(expected) and "\n" not in message


def test_missing_files_modules_and_bad_references(tmp_path):
    with pytest.raises(WorkloadError, match=r"^workload file .*nowhere.py not found$"):
        get_workload(str(tmp_path / "nowhere.py"))
    with pytest.raises(WorkloadError, match="no module named 'no_such_pkg_x.mod'"):
        get_workload("no_such_pkg_x.mod:make")
    with pytest.raises(WorkloadError, match="'not-a-name' is not a Python name"):
        get_workload(f"{EXAMPLE}:not-a-name")


def test_a_custom_workload_may_not_take_a_registered_name(tmp_path):
    path = tiny_workload(tmp_path, "mnist-cnn")
    with pytest.raises(WorkloadError, match="defines workload 'mnist-cnn', the name of a"):
        get_workload(str(path))


def test_two_files_may_not_define_one_name(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    get_workload(str(tiny_workload(tmp_path / "a", "twin")))
    with pytest.raises(WorkloadError, match="'twin', already loaded from twin_workload.py"):
        get_workload(str(tiny_workload(tmp_path / "b", "twin")))


def _recipe(change: str) -> str:
    """A `dataclasses.replace` argument giving the workload its recipe with `change`."""
    return f"recipe=dataclasses.replace(make_workload().recipe, {change})"


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            "name='has space'",
            "its name 'has space' must be letters, digits, '.', '_' or '-' (no spaces)",
        ),
        ("models={'tensorflow': lambda meta: None}", "it has no 'pytorch' model builder"),
        (
            "models={**make_workload().models, 'flax': lambda meta: None}",
            "its model builder 'flax' names no framework (pytorch, tensorflow, jax)",
        ),
        ("target_accuracy=1.5", "its target_accuracy 1.5 is not in (0, 1]"),
        ("target_accuracy='0.5'", "its target_accuracy '0.5' is not in (0, 1]"),
        ("target_accuracy=None", "its target_accuracy None is not in (0, 1]"),
        ("synthetic_size=None", "it declares no synthetic_size"),
        # The recipe, by the rules of the flags it stands in for (a traceback, a run
        # stored failed, or a run of 0 epochs stored completed before).
        (_recipe("lr='0.1'"), "its recipe's lr '0.1' is not a number in (0, inf)"),
        (_recipe("lr=-1.0"), "its recipe's lr -1.0 is not a number in (0, inf)"),
        (_recipe("batch_size=0"), "its recipe's batch_size 0 is not a whole number >= 1"),
        (_recipe("batch_size='32'"), "its recipe's batch_size '32' is not a whole number >= 1"),
        (_recipe("epochs=0"), "its recipe's epochs 0 is not a number in (0, 1e+06]"),
        (
            _recipe("optimizer='lamb'"),
            "its recipe's optimizer 'lamb' is not one of sgd, adam, adamw",
        ),
        (
            _recipe("schedule='poly'"),
            "its recipe's schedule 'poly' is not one of constant, onecycle, cosine, step",
        ),
        (
            _recipe("label_smoothing=2.0"),
            "its recipe's label_smoothing 2.0 is not a number in [0, 1)",
        ),
        (
            _recipe("warmup_fraction=1.5"),
            "its recipe's warmup_fraction 1.5 is not a number in [0, 1)",
        ),
    ],
)
def test_an_unusable_spec_says_what_is_wrong(tmp_path, change, problem):
    path = tiny_workload(tmp_path, "tiny-d")
    path.write_text(
        path.read_text()
        + "\nimport dataclasses\ndef bad():\n"
        + f"    return dataclasses.replace(make_workload(), {change})\n"
    )
    with pytest.raises(WorkloadError) as caught:
        get_workload(f"{path}:bad")
    assert str(caught.value) == f"tiny_d_workload.py:bad: {problem}"


def test_errors_of_the_users_functions_name_the_function_and_the_line(tmp_path):
    path = tiny_workload(tmp_path, "tiny-e")
    path.write_text(
        path.read_text() + "\nimport dataclasses\nfrom trainscale.workloads import PYTORCH\n"
        "def broken_model(meta):\n    raise RuntimeError('no such layer')\n"
        "def bad():\n"
        "    return dataclasses.replace(make_workload(), models={PYTORCH: broken_model})\n"
    )
    spec = get_workload(f"{path}:bad")
    with pytest.raises(WorkloadError) as caught:
        spec.build_model({"num_classes": 2})
    line = path.read_text().splitlines().index("    raise RuntimeError('no such layer')") + 1
    assert str(caught.value) == (
        "workload tiny_e_workload.py:bad: building the model raised RuntimeError: no such layer "
        f"(tiny_e_workload.py line {line}, in broken_model)"
    )


def test_the_unknown_name_error_mentions_custom_references():
    with pytest.raises(ConfigError, match=r"or your own: FILE\.py:ATTR or MODULE:ATTR$"):
        get_workload("no-such-workload")


def test_the_example_is_a_complete_workload():
    spec = get_workload(EXAMPLE_REF)
    real = spec.load_real(DataRequest())
    synthetic = spec.make_synthetic(DataRequest(seed=3))
    assert spec.name == "spiral-mlp" and real.kind == "real"
    assert (real.num_train, real.num_test) == (
        spec.synthetic_size.num_train,
        spec.synthetic_size.num_test,
    )
    assert synthetic.train_x.shape == real.train_x.shape
    assert (
        synthetic.meta
        == real.meta
        == {
            "num_classes": 5,
            "input_shape": (2,),
            "num_features": 2,
        }
    )
    model = spec.build_model(real.meta)
    assert model(real.test_x[:3]).shape == (3, 5)


# -- array_workload ------------------------------------------------------------------------


def _arrays(n: int = 40, features: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, features)), rng.integers(0, 4, n)


def test_array_workload_makes_float32_inputs_int64_labels_and_meta():
    x, y = _arrays()
    spec = array_workload(
        "arr",
        model=lambda meta: torch.nn.Linear(meta["num_features"], meta["num_classes"]),
        train=(x[:30], y[:30]),
        test=(torch.from_numpy(x[30:]), torch.from_numpy(y[30:])),
        recipe=RECIPE,
        target_accuracy=0.5,
    )
    data = spec.load_real(DataRequest(max_train=10))
    assert data.train_x.dtype == torch.float32 and data.train_y.dtype == torch.int64
    assert data.num_train == 10 and data.num_test == 10
    assert torch.equal(data.train_y, torch.from_numpy(y[:10]))
    assert data.meta == {"num_classes": int(y.max()) + 1, "input_shape": (3,), "num_features": 3}
    # The record says where the arrays came from: the file that built the spec.
    assert data.source == str(Path(__file__).resolve())


def test_array_workload_with_token_ids_keeps_them_integer_and_sizes_the_vocabulary():
    rng = np.random.default_rng(1)
    tokens, labels = rng.integers(0, 50, (20, 7)), rng.integers(0, 2, 20)
    spec = array_workload(
        "tok",
        model=lambda meta: torch.nn.EmbeddingBag(meta["vocab_size"], 2),
        train=(tokens, labels),
        test=(tokens[:5], labels[:5]),
        recipe=RECIPE,
        target_accuracy=0.5,
    )
    real = spec.load_real(DataRequest())
    synthetic = spec.make_synthetic(DataRequest(seed=1))
    assert real.train_x.dtype == synthetic.train_x.dtype == torch.int64
    assert real.meta["vocab_size"] == int(tokens.max()) + 1
    assert int(synthetic.train_x.max()) < real.meta["vocab_size"]
    assert synthetic.train_x.shape == real.train_x.shape


@pytest.mark.parametrize(
    ("train", "test", "problem"),
    [
        ((np.zeros((4, 2)), np.zeros(3, dtype=int)), None, "must be (N, ...) and (N,)"),
        ((np.zeros((4, 2)), np.zeros(4)), None, "train labels must be integers, not float64"),
        ((np.zeros((4, 2)), np.arange(4)), (np.zeros((2, 3)), np.arange(2)), "differ"),
        ((np.zeros((4, 2)), np.arange(4) - 1), None, "train labels must lie in 0..2 (found -1..2)"),
        ((np.zeros((0, 2)), np.zeros(0, dtype=int)), None, "the train set is empty"),
    ],
)
def test_array_workload_refuses_arrays_that_do_not_fit(train, test, problem):
    with pytest.raises(DataError) as caught:
        array_workload(
            "bad",
            model=lambda meta: None,
            train=train,
            test=test or train,
            recipe=RECIPE,
            target_accuracy=0.5,
        )
    assert problem in str(caught.value) and str(caught.value).startswith("workload bad: ")


def test_entry_point_workloads_load_and_are_checked(tmp_path, monkeypatch):
    package = tmp_path / "tswl_entry"
    package.mkdir()
    tiny_workload(package, "from-entry").rename(package / "__init__.py")
    dist = tmp_path / "tswl_entry-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tswl-entry\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[trainscale.workloads]\nfrom-entry = tswl_entry:make_workload\n"
        "misnamed = tswl_entry:make_workload\nmnist-cnn = tswl_entry:make_workload\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = dict(workloads.registry._REGISTRY)
    monkeypatch.setattr(workloads.registry, "_REGISTRY", registry)
    monkeypatch.setattr(workloads, "_loaded", False)
    workloads._ensure_loaded()
    assert "from-entry" in workloads.workload_names()
    spec = get_workload("from-entry")
    assert spec.name == "from-entry" and workload_source("from-entry") is None
    assert not workloads.is_builtin("from-entry") and workloads.is_builtin("mnist-cnn")
    # A built-in name is not taken over; a spec under another name is refused.
    assert get_workload("mnist-cnn").description.startswith("Classic MNIST CNN")
    with pytest.raises(WorkloadError, match="returned a workload named 'from-entry'"):
        get_workload("misnamed")


def test_every_built_in_recipe_follows_the_rules_a_custom_one_is_held_to():
    from trainscale.workloads import builtin_workload_names
    from trainscale.workloads.recipe_checks import recipe_problems

    for name in builtin_workload_names():
        assert recipe_problems(get_workload(name).recipe) == [], name


def test_the_simulators_layout_of_an_edited_file_is_built_again(tmp_path):
    from trainscale.simulator.setup import cached_layout

    reference = f"{tiny_workload(tmp_path, 'tiny-e')}:make_workload"
    first = cached_layout(reference, None)
    assert cached_layout(reference, None) is first  # built once per version of the file
    _edit(Path(reference.rpartition(":")[0]), "tiny-e-edited")
    assert cached_layout(reference, None) is not first

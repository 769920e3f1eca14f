"""A custom workload's recipe checked by the rules its flags follow, so that a mistake in a
workload file is one line before anything starts (a recipe is what a run trains with when no
flag is given), not a traceback or a run stored failed."""

from __future__ import annotations

import math
from typing import Any

from trainscale.config.limits import MAX_EPOCHS
from trainscale.config.options import OPTIMIZERS, SCHEDULES
from trainscale.workloads.base import Recipe


def recipe_problems(recipe: Recipe) -> list[str]:
    """What is wrong with a workload's recipe, by the rules its flags follow (a recipe
    is what a run trains with when no flag is given): [] when nothing is."""
    problems = []
    for name, choices in (("optimizer", OPTIMIZERS), ("schedule", SCHEDULES)):
        if getattr(recipe, name) not in choices:
            problems.append(
                f"its recipe's {name} {getattr(recipe, name)!r} is not one of {', '.join(choices)}"
            )
    batch = recipe.batch_size
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        problems.append(f"its recipe's batch_size {batch!r} is not a whole number >= 1")
    ranges = {  # field: (low, high, low excluded, high excluded)
        "lr": (0.0, math.inf, True, True),
        "epochs": (0.0, MAX_EPOCHS, True, False),
        "momentum": (0.0, 1.0, False, False),
        "weight_decay": (0.0, math.inf, False, True),
        "label_smoothing": (0.0, 1.0, False, True),
        "warmup_fraction": (0.0, 1.0, False, True),
    }
    for name, (low, high, low_open, high_open) in ranges.items():
        value = getattr(recipe, name)
        if not number_in(value, low, high, low_open=low_open, high_open=high_open):
            interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
            problems.append(f"its recipe's {name} {value!r} is not a number in {interval}")
    if not isinstance(recipe.nesterov, bool):
        problems.append(f"its recipe's nesterov {recipe.nesterov!r} is not True or False")
    return problems


def number_in(
    value: Any, low: float, high: float, *, low_open: bool = False, high_open: bool = False
) -> bool:
    """Whether `value` is a real number (not a bool, not a string) within the bounds."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return False
    above = value > low if low_open else value >= low
    below = value < high if high_open else value <= high
    return above and below

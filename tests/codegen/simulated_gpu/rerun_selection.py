"""A pytest plugin of the suite's second run on the simulated GPU (`-p rerun_selection`): it deselects the tests
that would repeat the first run there unchanged, those parametrized to run on the CPU (an argument `'cpu'`: their
kernels never take the GPU path)."""

from __future__ import annotations

import pytest


def runs_on_the_cpu(item: pytest.Item) -> bool:
    """Whether `item` is a parametrized test one of whose arguments is the target `'cpu'`."""
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(isinstance(value, str) and value == "cpu" for value in callspec.params.values())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the tests that `runs_on_the_cpu`."""
    kept, deselected = [], []
    for item in items:
        (deselected if runs_on_the_cpu(item) else kept).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept

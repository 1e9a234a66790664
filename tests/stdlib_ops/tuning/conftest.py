"""Fixtures of the tuning tests: a private compilation cache (where the records live) per test, the CPU matmul
template's space cut down to two points, and a counting executor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tuning_cases import SMALL_SPACE, CountingExecutor

from stdlib_ops.templates import space as spaces
from stdlib_ops.templates.kernels.matmul_cpu import matmul_cpu
from stdlib_ops.templates.space import TuningSpace, template_ref
from stdlib_ops.tuning.records import RECORDS_FILE


@pytest.fixture
def records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The records file of a fresh compilation cache directory, used by this test and the processes it starts."""
    monkeypatch.setenv("HIDET_LANG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / RECORDS_FILE


@pytest.fixture
def small_space(monkeypatch: pytest.MonkeyPatch) -> TuningSpace:
    """`matmul_cpu`'s tuning space cut down to `SMALL_SPACE` for this test."""
    monkeypatch.setitem(spaces.SPACES, template_ref(matmul_cpu), SMALL_SPACE)
    return SMALL_SPACE


@pytest.fixture
def executor() -> Iterator[CountingExecutor]:
    """A counting thread pool, shut down after the test."""
    with CountingExecutor() as pool:
        yield pool

"""Fixtures shared by the cache tests (test_cache.py, test_nvrtc.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from codegen.toolchain import cache


@pytest.fixture
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh, empty cache directory for the test, and an empty memory layer before and after."""
    root = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(root))
    cache.set_cache_dir(None)
    cache.clear_memory_cache()
    yield root
    cache.set_cache_dir(None)
    cache.clear_memory_cache()


def _entry_dirs(root: Path) -> list[Path]:
    """Every directory two levels below the cache root `root` (published entries and leftovers alike)."""
    return sorted(p for shard in root.iterdir() if shard.is_dir() for p in shard.iterdir())


@pytest.fixture
def entry_dirs() -> Callable[[Path], list[Path]]:
    """The function listing every directory two levels below a cache root (published entries and leftovers)."""
    return _entry_dirs

"""Global options: `hidet.option.cache_dir(path)` chooses where compiled binaries are cached."""

from __future__ import annotations

import os


def cache_dir(path: str | os.PathLike[str] | None = None) -> str:
    """Set the compilation cache directory (when `path` is given) and return the one in use."""
    from codegen import cache

    if path is not None:
        cache.set_cache_dir(path)
    return os.fspath(cache.cache_dir())

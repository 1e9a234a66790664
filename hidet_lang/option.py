"""Global options: `hidet.option.cache_dir(path)` chooses where compiled binaries are cached."""

from __future__ import annotations

import os


def cache_dir(path: str | os.PathLike[str] | None = None) -> str:
    """Set the compilation cache directory (when `path` is given) and return the one in use.

    A missing directory is created private (mode 0700). One that cannot be used or is not trusted (owned by
    another user, or writable by its group or all users: the libraries in it are loaded) is refused with a
    `RuntimeWarning`, and a private temporary directory, removed at exit, is used instead; it is the one returned.
    """
    from codegen.toolchain import cache  # the language reaches the code generator on use only (its layer rule)

    if path is not None:
        cache.set_cache_dir(path)
    return os.fspath(cache.cache_dir())

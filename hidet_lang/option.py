"""Global options: `hidet.option.cache_dir(path)` chooses where compiled binaries are cached;
`hidet.option.allow_tf32(True)` lets f32 matmuls and convolutions on CUDA run on the tensor cores in TF32."""

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


_allow_tf32 = False


def allow_tf32(allow: bool | None = None) -> bool:
    """Allow (True) or forbid (False) TF32 tensor-core arithmetic for f32 matmuls and convolutions on CUDA, when
    `allow` is given; return whether it is allowed. Off by default (as torch's `allow_tf32` for matmuls): f32
    matmuls and convolutions then run in f32 on the CUDA cores. TF32 rounds each input to 10 mantissa bits (a
    relative error of 2^-11) and accumulates in f32. The choice is read when a schedule is chosen: eager calls made
    after a change use the new choice; graphs built before it keep theirs."""
    global _allow_tf32
    if allow is not None:
        if not isinstance(allow, bool):
            raise TypeError(f"allow_tf32 takes True or False, got {allow!r}")
        if allow != _allow_tf32:
            _allow_tf32 = allow
            from stdlib_ops.templates.registry import choices_changed  # the operators are reached on use only

            choices_changed()
    return _allow_tf32

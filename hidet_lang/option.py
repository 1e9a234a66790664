"""Global options: `hidet.option.cache_dir(path)` chooses where compiled binaries are cached;
`hidet.option.allow_tf32(True)` lets f32 matmuls and convolutions on CUDA run on the tensor cores in TF32.

`cache_dir` is the compilation cache's (`codegen.toolchain.cache.use_cache_dir`), given on first use: the language
imports no code generator. The operator library hears of a change of `allow_tf32` through `when_choices_change`."""

from __future__ import annotations

from collections.abc import Callable

from hidet_lang.lazy import lazy_attributes

_HOMES = {"cache_dir": ("codegen.toolchain.cache", "use_cache_dir")}
__all__ = sorted(["allow_tf32", "when_choices_change", *_HOMES])
__getattr__, __dir__ = lazy_attributes(__name__, _HOMES)

_allow_tf32 = False
_choice_listeners: list[Callable[[], None]] = []


def when_choices_change(listener: Callable[[], None]) -> None:
    """Call `listener` whenever an option that decides how operators are implemented changes (the operator library
    forgets the choices it made under the old value)."""
    _choice_listeners.append(listener)


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
            for listener in _choice_listeners:
                listener()
    return _allow_tf32

"""Profiling CUDA kernels on the emulator: `with profile() as p:` (`hidet.cuda.profile`) counts every launch inside.

While a profile is open, a call of an emulated CUDA module (a kernel, a host function, an eager operator's
kernel, a compiled graph's) runs the module's profile build instead of its library: the same kernels compiled
with `-DHL_EMU_PROFILE` (hidet_lang/emulator_profile.h), built on the first such call and kept by the module.
After each call its counts are read from the library (`hl_emu_profile_take`, which clears them) and added, through
the module's table of sites (`codegen.emit.profile_sites`), to every open profile. Outside a profile nothing of
this runs: a module's calls go to its own library, built without the counting.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from codegen.emit.profile_sites import ProfileSites
from hidet_lang.cuda.profile_report import Profile

__all__ = ["collecting", "counts_reader", "profile"]

_FIELDS = 6  # the counts of a row (PC_FIELDS in emulator_profile.h)
_KERNEL_FIELDS = 4  # launches, blocks, threads a block, distinct global sectors

_open: list[Profile] = []
_lock = threading.Lock()


def collecting() -> bool:
    """Whether a profile is open (emulated CUDA modules then run their profile builds)."""
    return bool(_open)


@contextmanager
def profile() -> Iterator[Profile]:
    """Count what the CUDA kernels launched inside the `with` touch and execute, on the emulator: per DSL line the
    requests, sectors and wavefronts of each memory instruction, per kernel its instructions by class and a lower
    bound on its time (`hidet_lang.cuda.profile_report.Profile`). Profiles may nest: each sees the launches inside
    it. A module on a GPU is refused (RuntimeError) while a profile is open: the counts come from the emulator
    (`HIDET_LANG_CUDA=emulator`)."""
    p = Profile()
    with _lock:
        _open.append(p)
    try:
        yield p
    finally:
        with _lock:
            _open.remove(p)


def counts_reader(lib: ctypes.CDLL, sites: ProfileSites, arch: str | None, module: Any) -> Callable[[], None]:
    """The after-call hook of a profile build `lib` whose sites are `sites` (built for `arch`): read and clear its
    counts and add them to every open profile, as those of the kernels of `module` (the compiled module whose
    profile build it is)."""
    take = lib.hl_emu_profile_take
    take.restype = ctypes.c_int
    row = lib.hl_emu_profile_row
    row.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_ulonglong), ctypes.POINTER(ctypes.c_ulonglong)]
    row.restype = ctypes.c_char_p
    kernels = lib.hl_emu_profile_kernels
    kernels.restype = ctypes.c_int
    kernel = lib.hl_emu_profile_kernel
    kernel.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_ulonglong)]
    kernel.restype = ctypes.c_char_p

    def after() -> None:
        key, counts = ctypes.c_ulonglong(), (ctypes.c_ulonglong * _FIELDS)()
        rows = []
        for i in range(take()):
            name = row(i, ctypes.byref(key), counts).decode()
            site = sites[key.value >> 2]
            rows.append((name, (site.file, site.line, site.kind, site.op, site.ops, site.function, site.statement),
                         key.value & 3, list(counts)))
        values = (ctypes.c_ulonglong * _KERNEL_FIELDS)()
        launched = []
        for i in range(kernels()):
            name = kernel(i, values).decode()
            launched.append((name, *values))
        with _lock:
            receivers = list(_open)
        for p in receivers:
            for name, launches, blocks, threads, distinct in launched:
                p.record_kernel(name, arch, launches, blocks, threads, distinct, module)
            for name, site_key, space, c in rows:
                p.record(name, site_key, space, c, module)

    return after

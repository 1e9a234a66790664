"""The memory the CUDA emulator holds in a process, bounded however many modules run.

Each emulator library keeps a worker for every OS thread that ran its blocks (emulator_runtime.cpp), with fiber
stacks that take about two memory maps each; Linux limits a process's maps (`vm.max_map_count`, 65530 by
default), and every `mmap` of the process fails past it. So after each call of an emulator library, `launched`
keeps the workers of the most recently called libraries while their stacks take at most `MAP_BUDGET` maps
(the library just called is always kept) and releases the workers of the others, oldest first; a released
library maps its stacks again at its next launch. Repeated calls of one library, or of a few small ones in
turn, keep their stacks.
"""

from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict

MAP_BUDGET = 16384
"""The memory maps the stacks of the libraries other than the one just called may take (a quarter of Linux's
default limit, which leaves the rest to the process)."""

_lock = threading.Lock()
_newest: ctypes.CDLL | None = None  # the library called last
_kept: OrderedDict[int, tuple[ctypes.CDLL, int]] = OrderedDict()
"""The other libraries with workers, oldest first: handle -> (library, the maps its stacks took when it stopped
being the newest)."""


def launched(lib: ctypes.CDLL) -> None:
    """Note that the emulator library `lib` has just been called; release the workers that fall out of budget."""
    global _newest
    if _newest is not None and lib._handle == _newest._handle:
        return
    with _lock:
        previous, _newest = _newest, lib
        _kept.pop(lib._handle, None)
        if previous is not None and previous._handle != lib._handle:
            held = previous.hl_emu_held_maps
            held.restype = ctypes.c_long
            _kept[previous._handle] = (previous, held())
        total = sum(maps for _, maps in _kept.values())
        for handle, (old, maps) in list(_kept.items()):
            if total <= MAP_BUDGET:
                break
            if old.hl_emu_release_workers() == 0:  # else a launch of it is running: tried again later
                del _kept[handle]
                total -= maps

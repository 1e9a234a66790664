"""The OpenMP runtime's wait policy for the project's compiled libraries: passive.

OpenMP's threads spin by default between parallel regions (libgomp: some 300,000 iterations before they sleep).
On a machine whose cores other processes use, a spinning thread takes time from them and then waits behind them
when the next region starts, so a parallel loop runs many times slower than a serial one (20x for 1M-element
vector adds, one of two cores busy). Passive waiting (the threads sleep at once) costs a few microseconds a
region on an idle machine instead. libgomp reads `OMP_WAIT_POLICY` once, when it is loaded: `passive_waiting()`
sets it (unless the user set it or `GOMP_SPINCOUNT`) around the load of a library, which may bring libgomp into the
process, and restores the environment afterwards. Where libgomp is already loaded (by another library), the setting
has no effect. The thread count of each loop is chosen in the generated C (`hidet_lang/cpu_threads.h`).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

WAIT_POLICY = "passive"
_loading = threading.RLock()  # one load at a time changes the environment


@contextlib.contextmanager
def passive_waiting() -> Iterator[None]:
    """Load libraries inside this block to give the OpenMP runtime they bring passive waiting (see the module
    docstring); the environment is as it was after the block."""
    with _loading:
        if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
            yield
            return
        os.environ["OMP_WAIT_POLICY"] = WAIT_POLICY
        try:
            yield
        finally:
            os.environ.pop("OMP_WAIT_POLICY", None)


def load_gcc_runtime() -> None:
    """Load GCC's OpenMP runtime (libgomp), with passive waiting, before the first library with parallel loops
    needs it, so that loading it (about half a millisecond) is not part of that library's build; nothing where it
    is not installed."""
    import ctypes  # on first use: importing the cache loads no ctypes

    with passive_waiting(), contextlib.suppress(OSError):
        ctypes.CDLL("libgomp.so.1")

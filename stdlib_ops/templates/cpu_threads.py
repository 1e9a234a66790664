"""How many threads a CPU kernel's parallel loops run on here: `machine_threads`."""

from __future__ import annotations

import os


def machine_threads() -> int:
    """The threads OpenMP gives a parallel loop in this process: `OMP_NUM_THREADS` where it is a positive number,
    else the cores this process may run on."""
    given = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(given) if given.isdigit() and int(given) > 0 else len(os.sched_getaffinity(0))

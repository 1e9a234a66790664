"""The compiled kernels of the process, one cache for eager calls and graphs alike, built once per process (and once
per machine, through the compilation cache on disk, which `codegen.build.build_module` consults).

A kernel's key is its schedule's (`Schedule.key`: the task's key, the target and the schedule chosen, with its
parameters), or, for a fusion group whose anchor's kernel has prologues or epilogues injected, the group's key
followed by the anchor schedule's key (`stdlib_ops.graph.build`). A task's own kernel thus has one key whether an
eager call or a graph builds it, and a winner recorded by a tuning run since makes a new key, so the cache is never
emptied: a choice that changes leads to another key.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tqdm import tqdm

from codegen import build_module
from hidet_lang.ir.func import IRModule
from hidet_lang.target import Target
from stdlib_ops.task import Task
from stdlib_ops.templates.registry import choose_schedule

PROGRESS_DELAY_S = 1.0
"""A build of several kernels that takes longer shows a progress bar on a terminal."""


class KernelCache:
    """Compiled kernels by key (see the module docstring)."""

    def __init__(self) -> None:
        self._compiled: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, task: Task, target: Target) -> Any:
        """The compiled module of `task`'s schedule on `target` (`choose_schedule`), built on first use."""
        schedule = choose_schedule(task, target)
        return self.compile({schedule.key: schedule.module}, target)[schedule.key]

    def compile(self, modules: Mapping[str, IRModule], target: Target) -> dict[str, Any]:
        """The compiled module of each of `modules` (by key), building the ones not built yet in parallel (the C
        compilers are processes: one a core)."""
        missing = [key for key in modules if key not in self._compiled]
        if missing:
            with ThreadPoolExecutor(max_workers=min(len(missing), os.cpu_count() or 1)) as pool, \
                    tqdm(total=len(missing), desc=f"building kernels for {target}", unit="kernel",
                         delay=PROGRESS_DELAY_S, disable=not sys.stderr.isatty(), leave=False) as bar:
                futures = {key: pool.submit(build_module, modules[key], target) for key in missing}
                for key, future in futures.items():
                    built = future.result()
                    with self._lock:
                        self._compiled[key] = built
                    bar.update(1)
        return {key: self._compiled[key] for key in modules}

    def __contains__(self, key: str) -> bool:
        return key in self._compiled

    def __len__(self) -> int:
        return len(self._compiled)


KERNELS = KernelCache()
"""The process's compiled kernels."""

"""The compiled kernel of each schedule (`choose_schedule`'s key: task, target, schedule), built once per process
(and once per machine, through the compilation cache on disk, which `codegen.build.build_module` consults)."""

from __future__ import annotations

from typing import Any

from codegen import build_module
from hidet_lang.target import Target
from stdlib_ops.task import Task
from stdlib_ops.templates.registry import choose_schedule


class KernelCache:
    """Compiled kernels by schedule key."""

    def __init__(self) -> None:
        self._compiled: dict[str, Any] = {}

    def get(self, task: Task, target: Target) -> Any:
        """The compiled module of `task`'s schedule on `target` (`choose_schedule`), built on first use."""
        schedule = choose_schedule(task, target)
        compiled = self._compiled.get(schedule.key)
        if compiled is None:
            compiled = self._compiled[schedule.key] = build_module(schedule.module, target)
        return compiled

    def __len__(self) -> int:
        return len(self._compiled)


KERNELS = KernelCache()

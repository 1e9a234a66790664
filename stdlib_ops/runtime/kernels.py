"""The compiled kernel of each (task key, target), built once per process (and once per machine, through the
compilation cache on disk, which `codegen.build.build_module` consults)."""

from __future__ import annotations

from typing import Any

from codegen.build import build_module
from stdlib_ops.task import Task


def target_of(device: str) -> str:
    """The build target of tensors on `device`."""
    return "cuda" if device == "cuda" else "cpu"


class KernelCache:
    """Compiled kernels by (task key, target)."""

    def __init__(self) -> None:
        self._compiled: dict[tuple[str, str], Any] = {}

    def get(self, task: Task, target: str) -> Any:
        """The compiled module of `task` for `target` (its first scheduled candidate), built on first use."""
        key = (task.key, target)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = build_module(task.implement(target)[0], target)
        return compiled

    def __len__(self) -> int:
        return len(self._compiled)


KERNELS = KernelCache()

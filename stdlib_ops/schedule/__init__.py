"""The rule-based scheduler: a kernel for any task from its compute definition (see `cpu` and `cuda`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hidet_lang.ir.func import IRModule
from hidet_lang.target import Target
from stdlib_ops.schedule.cpu import schedule_cpu
from stdlib_ops.schedule.cuda import schedule_cuda

if TYPE_CHECKING:
    from stdlib_ops.task import Task


def auto_schedule(task: Task, target: Target) -> IRModule:
    """The rule-based schedule of `task` for `target`."""
    if target.is_cuda:
        return schedule_cuda(task.kernel_name, task.inputs, task.outputs)
    return schedule_cpu(task.kernel_name, task.inputs, task.outputs)


__all__ = ["auto_schedule", "schedule_cpu", "schedule_cuda"]

"""Checking a compiler's lowering of a task mapping against the mapping's Python-side semantics."""

from __future__ import annotations

from hidet_lang.frontend.script import ScriptFunction, script
from hidet_lang.ir.mapping import TaskMapping
from hidet_lang.ir.types import int32 as i32


def task_recorder(m: TaskMapping, workers: int) -> ScriptFunction:
    """A script function `record_tasks(w: i32, out: i32[workers, tasks, dims])` that stores the coordinates of
    worker `w`'s k-th task under `m` in `out[w, k, :]` and leaves the rest of `out[w]` alone (a worker beyond
    `m`'s count runs no task). Call it from a CPU loop over workers or with a CUDA thread index; then `out[w]`
    must list `m(w)`. Its kind follows from its callers (CPU or CUDA code)."""
    tasks, dims = len(m(0)), len(m.task_shape)

    @script
    def record_tasks(w: i32, out: i32[workers, tasks, dims]):
        k = 0
        if dims == 1:
            for i in m.on(w):
                out[w, k, 0] = i
                k += 1
        elif dims == 2:
            for i, j in m.on(w):
                out[w, k, 0] = i
                out[w, k, 1] = j
                k += 1
        else:
            for i, j, l in m.on(w):
                out[w, k, 0] = i
                out[w, k, 1] = j
                out[w, k, 2] = l
                k += 1

    return record_tasks

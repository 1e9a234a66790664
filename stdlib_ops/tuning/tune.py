"""`tune`: choose each tunable task's schedule parameters by timing every point of its template's space.

For each task (of a graph, of the operators that computed a symbolic tensor, or one task) whose library template
declares a tuning space (`stdlib_ops.templates.space`), and whose shape class has no record for this machine yet
(`stdlib_ops.tuning.records`), every point of the space becomes a candidate (`stdlib_ops.tuning.jobs`). The work
goes through a `concurrent.futures.Executor` in two phases:

1. compile: every candidate of every task at once, in parallel (`compile_candidate`);
2. time: one job per task, one job at a time (so no compilation or other timing disturbs it), which checks each
   candidate's result against the default point's and times the correct ones (`time_candidates`).

The fastest correct candidate is recorded for the machine that timed it and the task's shape class, and every
later build on a machine of that kind uses it (`stdlib_ops.templates.registry.schedule_params`). The default
executor is a local pool of threads: a candidate's compilation spends most of its time in the C compiler, a
process of its own, so threads compile in parallel as well as worker processes would, without their start-up, and
a script that tunes needs no `if __name__ == "__main__":` guard (workers started by `spawn` run the main script
again). Any other executor works, e.g. a Dask cluster's `distributed.Client(...).get_executor()`, since the jobs
are module-level functions of plain data; a process pool whose workers failed to start (an unguarded script) is
reported as such. The winner is recorded under the identity of the machine that timed it, so a cluster of another
kind of machines tunes for its own kind.

Graph builds and eager calls take a winner recorded since their last build or call (`registry.choose_schedule`
looks the records up each time; a record written in the process makes eager calls choose again).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import Executor
from typing import TYPE_CHECKING

from codegen import resolve_target
from hidet_lang.target import Target
from stdlib_ops.task import Task
from stdlib_ops.tensor import Tensor
from stdlib_ops.tuning.bundle import build_bundle
from stdlib_ops.tuning.records import recorded_winner
from stdlib_ops.tuning.timing import Pending, TuningResult, candidates_of, time_and_record, tunable_tasks

if TYPE_CHECKING:
    from stdlib_ops.graph.flow_graph import FlowGraph

__all__ = ["TuningResult", "tunable_tasks", "tune"]


def tune(subject: FlowGraph | Tensor | Task, target: Target | str = "cpu", *, sizes: Mapping[str, int] | None = None,
         executor: Executor | None = None, repeat: int = 5, retune: bool = False,
         bundle: str | os.PathLike[str] | None = None) -> list[TuningResult]:
    """Tune the tasks of `subject` (a graph, a symbolic tensor's operators, or a task) for `target`, and record
    the winners (see the module docstring); one result per distinct shape class, in the order of the tasks.

    `sizes` gives symbolic dimensions (by name) the values to time at (default `shapes.REPRESENTATIVE_SIZE`);
    `executor` runs the jobs (default: a local thread pool); each candidate is timed by the median of `repeat`
    samples; `retune` times again the shape classes that already have a record.

    With `bundle` (a directory), nothing is timed: every candidate of every tunable task is compiled for `target`
    (a CUDA target, on any machine: no GPU is needed) and saved there with its cubin, for `time_bundle` on the GPU
    (`stdlib_ops.tuning.bundle`); each result's source is 'bundled' and its rejected points those that failed to
    build."""
    target = Target.of(target)
    if repeat < 1:
        raise ValueError(f"tune: repeat must be at least 1, got {repeat}")
    if bundle is not None:
        return build_bundle(subject, target, bundle, sizes=sizes, executor=executor)
    order: list[str] = []
    results: dict[str, TuningResult] = {}
    pending: dict[str, Pending] = {}
    emulated = resolve_target(target).emulated
    for key, binding, space in tunable_tasks(subject, target):
        order.append(key)
        if emulated:
            raise RuntimeError(f"tune: timing CUDA kernels needs a GPU (template {binding.template_ref} declares a "
                               "tuning space); here CUDA modules run on the CUDA emulator, whose times say nothing "
                               "of a GPU's, so its default point is used (tune(..., bundle=DIR) builds the "
                               "candidates here for timing on a GPU)")
        winner = None if retune else recorded_winner(binding, space, target)
        if winner is not None:
            results[key] = TuningResult(key, winner, "recorded")
            continue
        pending[key] = Pending(dict(space.default), candidates_of(binding, space, target, sizes))
    results.update(time_and_record(pending, executor, repeat))
    return [results[key] for key in order]

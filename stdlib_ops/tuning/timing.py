"""The tuning's pieces below `tune` and the tuning bundles (`bundle`), which both build on them: the tunable tasks
of a subject (`tunable_tasks`), their candidates (`candidates_of`), the two phases that compile and time them and
record the winners (`time_and_record`; see `stdlib_ops.tuning.tune`), and `TuningResult`."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tqdm import tqdm

from hidet_lang.target import Target
from stdlib_ops.task import Task
from stdlib_ops.templates import registry
from stdlib_ops.templates.binding import TemplateBinding
from stdlib_ops.templates.space import Point, TuningSpace
from stdlib_ops.tensor import Tensor
from stdlib_ops.tuning.jobs import Candidate, TimingJob, compile_candidate, time_candidates
from stdlib_ops.tuning.records import records_path, write_record
from stdlib_ops.tuning.shapes import concrete_sizes, shape_class

if TYPE_CHECKING:
    from stdlib_ops.graph.flow_graph import FlowGraph

BROKEN_POOL = ("tune: a worker process of the executor stopped; a process pool started by 'spawn' or "
               "'forkserver' runs the main script again in each worker, so put the script's work under "
               "`if __name__ == \"__main__\":`, or leave `executor` to the default (threads)")
"""The message of a tuning run whose process pool broke (its workers' own tracebacks precede it)."""


@dataclass(frozen=True)
class TuningResult:
    """The schedule one tunable task gets: its `shape_class`, the chosen `params`, and where they come from
    (`source`: 'recorded', found in the records, nothing timed; 'tuned', timed now and recorded; 'default', no
    candidate could be checked, nothing recorded). For a tuned task: the median `seconds` per call of the winner
    and of the default point, and the candidates that were `rejected` (point, reason: wrong result, failed
    build)."""

    shape_class: str
    params: Point
    source: str
    seconds: float | None = None
    default_seconds: float | None = None
    rejected: tuple[tuple[Point, str], ...] = field(default_factory=tuple)


@dataclass
class Pending:
    """A task to time: its template's default point and its candidates (the default point first)."""

    default: Point
    candidates: list[Candidate]


def tunable_tasks(subject: FlowGraph | Tensor | Task, target: Target) -> list[tuple[str, TemplateBinding,
                                                                                 TuningSpace]]:
    """The tasks of `subject` whose library template declares a tuning space on `target` (a graph's as its build
    compiles them: `stdlib_ops.graph.build.as_built`), one a shape class, in order: (shape class, binding, space)."""
    found: dict[str, tuple[str, TemplateBinding, TuningSpace]] = {}
    if isinstance(getattr(subject, "nodes", None), list):  # a graph: the tasks its build compiles
        from stdlib_ops.graph.build import as_built  # the graph package imports tuning: a cycle at module level

        subject = as_built(subject, target)
    for task in _tasks_of(subject):
        binding = registry.binding_of(task, target)
        space = None if binding is None else binding.space
        if binding is not None and space is not None:
            found.setdefault(shape_class(binding), (shape_class(binding), binding, space))
    return list(found.values())


def candidates_of(binding: TemplateBinding, space: TuningSpace, target: Target,
                  sizes: Mapping[str, int] | None) -> list[Candidate]:
    """Every point of `space` as a candidate of `binding` for `target` at its concrete sizes (the symbolic ones at
    `sizes`), the default point first."""
    concrete = tuple(concrete_sizes(binding, sizes or {}).items())
    options = tuple(sorted(binding.options.items()))
    return [Candidate(binding.template_ref, concrete, options, tuple(point.items()), target)
            for point in space.points()]


def time_and_record(pending: Mapping[str, Pending], executor: Executor | None,
                    repeat: int) -> dict[str, TuningResult]:
    """Both phases for the `pending` tasks (compile every candidate in parallel, then time one task at a time) on
    `executor` (default: a local thread pool), recording each winner; the results by shape class."""
    if not pending:
        return {}
    results: dict[str, TuningResult] = {}
    try:
        with executor_or_pool(executor, sum(len(p.candidates) for p in pending.values())) as pool:
            failures = _compile_all(pool, pending)
            for key, job in progress(pending.items(), "tuning: timing", "task"):
                results[key] = _time_and_record(pool, key, job, failures, repeat)
    except BrokenProcessPool:
        raise RuntimeError(BROKEN_POOL) from None
    return results


def _tasks_of(subject: FlowGraph | Tensor | Task) -> list[Task]:
    """The tasks of a graph's operators, of the operators a symbolic tensor was computed by, or the task."""
    if isinstance(subject, Task):
        return [subject]
    if isinstance(subject, Tensor):
        tasks: list[Task] = []
        seen: set[int] = set()
        stack = [subject]
        while stack:
            op = stack.pop().producer
            if op is not None and id(op) not in seen:
                seen.add(id(op))
                tasks.append(op.task)
                stack.extend(op.inputs)
        return tasks[::-1]
    nodes = getattr(subject, "nodes", None)  # a FlowGraph, whose module builds graphs on the tuning
    if isinstance(nodes, list):
        return [op.task for op in nodes]
    raise TypeError(f"tune: expected a FlowGraph, a Tensor or a Task, got {type(subject).__name__}")


@contextmanager
def executor_or_pool(given: Executor | None, jobs: int) -> Iterator[Executor]:
    """`given`, or a local thread pool of up to one worker per core, shut down afterwards."""
    if given is not None:
        yield given
        return
    workers = max(1, min(jobs, os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tune") as pool:
        yield pool


def progress(items: object, desc: str, unit: str, total: int | None = None) -> tqdm:
    """A progress bar over `items`, shown on a terminal only."""
    return tqdm(items, desc=desc, unit=unit, total=total, disable=not sys.stderr.isatty(), leave=False)


def _compile_all(pool: Executor, pending: Mapping[str, Pending]) -> dict[Candidate, str]:
    """First phase: compile every candidate in parallel; why each one that failed did."""
    futures: dict[Future[str | None], Candidate] = {
        pool.submit(compile_candidate, c): c for job in pending.values() for c in job.candidates}
    failures: dict[Candidate, str] = {}
    for future in progress(as_completed(futures), "tuning: compiling", "candidate", total=len(futures)):
        problem = future.result()
        if problem is not None:
            failures[futures[future]] = problem
    return failures


def _time_and_record(pool: Executor, key: str, job: Pending, failures: Mapping[Candidate, str],
                     repeat: int) -> TuningResult:
    """Second phase for one task: time its candidates that compiled (one job, waited for), record the winner."""
    default = dict(job.default)
    rejected = [(dict(c.params), f"failed to build: {failures[c]}") for c in job.candidates if c in failures]
    if job.candidates[0] in failures:
        warnings.warn(f"tune: the default schedule of {key} failed to build ({failures[job.candidates[0]]}); "
                      "nothing can be checked, so it keeps the default", RuntimeWarning, stacklevel=4)
        return TuningResult(key, default, "default", rejected=tuple(rejected))
    built = [c for c in job.candidates if c not in failures]
    outcome = pool.submit(time_candidates, TimingJob(tuple(built), repeat)).result()
    timed: list[tuple[float, Candidate]] = []
    for candidate, seconds, problem in zip(built, outcome.seconds, outcome.problems):
        if seconds is None:
            rejected.append((dict(candidate.params), problem or "not timed"))
        else:
            timed.append((seconds, candidate))
    if outcome.seconds[0] is None:
        warnings.warn(f"tune: the default schedule of {key} failed ({outcome.problems[0]}); nothing can be checked, "
                      "so it keeps the default", RuntimeWarning, stacklevel=4)
        return TuningResult(key, default, "default", rejected=tuple(rejected))
    seconds, winner = min(timed, key=lambda pair: pair[0])
    params = dict(winner.params)
    write_record(records_path(), outcome.machine, key, {
        "params": params, "seconds": seconds, "default_seconds": outcome.seconds[0], "checked": len(timed),
        "rejected": len(rejected), "sizes": dict(winner.sizes)})
    return TuningResult(key, params, "tuned", seconds, outcome.seconds[0], tuple(rejected))

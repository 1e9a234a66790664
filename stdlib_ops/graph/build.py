"""`build_graph`: a (partitioned) graph compiled for a target into a `CompiledGraph`.

Each fusion group becomes one kernel: the anchor's scheduled module (`choose_schedule`; a tunable library
template's with the schedule parameters recorded for this machine, else its default point), with the group's
prologues and epilogues injected. Where the anchor's kernel breaks the fusion contract for a tensor, the
operators that would be fused there stay kernels of their own, and the compiled graph's printout says why. Groups
with equal keys share one kernel, within a graph and across graphs (the `GraphKernels` cache); distinct kernels
compile in parallel (the C compilers are subprocesses), with a progress bar when a build takes more than a second
on a terminal. An unpartitioned graph builds with one kernel per operator. Operators that no template takes on the
target and that have a decomposition (`stdlib_ops.graph.decompose`: attention on the CPU) are built as it.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tqdm import tqdm

from codegen import asarray, build_module
from hidet_lang.target import Target
from stdlib_ops.dims import names_of
from stdlib_ops.graph.compiled import CompiledGraph, Launch, Plan, Ref, TensorSpec
from stdlib_ops.graph.decompose import decompose_for
from stdlib_ops.graph.flow_graph import FlowGraph
from stdlib_ops.graph.fused_task import FusedKernel, contract_problems, fused_kernel, group_key, group_outputs
from stdlib_ops.graph.memory_plan import plan_memory
from stdlib_ops.graph.partition import FusionGroup, detach, order_groups
from stdlib_ops.graph.prologue_choice import choose_prologue_path
from stdlib_ops.templates.registry import choose_schedule
from stdlib_ops.templates.space import Point
from stdlib_ops.tensor import Tensor

PROGRESS_DELAY_S = 1.0


class GraphKernels:
    """The fused kernels, their schedule parameters and their builds by group key (which covers the anchor's
    schedule key, so a winner recorded by a tuning run since is built, not an earlier kernel)."""

    def __init__(self) -> None:
        self._fused: dict[str, FusedKernel] = {}
        self.schedules: dict[str, Point | None] = {}
        self._built: dict[str, Any] = {}
        self._lock = threading.Lock()

    def fused(self, group: FusionGroup, target: Target) -> tuple[str, FusedKernel]:
        """The key and the kernel of `group` on `target` (`schedules[key]`: its anchor's schedule parameters)."""
        schedule = choose_schedule(group.anchor.task, target, prologue=bool(group.prologues))
        key = group_key(group, target) + "|" + schedule.key
        if key not in self._fused:
            self._fused[key] = fused_kernel(group, schedule.module)
            self.schedules[key] = schedule.params
        return key, self._fused[key]

    def compile(self, kernels: dict[str, FusedKernel], target: Target) -> dict[str, Any]:
        """The built module of each kernel (by key), building the ones not built yet in parallel."""
        missing = [key for key in kernels if key not in self._built]
        if missing:
            workers = min(len(missing), os.cpu_count() or 1)  # compilers are processes: one a core
            with ThreadPoolExecutor(max_workers=workers) as pool, \
                    tqdm(total=len(missing), desc=f"building kernels for {target}", unit="kernel",
                         delay=PROGRESS_DELAY_S, disable=not sys.stderr.isatty(), leave=False) as bar:
                futures = {key: pool.submit(build_module, kernels[key].module, target) for key in missing}
                for key, future in futures.items():
                    built = future.result()
                    with self._lock:
                        self._built[key] = built
                    bar.update(1)
        return {key: self._built[key] for key in kernels}


GRAPH_KERNELS = GraphKernels()


def build_graph(graph: FlowGraph, target: Target | str = "cpu",
                kernels: GraphKernels = GRAPH_KERNELS) -> CompiledGraph:
    """`graph` compiled for `target` ('cpu', 'cuda' or 'cuda:<arch>', or a `Target`)."""
    try:
        target = Target.of(target)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"build: {exc}") from None
    device = target.device
    graph = decompose_for(graph, target)
    for op in graph.nodes:
        op.task.check_target(target)
    groups = respect_contracts(_groups_of(graph), target)
    fused = [kernels.fused(group, target) for group in groups]
    distinct = dict(fused)
    built = kernels.compile(distinct, target)
    keys = list(distinct)
    modules = [built[key] for key in keys]
    titles = [distinct[key].title for key in keys]
    plan, constants = _plan(graph, groups, [(keys.index(key), kernel) for key, kernel in fused], device)
    description = str(FlowGraph(graph.inputs, graph.outputs, graph.nodes, groups, graph.input_names))
    return CompiledGraph(str(target), plan, modules, titles, constants, description,
                         [distinct[key].module for key in keys], [kernels.schedules[key] for key in keys])


def respect_contracts(groups: Sequence[FusionGroup], target: Target) -> list[FusionGroup]:
    """`groups`, with the operators that an anchor's kernel cannot take (fusion contract) split off, and prologues
    that would move an anchor off its fastest template split off where the cost model says so
    (`prologue_choice`); the choice is noted on the group."""
    result: list[FusionGroup] = []
    pending = list(groups)
    while pending:
        group = pending.pop(0)
        if not (group.prologues or group.epilogues):
            result.append(group)
            continue
        choice = choose_prologue_path(group, target)
        if choice is not None:
            if choice.detach:
                kept, *singles = detach(group, group.prologues, choice.note)
                pending = [kept, *pending]
                result.extend(singles)
                continue
            if choice.note not in group.notes:  # a group split by its contract comes here again
                group = dataclasses.replace(group, notes=[*group.notes, choice.note])
        anchor = choose_schedule(group.anchor.task, target, prologue=bool(group.prologues)).module
        problems = contract_problems(group, anchor)
        if not problems:
            result.append(group)
            continue
        ops, why = problems[0]
        kept, *singles = detach(group, ops, why)
        pending = [kept, *pending]
        result.extend(singles)
    return order_groups(result)


def _groups_of(graph: FlowGraph) -> list[FusionGroup]:
    if graph.groups is not None:
        return list(graph.groups)
    position = {id(op): k for k, op in enumerate(graph.nodes)}
    return [FusionGroup(op, position=position) for op in graph.nodes]


def _plan(graph: FlowGraph, groups: Sequence[FusionGroup], launches: Sequence[tuple[int, FusedKernel]],
          device: str) -> tuple[Plan, list[Any]]:
    """The run plan of `groups` (in order, each with its kernel) and the constants moved to `device`."""
    refs: dict[int, Ref] = {id(t): ("input", k) for k, t in enumerate(graph.inputs)}
    constants = graph.constants
    refs.update((id(t), ("const", k)) for k, t in enumerate(constants))
    outputs: list[tuple[Ref, TensorSpec]] = []
    for k, t in enumerate(graph.outputs):
        refs.setdefault(id(t), ("output", k))
        outputs.append((refs[id(t)], TensorSpec(t.shape, t.dtype)))
    tensors: dict[int, Tensor] = {}
    steps: list[tuple[list[int], list[int]]] = []
    group_io: list[tuple[list[Tensor], list[Tensor]]] = []
    for group in groups:
        ins, outs = group.inputs(), group_outputs(group)
        group_io.append((ins, outs))
        tensors.update((id(t), t) for t in [*ins, *outs])
        steps.append(([id(t) for t in ins], [id(t) for t in outs]))
    intermediates = {i: (t.shape, t.dtype) for i, t in tensors.items() if i not in refs}
    memory = plan_memory(steps, intermediates)
    buffer_ids = list(memory.slot_of)
    buffers = tuple((TensorSpec(tensors[i].shape, tensors[i].dtype), memory.slot_of[i]) for i in buffer_ids)
    refs.update((i, ("buffer", k)) for k, i in enumerate(buffer_ids))
    plan_launches = []
    for (kernel_index, kernel), (ins, outs) in zip(launches, group_io):
        args: list[Ref] = []
        for role, which in kernel.args:
            if role == "size":
                args.append(("size", which))
            else:
                args.append(refs[id((ins if role == "in" else outs)[which])])
        plan_launches.append(Launch(kernel_index, tuple(args)))
    _check_sizes(graph, plan_launches)
    plan = Plan(tuple(TensorSpec(t.shape, t.dtype) for t in graph.inputs),
                tuple(f"%{name}" for name in graph.input_names), buffers, memory.slots, tuple(plan_launches),
                tuple(outputs))
    moved = [c.storage if c.device == device else asarray(c.numpy(), device=device) for c in constants]
    return plan, moved


def _check_sizes(graph: FlowGraph, launches: Sequence[Launch]) -> None:
    known = {name for t in graph.inputs for d in t.shape for name in names_of(d)}
    for launch in launches:
        for role, name in launch.args:
            if role == "size" and name not in known:
                raise ValueError(f"build: a kernel takes the size '{name}', which no graph input's shape names")

"""`build_graph`: a (partitioned) graph compiled for a target into a `CompiledGraph`.

Each fusion group becomes one kernel: the anchor's scheduled module (`choose_schedule`; a tunable library
template's with the schedule parameters recorded for this machine, else its default point), with the group's
prologues and epilogues injected. Where the anchor's kernel breaks the fusion contract for a tensor, the
operators that would be fused there stay kernels of their own, and the compiled graph's printout says why. Groups
with equal keys share one kernel, within a graph, across graphs and with eager calls: a group that fuses nothing
into its anchor builds the anchor's schedule under its schedule key, a fused one under its group key and the
anchor's schedule key, in the process's one kernel cache (`stdlib_ops.runtime.kernels.KERNELS`); the anchor's
schedule is chosen once a group. Distinct kernels compile in parallel (the C compilers are subprocesses), with a
progress bar when a build takes more than a second on a terminal. An unpartitioned graph builds with one kernel
per operator. Operators that no template takes on the target and that have a decomposition
(`stdlib_ops.graph.decompose`: attention on the CPU) are built as it. On the CPU, convolutions with constant weights
read them packed once, at build time (`stdlib_ops.graph.pack_weights`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from codegen import asarray
from hidet_lang.target import Target
from stdlib_ops.dims import names_of
from stdlib_ops.graph.compiled import CompiledGraph
from stdlib_ops.graph.decompose import decompose_for
from stdlib_ops.graph.flops import group_flops
from stdlib_ops.graph.fused_task import FusedKernel, contract_problems, fused_kernel, group_key, group_outputs
from stdlib_ops.graph.memory_plan import Launch, Plan, Ref, TensorSpec, plan_memory
from stdlib_ops.graph.pack_weights import pack_weights_for
from stdlib_ops.graph.partition import FusionGroup, detach, order_groups
from stdlib_ops.graph.prologue_choice import choose_prologue_path
from stdlib_ops.runtime.kernels import KERNELS, KernelCache
from stdlib_ops.templates.choice_memo import ChoiceMemo
from stdlib_ops.templates.registry import Schedule, choose_schedule
from stdlib_ops.templates.space import Point
from stdlib_ops.tensor import Tensor

if TYPE_CHECKING:
    from stdlib_ops.graph.flow_graph import FlowGraph

_FUSED: ChoiceMemo[str, FusedKernel] = ChoiceMemo()
"""The fused kernels (the anchor's module with the group's prologues and epilogues injected) by group key and
anchor schedule key: a memo of the fusion rewrite in front of the kernel cache, emptied when choices change."""


def as_built(graph: FlowGraph, target: Target) -> FlowGraph:
    """`graph` as a build for `target` compiles it: operators decomposed where the target has no template for them,
    constant weights packed (so that tuning times the tasks the build runs)."""
    return pack_weights_for(decompose_for(graph, target), target)


def build_graph(graph: FlowGraph, target: Target | str = "cpu", kernels: KernelCache = KERNELS) -> CompiledGraph:
    """`graph` compiled for `target` ('cpu', 'cuda' or 'cuda:<arch>', or a `Target`), its kernels compiled once in
    `kernels` (by key; see `stdlib_ops.runtime.kernels`)."""
    try:
        target = Target.of(target)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"build: {exc}") from None
    graph = as_built(graph, target)
    schedules = GroupSchedules(target)
    groups = respect_contracts(_groups_of(graph), target, schedules)
    launches: list[tuple[str, FusedKernel]] = []
    params: dict[str, Point | None] = {}
    for group in groups:
        schedule = schedules.of(group)
        key, kernel = fused(group, schedule, target)
        launches.append((key, kernel))
        params[key] = schedule.params
    distinct = dict(launches)
    built = kernels.compile({key: kernel.module for key, kernel in distinct.items()}, target)
    keys = list(distinct)
    plan, constants = _plan(graph, groups, [(keys.index(key), kernel) for key, kernel in launches], target.device)
    description = str(graph.with_groups(groups))
    return CompiledGraph(target, plan, [built[key] for key in keys], [distinct[key].title for key in keys],
                         constants, description, [distinct[key].module for key in keys],
                         [params[key] for key in keys])


class GroupSchedules:
    """The anchor schedule of each fusion group of one graph build (`choose_schedule`, asked once per anchor and
    whether prologues are fused into it)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._chosen: dict[tuple[int, bool], Schedule] = {}

    def of(self, group: FusionGroup) -> Schedule:
        """The schedule of `group`'s anchor, with its prologues to fuse or none."""
        key = (id(group.anchor), bool(group.prologues))
        if key not in self._chosen:
            self._chosen[key] = choose_schedule(group.anchor.task, self.target, prologue=key[1])
        return self._chosen[key]


def fused(group: FusionGroup, schedule: Schedule, target: Target) -> tuple[str, FusedKernel]:
    """The kernel key and the kernel of `group`, whose anchor takes `schedule`: the anchor's own module under its
    schedule's key where the group fuses nothing into it (the kernel an eager call of the anchor builds), else the
    fused module under the group's key and the schedule's."""
    fused_key = group_key(group, target) + "|" + schedule.key
    kernel = _FUSED.get(fused_key, lambda: fused_kernel(group, schedule.module))
    return (fused_key if group.prologues or group.epilogues else schedule.key), kernel


def respect_contracts(groups: Sequence[FusionGroup], target: Target,
                      schedules: GroupSchedules | None = None) -> list[FusionGroup]:
    """`groups`, with the operators that an anchor's kernel cannot take (fusion contract) split off, and prologues
    that would move an anchor off its fastest template split off where the cost model says so
    (`prologue_choice`); the choice is noted on the group. The anchors' schedules on `target` are `schedules`'
    (the build's, which its kernels take), new ones where not given."""
    schedules = GroupSchedules(target) if schedules is None else schedules
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
        problems = contract_problems(group, schedules.of(group).module)
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
    for (kernel_index, kernel), (ins, outs), group in zip(launches, group_io, groups):
        args: list[Ref] = []
        for role, which in kernel.args:
            if role == "size":
                args.append(("size", which))
            else:
                args.append(refs[id((ins if role == "in" else outs)[which])])
        plan_launches.append(Launch(kernel_index, tuple(args), group_flops(group)))
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

"""The fusion partition: which operators share one kernel.

Every non-injective operator anchors a group. A group absorbs, as epilogues, the chain of injective consumers of
each anchor output (a tensor that is no graph output and has that one reader, which has an inverse map for it), and
then, as prologues, the injective producers of its members' inputs whose every reader is in the group. Left-over
injective operators, walking backwards, each anchor a group that absorbs its prologues, so an elementwise chain
fuses into its last operator. A member never depends on a tensor computed outside its group from the group's own
results, and the groups are ordered so that each runs after the groups it reads from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stdlib_ops.operators.base import Operator
from stdlib_ops.tensor import Tensor

if TYPE_CHECKING:
    from stdlib_ops.graph.flow_graph import FlowGraph


@dataclass(eq=False)
class FusionGroup:
    """Operators compiled into one kernel: the `anchor` (whose schedule the kernel is), its `prologues` (computed
    where the anchor reads their results) and `epilogues` (applied where the anchor stores), in graph order."""

    anchor: Operator
    prologues: list[Operator] = field(default_factory=list)
    epilogues: list[Operator] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    position: dict[int, int] = field(default_factory=dict, repr=False)

    @property
    def members(self) -> list[Operator]:
        """Every operator of the group, in graph order."""
        ops = [*self.prologues, self.anchor, *self.epilogues]
        return sorted(ops, key=lambda op: self.position.get(id(op), 0))

    @property
    def title(self) -> str:
        """The members' names, the anchor's marked when there are several: `matmul* + add + relu`."""
        if not self.prologues and not self.epilogues:
            return self.anchor.name
        return " + ".join(op.name + ("*" if op is self.anchor else "") for op in self.members)

    def contains(self, op: Operator) -> bool:
        """Whether `op` is a member."""
        return op is self.anchor or any(op is m for m in (*self.prologues, *self.epilogues))

    def inputs(self) -> list[Tensor]:
        """The tensors the members read that no member computes, in order of first read (each once)."""
        inside = {id(t) for op in self.members for t in op.outputs}
        seen: dict[int, Tensor] = {}
        for op in self.members:
            for t in op.inputs:
                if id(t) not in inside:
                    seen.setdefault(id(t), t)
        return list(seen.values())


class _Partitioner:
    """The partition of one graph (see the module's docstring)."""

    def __init__(self, graph: FlowGraph) -> None:
        self.nodes = graph.nodes
        self.index = {id(op): k for k, op in enumerate(self.nodes)}
        self.users = graph.users()
        self.graph_outputs = {id(t) for t in graph.outputs}
        self.reach: list[int] = []  # bit k: the operator depends on (or is) node k
        for k, op in enumerate(self.nodes):
            bits = 1 << k
            for t in op.inputs:
                if t.producer is not None and id(t.producer) in self.index:
                    bits |= self.reach[self.index[id(t.producer)]]
            self.reach.append(bits)
        self.owner: dict[int, FusionGroup] = {}
        self.position = self.index

    def run(self) -> list[FusionGroup]:
        groups = [self.new_group(op) for op in self.nodes if not op.task.is_injective]
        for group in groups:
            self.absorb_epilogues(group)
        for group in groups:
            self.absorb_prologues(group)
        for op in reversed(self.nodes):
            if id(op) not in self.owner:
                group = self.new_group(op)
                self.absorb_prologues(group)
                groups.append(group)
        return order_groups(groups)

    def new_group(self, op: Operator) -> FusionGroup:
        group = FusionGroup(op, position=self.position)
        self.owner[id(op)] = group
        return group

    def mask(self, group: FusionGroup) -> int:
        return sum(1 << self.index[id(op)] for op in group.members)

    def depends_on(self, t: Tensor, group: FusionGroup) -> bool:
        """Whether tensor `t` is computed from a member's result (or by a member)."""
        op = t.producer
        return op is not None and id(op) in self.index and bool(self.reach[self.index[id(op)]] & self.mask(group))

    def absorb_epilogues(self, group: FusionGroup) -> None:
        for out in group.anchor.outputs:
            current = out
            while True:
                readers = self.users.get(id(current), [])
                if id(current) in self.graph_outputs or len(readers) != 1:
                    break
                (consumer,) = readers
                if not self.fits_epilogue(consumer, current, group):
                    break
                group.epilogues.append(consumer)
                self.owner[id(consumer)] = group
                current = consumer.outputs[0]

    def fits_epilogue(self, op: Operator, value: Tensor, group: FusionGroup) -> bool:
        """Whether `op` can be applied where the group stores `value` (it reads `value` through inverse maps)."""
        if id(op) in self.owner or not op.task.is_injective or len(op.outputs) != 1:
            return False
        positions = [j for j, t in enumerate(op.inputs) if t is value]
        if any(j not in op.task.inverse_maps for j in positions):
            return False
        return not any(self.depends_on(t, group) for t in op.inputs if t is not value)

    def absorb_prologues(self, group: FusionGroup) -> None:
        changed = True
        while changed:
            changed = False
            for member in group.members:
                for t in member.inputs:
                    producer = t.producer
                    if producer is not None and self.fits_prologue(producer, group):
                        group.prologues.append(producer)
                        self.owner[id(producer)] = group
                        changed = True

    def fits_prologue(self, op: Operator, group: FusionGroup) -> bool:
        """Whether `op` can be computed inside the group wherever its results are read."""
        if id(op) not in self.index or id(op) in self.owner or not op.task.is_injective:
            return False
        for t in op.outputs:
            if id(t) in self.graph_outputs or not all(group.contains(u) for u in self.users.get(id(t), [])):
                return False
        return not (self.reach[self.index[id(op)]] & self.mask(group))


def partition(graph: FlowGraph) -> FlowGraph:
    """`graph` with its fusion groups (see the module's docstring), in an order in which they can run."""
    return graph.with_groups(_Partitioner(graph).run())


def order_groups(groups: Sequence[FusionGroup]) -> list[FusionGroup]:
    """`groups` ordered so that each runs after the groups whose results it reads (graph order otherwise). A group
    caught in a cycle of dependencies is split into single-operator groups, which always order."""
    pending = list(groups)
    while True:
        ordered = _topological(pending)
        if ordered is not None:
            return ordered
        stuck = _cycle_members(pending)
        if not stuck:
            raise RuntimeError("the fusion groups depend on each other in a cycle that splitting does not break")
        pending = [g for g in pending if g not in stuck] + [single for g in stuck for single in split_all(g)]


def split_all(group: FusionGroup) -> list[FusionGroup]:
    """Each member of `group` as a group of its own."""
    return [FusionGroup(op, position=group.position) for op in group.members]


def detach(group: FusionGroup, ops: Iterable[Operator], note: str) -> list[FusionGroup]:
    """`group` without `ops` (and without the prologues that then have readers outside it), which become groups
    of their own; `note` (why) is kept on the remaining group."""
    removed = {id(op) for op in ops}
    kept_prologues = [op for op in group.prologues if id(op) not in removed]
    kept_epilogues = [op for op in group.epilogues if id(op) not in removed]
    while True:
        inside = {id(op) for op in (*kept_prologues, group.anchor, *kept_epilogues)}
        outside = [op for op in group.members if id(op) not in inside]
        leaking = [p for p in kept_prologues
                   if any(x is t for t in p.outputs for o in outside for x in o.inputs)]
        if not leaking:
            break
        kept_prologues = [p for p in kept_prologues if all(p is not q for q in leaking)]
    kept = FusionGroup(group.anchor, kept_prologues, kept_epilogues, [*group.notes, note], group.position)
    singles = [FusionGroup(op, position=group.position) for op in group.members if not kept.contains(op)]
    return [kept, *singles]


def _dependencies(groups: Sequence[FusionGroup]) -> dict[int, set[int]]:
    producer = {id(t): k for k, g in enumerate(groups) for op in g.members for t in op.outputs}
    deps: dict[int, set[int]] = {}
    for k, g in enumerate(groups):
        deps[k] = {producer[id(t)] for t in g.inputs() if id(t) in producer} - {k}
    return deps


def _topological(groups: Sequence[FusionGroup]) -> list[FusionGroup] | None:
    deps = _dependencies(groups)
    done: set[int] = set()
    order: list[FusionGroup] = []
    rank = sorted(range(len(groups)), key=lambda k: groups[k].position.get(id(groups[k].anchor), 0))
    while len(order) < len(groups):
        ready = next((k for k in rank if k not in done and deps[k] <= done), None)
        if ready is None:
            return None
        done.add(ready)
        order.append(groups[ready])
    return order


def _cycle_members(groups: Sequence[FusionGroup]) -> list[FusionGroup]:
    """The groups that cannot be ordered (those left when every orderable one is removed)."""
    deps = _dependencies(groups)
    done: set[int] = set()
    progress = True
    while progress:
        progress = False
        for k in range(len(groups)):
            if k not in done and deps[k] <= done:
                done.add(k)
                progress = True
    return [g for k, g in enumerate(groups) if k not in done and (g.prologues or g.epilogues)]

"""The intermediate buffers of a compiled graph, planned by liveness.

Kernels run in order; each intermediate tensor (written by one kernel, read by later ones, not a graph output)
lives from the kernel that writes it to the last kernel that reads it. A tensor gets a *slot*: the memory of an
earlier intermediate of the same dtype and number of elements (for every value of the symbolic dimensions) whose
last reader has run, or a new slot. A kernel's outputs never share memory with its inputs.

The run plan a compiled graph holds (`Plan`: its inputs, buffers in their slots, launches and outputs) is plain data
that `save` writes and reads back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stdlib_ops.dims import dim_product, dim_value, factors

Shape = tuple["int | str", ...]


@dataclass(frozen=True)
class SlotKind:
    """What makes two tensors' memory interchangeable: the dtype and the element count (a constant factor times a
    product of symbolic dimensions)."""

    dtype: str
    factor: int
    symbols: tuple[str, ...]

    @staticmethod
    def of(shape: Shape, dtype: str) -> SlotKind:
        """The kind of a tensor of `shape` and `dtype`."""
        names, factor = factors(dim_product(shape))
        return SlotKind(dtype, factor, names)

    def elements(self, sizes: Mapping[str, int]) -> int:
        """The number of elements for the symbolic dimensions' values `sizes`."""
        return self.factor * math.prod(sizes[s] for s in self.symbols)


@dataclass(frozen=True)
class MemoryPlan:
    """`slots[k]`: the kind of slot k; `slot_of[t]`: the slot of intermediate tensor `t`."""

    slots: tuple[SlotKind, ...]
    slot_of: dict[int, int]


def plan_memory(steps: Sequence[tuple[Sequence[int], Sequence[int]]],
                intermediates: Mapping[int, tuple[Shape, str]]) -> MemoryPlan:
    """Slots for the `intermediates` (tensor id -> shape, dtype) of `steps` (per kernel, in order: the ids it reads
    and the ids it writes); other ids are ignored."""
    last_read: dict[int, int] = {}
    for k, (reads, _) in enumerate(steps):
        for t in reads:
            last_read[t] = k
    slots: list[SlotKind] = []
    free: list[int] = []
    slot_of: dict[int, int] = {}
    for k, (reads, writes) in enumerate(steps):
        for t in writes:
            if t not in intermediates or t in slot_of:
                continue
            kind = SlotKind.of(*intermediates[t])
            reuse = next((s for s in free if slots[s] == kind), None)
            if reuse is None:
                slots.append(kind)
                reuse = len(slots) - 1
            else:
                free.remove(reuse)
            slot_of[t] = reuse
        for t in {*reads, *writes}:
            if t in slot_of and last_read.get(t, k) <= k:
                free.append(slot_of[t])
    return MemoryPlan(tuple(slots), slot_of)


Ref = tuple[str, "int | str"]  # ('input', i) | ('const', i) | ('buffer', i) | ('output', i) | ('size', name)


@dataclass(frozen=True)
class TensorSpec:
    """The shape (ints, and strings for symbolic dimensions) and dtype of a graph input, output or buffer."""

    shape: Shape
    dtype: str

    def resolve(self, sizes: dict[str, int]) -> tuple[int, ...]:
        """The concrete shape for the symbolic dimensions' values `sizes`."""
        return tuple(dim_value(d, sizes) for d in self.shape)


@dataclass(frozen=True)
class Launch:
    """One kernel launch: kernel `kernel` (an index into the graph's kernels) with `args`, one per parameter, and
    the floating-point operations it does (`flops`: a sum of dimensions, `stdlib_ops.graph.flops`; None where not
    known)."""

    kernel: int
    args: tuple[Ref, ...]
    flops: tuple[int | str, ...] | None = None


@dataclass(frozen=True)
class Plan:
    """How a compiled graph runs: its inputs, constants' specs, buffers (each in a slot), launches and outputs."""

    inputs: tuple[TensorSpec, ...]
    input_names: tuple[str, ...]
    buffers: tuple[tuple[TensorSpec, int], ...]
    slots: tuple[SlotKind, ...]
    launches: tuple[Launch, ...]
    outputs: tuple[tuple[Ref, TensorSpec], ...]

"""Tasks: one operator's computation and what fusion needs to know about it.

A `Task` holds its inputs (tensor variables), outputs (computed tensors), attributes, and for each input the
inverse map that allows an epilogue when there is one. How a task is scheduled on a target is chosen in one place,
`stdlib_ops.templates.registry.choose_schedule`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hidet_lang.ir.expr import Expr, Var
from hidet_lang.ir.functor import collect
from stdlib_ops.compute.nodes import ArgReduceExpr, ComputeTensor, ReduceExpr


@dataclass(frozen=True)
class InverseMap:
    """For one input of an injective task: the output index that each input index `axes` contributes to."""

    axes: tuple[Var, ...]
    indices: tuple[Expr, ...]


@dataclass(eq=False)
class Task:
    """One operator's computation: `outputs` computed from `inputs`, with `attrs` (scalars) that define it."""

    name: str
    inputs: tuple[Var, ...]
    outputs: tuple[ComputeTensor, ...]
    attrs: dict[str, object] = field(default_factory=dict)
    inverse_maps: dict[int, InverseMap] = field(default_factory=dict)

    @property
    def is_injective(self) -> bool:
        """True when no output involves a reduction (each output element reads a fixed set of input elements)."""
        return not any(collect(out, (ReduceExpr, ArgReduceExpr)) for out in self.outputs)

    @property
    def key(self) -> str:
        """Same computation on the same shapes and dtypes -> same key -> one compiled kernel."""
        attrs = ",".join(f"{k}={self.attrs[k]!r}" for k in sorted(self.attrs))
        ins = ";".join(f"{v.type}" for v in self.inputs)
        return f"{self.name}({attrs})[{ins}]"

    @property
    def kernel_name(self) -> str:
        """A C identifier for the task's kernel."""
        return re.sub(r"\W", "_", self.name)

    def __str__(self) -> str:
        return self.key

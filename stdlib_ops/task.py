"""Tasks: one operator's computation, what fusion needs to know about it, and how it is scheduled.

A `Task` holds its inputs (tensor variables), outputs (computed tensors), attributes, and for each input the
inverse map that allows an epilogue when there is one. `implement(target)` returns the scheduled IR modules: the
template registered for the task's name and target (`register_template`) when there is one and it accepts the
task, otherwise the rule-based scheduler's module (`stdlib_ops.schedule`). Every module follows the kernel
contract (one kernel; size parameters, inputs, outputs).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hidet_lang.ir.expr import Expr, Var
from hidet_lang.ir.func import IRModule
from hidet_lang.ir.functor import collect
from stdlib_ops.compute.nodes import ArgReduceExpr, ComputeTensor, ReduceExpr

Template = Callable[["Task"], "IRModule | list[IRModule] | None"]


@dataclass(frozen=True)
class InverseMap:
    """For one input of an injective task: the output index that each input index `axes` contributes to."""

    axes: tuple[Var, ...]
    indices: tuple[Expr, ...]


class TemplateRegistry:
    """Templates by (task name, target kind); a template returns IR module(s), or None to decline a task."""

    def __init__(self) -> None:
        self._templates: dict[tuple[str, str], Template] = {}

    def register(self, task: str | type, target: str) -> Callable[[Template], Template]:
        """Decorator: register a template for tasks named `task` (or of class `task`) on `target` ('cpu'/'cuda')."""
        name = task if isinstance(task, str) else task.__name__

        def decorate(template: Template) -> Template:
            self._templates[(name, _target_kind(target))] = template
            return template

        return decorate

    def lookup(self, task: Task, target: str) -> Template | None:
        """The template for `task` on `target`, by task name, then by the class name of the task."""
        kind = _target_kind(target)
        return self._templates.get((task.name, kind)) or self._templates.get((type(task).__name__, kind))


TEMPLATES = TemplateRegistry()
register_template = TEMPLATES.register


def _target_kind(target: str) -> str:
    return target.split(":", 1)[0]


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

    def check_target(self, target: str) -> None:
        """A TypeError naming the operator when `target` cannot compute its dtypes: bfloat16 only on CUDA (the C
        compilers of the CPU target have no bfloat16 arithmetic)."""
        dtypes = {v.type.dtype.name for v in self.inputs} | {o.dtype.name for o in self.outputs}
        if "bfloat16" in dtypes and _target_kind(target) == "cpu":
            raise TypeError(f"{self.name}: bfloat16 tensors are computed on 'cuda' only (the CPU target has no "
                            f"bfloat16 arithmetic); convert to float32 first (on 'cuda', or with numpy)")

    def implement(self, target: str) -> list[IRModule]:
        """The scheduled IR module(s) for `target` ('cpu', 'cuda' or 'cuda:sm_XY'): a template's, else the
        rule-based scheduler's."""
        template = TEMPLATES.lookup(self, target)
        if template is not None:
            result = template(self)
            if result is not None:
                return list(result) if isinstance(result, Sequence) else [result]
        from stdlib_ops.schedule import auto_schedule

        return [auto_schedule(self, target)]

    def __str__(self) -> str:
        return self.key

"""`TemplateBinding`: a task adapted to a template, before the template is instantiated.

An adapter (registered with `registry.library_template`, next to its template) adapts a task to the template's
canonical shapes: the kernel's name, the template, the task's kernel signature, the template's sizes as ints or
expressions of the task's sizes, the views of the task's tensors, and the template's other options (dtype, eps,
...). Instantiating the binding with a point of the template's tuning space (its schedule parameters) gives the
task's kernel; a tuner reads the same binding as plain data (`template_ref`, sizes, options) to rebuild the
template for concrete sizes in a worker. `shape_of` and `common_dtype` read what every adapter checks of a task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hidet_lang.frontend.script import ScriptModule
from hidet_lang.ir import expr as E
from hidet_lang.ir.func import IRModule
from hidet_lang.ir.types import TensorType
from hidet_lang.target import Target
from stdlib_ops.schedule.signature import KernelSignature
from stdlib_ops.task import Task
from stdlib_ops.templates.space import Point, TuningSpace, space_of, template_ref
from stdlib_ops.templates.views import Dim, View, bind_template

Instantiate = Callable[..., ScriptModule]


@dataclass(frozen=True)
class TemplateBinding:
    """`template` bound to a task's kernel `signature`: its kernel named `name`, its size parameters given by
    `sizes` (ints, or expressions of the task's sizes), its tensors by `views`, its other keyword arguments by
    `options` (plain values: dtype names, numbers, flags). A template whose kernel needs a CUDA architecture
    (`needs_arch`, e.g. 'sm_90a') names the binding taken on a target without it (`fallback`; None: the
    rule-based scheduler's). `flops`, where given, is the arithmetic the kernel does as a function of its sizes
    (ints), which a cost model weighs when it could take the fallback instead."""

    name: str
    template: Instantiate
    signature: KernelSignature
    sizes: Mapping[str, Dim]
    views: Sequence[View]
    options: Mapping[str, Any] = field(default_factory=dict)
    needs_arch: str | None = None
    fallback: TemplateBinding | None = None
    flops: Callable[[Mapping[str, int]], float] | None = None

    @property
    def space(self) -> TuningSpace | None:
        """The tuning space the template declares, if any."""
        return space_of(self.template)

    @property
    def template_ref(self) -> str:
        """The template as plain data (`module:qualname`)."""
        return template_ref(self.template)

    def for_target(self, target: Target, prologue: bool = False) -> TemplateBinding | None:
        """This binding, or the first of its fallbacks whose architecture `target` has (None when none has); with
        `prologue` (a prologue is to be fused into the kernel's inputs), also the first whose kernel reads its
        inputs by elements (not a whole tensor, as a tensor map, which no prologue can ride)."""
        binding: TemplateBinding | None = self
        while binding is not None and not binding._takes(target, prologue):
            binding = binding.fallback
        return binding

    def _takes(self, target: Target, prologue: bool) -> bool:
        if self.needs_arch is not None and not target.has_arch(self.needs_arch):
            return False
        return not (prologue and any(view.whole for view in self.views))

    def instantiate(self, params: Point | None = None) -> IRModule | None:
        """The task's kernel module: the template instantiated with schedule parameters `params` (its defaults
        when None) and bound to the task; None when a size known at build time is not positive.

        Sizes that are ints are constants of the template; the others are symbolic sizes, which the binding
        replaces by their expressions."""
        if any(isinstance(d, int) and d < 1 for d in self.sizes.values()):
            return None
        given = {key: d if isinstance(d, int) else key for key, d in self.sizes.items()}
        module = self.template(**given, **self.options, **(params or {})).ir_module()
        return bind_template(module, self.name, self.sizes, self.views, self.signature)


def shape_of(tensor: E.Var | E.Expr) -> tuple[Dim, ...]:
    """The shape of a task input or output."""
    t = tensor.type
    assert isinstance(t, TensorType)
    return tuple(t.shape)


def common_dtype(task: Task, allowed: tuple[str, ...]) -> str | None:
    """The dtype every input and output of `task` has, when there is one and it is in `allowed`."""
    dtypes = {v.type.dtype.name for v in task.inputs} | {o.dtype.name for o in task.outputs}
    return dtypes.pop() if len(dtypes) == 1 and next(iter(dtypes)) in allowed else None

"""The mechanism that registers templates for the tasks they implement and chooses each task's schedule.

`TEMPLATES` holds one template per (task name, target kind): a user's, registered with `register_template`, or one
of the library's, registered with `library_template` next to its schedule (the modules of
`stdlib_ops.templates.kernels`, which register themselves when the templates package is imported). A library
registration is an adapter: a function of a task giving its `TemplateBinding` to a template's canonical shapes, or
None to decline it (the rule-based scheduler schedules it then); the registered template instantiates the binding
with the schedule parameters `schedule_params` chooses (a tuned winner recorded for this machine, else the
template's default point; see `stdlib_ops.tuning`). `binding_of` gives a tuner the binding, and `choose_schedule`
is the one place a task's schedule is chosen.

The bound kernel is named after its template (`matmul_cuda`, `softmax_cuda`, `softmax_cpu`, ...), which says which
schedule a task got; it follows the kernel contract with the task's own signature (see `views.bind_template`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from codegen import with_device_arch
from hidet_lang import option
from hidet_lang.ir.func import IRModule
from hidet_lang.passes.kind_rules import intrinsic_lacking
from hidet_lang.target import Target
from stdlib_ops.schedule import auto_schedule
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding
from stdlib_ops.templates.space import Point

Template = Callable[[Task], "IRModule | list[IRModule] | None"]
"""A user's template: a function of a task returning its scheduled module(s), or None to decline it."""
Adapter = Callable[[Task], TemplateBinding | None]
"""A library template: a function of a task returning its binding to one of the library's templates (instantiated
with the schedule parameters `schedule_params` chooses), or None to decline it."""


class TemplateRegistry:
    """Templates by (task name, target kind): a user's (`Template`) or the library's (`Adapter`)."""

    def __init__(self) -> None:
        self._templates: dict[tuple[str, str], Template | Adapter] = {}

    def register(self, task: str | type, target: str) -> Callable[[Template], Template]:
        """Decorator: register a template for tasks named `task` (or of class `task`) on `target` ('cpu'/'cuda');
        it replaces the template registered there before, the library's included."""
        name = task if isinstance(task, str) else task.__name__

        def decorate(template: Template) -> Template:
            self._templates[(name, Target.of(target).kind)] = template
            choices_changed()
            return template

        return decorate

    def lookup(self, task: Task, target: Target | str) -> Template | Adapter | None:
        """The template for `task` on `target`, by task name, then by the class name of the task."""
        kind = Target.of(target).kind
        return self._templates.get((task.name, kind)) or self._templates.get((type(task).__name__, kind))


TEMPLATES = TemplateRegistry()
register_template = TEMPLATES.register

_LIBRARY: set[Adapter] = set()  # the registered templates that are the library's


def library_template(task: str, target: str) -> Callable[[Adapter], Adapter]:
    """Decorator: register the decorated adapter as the library's template for tasks named `task` on `target`: it
    binds a task to one of the library's templates (or declines it, returning None), which `choose_schedule`
    instantiates with the schedule parameters `schedule_params` chooses."""

    def decorate(adapt: Adapter) -> Adapter:
        _LIBRARY.add(adapt)
        return register_template(task, target)(adapt)

    return decorate


def is_library_template(template: Template | Adapter) -> bool:
    """Whether `template` is one of the library's (registered with `library_template`), not a user's."""
    return template in _LIBRARY


def binding_of(task: Task, target: Target | str) -> TemplateBinding | None:
    """The binding of `task` to the library template registered for it on `target` (the fallback its architecture
    takes); None when the task's registered template is not one of the library's (or none is), or declines the
    task."""
    template = TEMPLATES.lookup(task, target)
    binding = template(task) if template in _LIBRARY else None
    return None if binding is None else binding.for_target(Target.of(target))


def schedule_params(binding: TemplateBinding, target: Target) -> Point | None:
    """The schedule parameters `binding`'s template is instantiated with on `target`: None when the template
    declares no tuning space (its own defaults), otherwise the winner recorded for this machine (its CPU, or its GPU
    for a CUDA target) and the binding's shape class when there is one (`stdlib_ops.tuning.records`), else the
    space's default point."""
    space = binding.space
    if space is None:
        return None
    from stdlib_ops.tuning.records import recorded_winner  # the tuning package builds on this registry

    return recorded_winner(binding, space, target) or dict(space.default)


# ----------------------------------------------------------------------------------------- choosing a schedule


@dataclass(frozen=True)
class Schedule:
    """How a task is implemented on a target: its scheduled IR `modules` (candidates, each following the kernel
    contract; the first is the one built), the schedule parameters a tunable library template was instantiated
    with (`params`; None for other schedules), and `key`: the task's key, the target and the schedule in one
    string, by which eager calls and graphs alike cache the compiled kernel (equal keys, one kernel)."""

    modules: tuple[IRModule, ...]
    params: Point | None
    key: str

    @property
    def module(self) -> IRModule:
        """The module that is built."""
        return self.modules[0]


_SCHEDULES: dict[str, Schedule] = {}  # by the key of what was asked (template and parameters); see choose_schedule
_generation = 0


def choose_schedule(task: Task, target: Target | str, *, prologue: bool = False) -> Schedule:
    """How `task` is implemented on `target` ('cpu', 'cuda' or 'cuda:sm_XY'): the template registered for it (a
    user's, or the library's at the winner recorded for this machine by a tuning run, else at its tuning space's
    default point; its fallback where the target lacks the architecture its kernel needs, or where a `prologue` is
    to be fused and its kernel reads an input whole, by TMA), or the rule-based scheduler's module when there is
    none, or it declines the task, or a library template's kernel needs a CUDA architecture newer than the target's.

    This is the only place a task's schedule is chosen; it is looked up again on every call (a new record or
    template is taken), and each distinct schedule is instantiated once per process. A 'cuda' target without an
    architecture chooses for the GPU's where it runs on one (`with_device_arch`)."""
    target = with_device_arch(Target.of(target))
    template = TEMPLATES.lookup(task, target)
    if template in _LIBRARY:
        binding = template(task)
        binding = None if binding is None else binding.for_target(target, prologue)
        if binding is not None:
            params = schedule_params(binding, target)
            chosen = f"{binding.template_ref}{'' if params is None else json.dumps(params, sort_keys=True)}"
            return _memo(task, target, chosen, params, lambda: _runnable(binding.instantiate(params), target))
    elif template is not None:
        user = f"{template.__module__}.{template.__qualname__}#{id(template)}"
        return _memo(task, target, user, None, lambda: template(task))
    return _rules(task, target)


def prologue_alternatives(task: Task, target: Target | str) -> tuple[TemplateBinding, TemplateBinding] | None:
    """The library bindings `choose_schedule` takes for `task` on `target` without a prologue and with one to fuse,
    where they differ (the first reads an input whole, as a tensor map, which no prologue can ride); None where a
    prologue changes nothing (the same binding, a user's template, the rule-based scheduler)."""
    target = with_device_arch(Target.of(target))
    template = TEMPLATES.lookup(task, target)
    binding = template(task) if template in _LIBRARY else None
    if binding is None:
        return None
    plain, fused = binding.for_target(target), binding.for_target(target, prologue=True)
    if plain is None or fused is None or plain is fused:
        return None
    return plain, fused


def _memo(task: Task, target: Target, chosen: str, params: Point | None,
          instantiate: Callable[[], IRModule | Sequence[IRModule] | None]) -> Schedule:
    """The schedule `chosen` (a template and its parameters) makes of `task`, instantiated on first use; the
    rule-based one where the template declines."""
    key = f"{task.key}@{target}|{chosen}"
    schedule = _SCHEDULES.get(key)
    if schedule is None:
        result = instantiate()
        if result is None:
            schedule = _rules(task, target)
        else:
            modules = tuple(result) if isinstance(result, Sequence) else (result,)
            schedule = Schedule(modules, params, key)
        _SCHEDULES[key] = schedule
    return schedule


def _runnable(module: IRModule | None, target: Target) -> IRModule | None:
    """`module`, or None when it uses an intrinsic that `target`'s CUDA architecture lacks (a library template
    then leaves the task to the rule-based scheduler, as when it declines it); a target without an architecture
    builds for the device's, which the build checks."""
    if module is None or target.arch is None:
        return module
    return None if intrinsic_lacking(module, target) is not None else module


def _rules(task: Task, target: Target) -> Schedule:
    """The rule-based scheduler's schedule of `task`."""
    key = f"{task.key}@{target}|rules"
    schedule = _SCHEDULES.get(key)
    if schedule is None:
        schedule = _SCHEDULES[key] = Schedule((auto_schedule(task, target),), None, key)
    return schedule


def choices_generation() -> int:
    """A number that changes whenever a schedule choice may have changed (a template registered, a tuning record
    written): caches of choices made without `choose_schedule` (the eager calls') are dropped when it does."""
    return _generation


def choices_changed() -> None:
    """Say that a schedule choice may have changed (a template registered, a tuning record written)."""
    global _generation
    _generation += 1


option.when_choices_change(choices_changed)  # allow_tf32 decides between templates

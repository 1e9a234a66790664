"""The mechanism that registers templates for the tasks they implement and chooses each task's schedule.

`TEMPLATES` holds one template per (task name, target kind): a user's, registered with `register_template`, or one
of the library's, registered with `library_template` next to its schedule (the modules of
`stdlib_ops.templates.kernels`, which register themselves when the templates package is imported). A library
registration is an adapter: a function of a task giving its `TemplateBinding` to a template's canonical shapes, or
None to decline it (the rule-based scheduler schedules it then); the registered template instantiates the binding
with the schedule parameters `schedule_params` chooses (a tuned winner recorded for this machine, else the
template's default point; see `stdlib_ops.tuning`).

`template_choice` is the one place a task's template is looked up and bound for a target; `choose_schedule`
instantiates its answer (once per schedule key, in `_SCHEDULES`), and `binding_of` (what a tuner tunes) and
`prologue_alternatives` (what a prologue costs the graph builder) are views of its answer. The compiled kernels are
cached by the schedule's key (`stdlib_ops.runtime.kernels.KERNELS`); memos of what is derived from choices under
another key (the eager calls', the graph builder's fused kernels) are `ChoiceMemo`s, emptied when a choice may have
changed (`choice_memo`). `stdlib_ops.templates.table` lists the registrations.

The bound kernel is named after its template (`matmul_cuda`, `softmax_cuda`, `softmax_cpu`, ...), which says which
schedule a task got; it follows the kernel contract with the task's own signature (see `views.bind_template`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from codegen import with_device_arch
from hidet_lang.ir.func import IRModule
from hidet_lang.passes.kind_rules import intrinsic_lacking
from hidet_lang.target import Target, TargetKind
from stdlib_ops.schedule import auto_schedule
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding
from stdlib_ops.templates.choice_memo import choices_changed
from stdlib_ops.templates.space import Point

Template = Callable[[Task], "IRModule | list[IRModule] | None"]
"""A user's template: a function of a task returning its scheduled module(s), or None to decline it."""
Adapter = Callable[[Task], TemplateBinding | None]
"""A library template: a function of a task returning its binding to one of the library's templates (instantiated
with the schedule parameters `schedule_params` chooses), or None to decline it."""


@dataclass(frozen=True)
class Registration:
    """A template registered for the tasks named `task` on targets of `kind`: a user's (`Template`) or, where
    `library`, one of the library's (`Adapter`); `number` orders the registrations (a schedule made with a user's
    template names its registration, so a template registered again is never confused with the one before)."""

    task: str
    kind: TargetKind
    template: Template | Adapter
    library: bool
    number: int


class TemplateRegistry:
    """Templates by (task name, target kind): a user's (`Template`) or the library's (`Adapter`)."""

    def __init__(self) -> None:
        self._registrations: dict[tuple[str, TargetKind], Registration] = {}
        self._count = 0

    def register(self, task: str | type, target: Target | str) -> Callable[[Template], Template]:
        """Decorator: register a template for tasks named `task` (or of class `task`) on `target` ('cpu'/'cuda', or
        a `Target`: its kind); it replaces the template registered there before, the library's included. The users'
        entry point (`register_template`): it reads a spelling once."""
        return self._registering(task, Target.of(target), library=False)

    def _registering(self, task: str | type, target: Target, library: bool) -> Callable[[Template], Template]:
        name = task if isinstance(task, str) else task.__name__

        def decorate(template: Template) -> Template:
            self._count += 1
            self._registrations[(name, target.kind)] = Registration(name, target.kind, template, library,
                                                                    self._count)
            choices_changed()
            return template

        return decorate

    def lookup(self, task: Task, target: Target) -> Registration | None:
        """The registration for `task` on `target`, by task name, then by the class name of the task."""
        found = self._registrations.get((task.name, target.kind))
        return found or self._registrations.get((type(task).__name__, target.kind))

    def __iter__(self) -> Iterator[Registration]:
        """The registrations in force, in the order they were made."""
        return iter(sorted(self._registrations.values(), key=lambda r: r.number))


TEMPLATES = TemplateRegistry()
register_template = TEMPLATES.register
LIBRARY_CPU = Target(TargetKind.CPU)
"""The target the library's CPU templates register for (`library_template`; a registration is by target kind)."""
LIBRARY_CUDA = Target(TargetKind.CUDA)
"""The target the library's CUDA templates register for."""


def library_template(task: str, target: Target) -> Callable[[Adapter], Adapter]:
    """Decorator: register the decorated adapter as the library's template for tasks named `task` on targets of
    `target`'s kind (`LIBRARY_CPU`, `LIBRARY_CUDA`): it
    binds a task to one of the library's templates (or declines it, returning None), which `choose_schedule`
    instantiates with the schedule parameters `schedule_params` chooses."""
    return TEMPLATES._registering(task, target, library=True)


def schedule_params(binding: TemplateBinding, target: Target) -> Point | None:
    """The schedule parameters `binding`'s template is instantiated with on `target`: None when the template
    declares no tuning space (its own defaults), otherwise the winner recorded for this machine (its CPU, or its GPU
    for a CUDA target) and the binding's shape class when there is one (`stdlib_ops.tuning.records`), else the
    space's default point."""
    space = binding.space
    if space is None:
        return None
    from stdlib_ops.tuning.records import recorded_winner  # the tuning package's face (`tune`) builds on this registry

    return recorded_winner(binding, space, target) or dict(space.default)


@dataclass(frozen=True)
class TemplateChoice:
    """The registry's answer for `task` on `target` (its architecture resolved: `with_device_arch`), before any
    template is instantiated: the `registration` found (None: none), the library `binding` taken for the target
    (None for a user's template, or where the library's declines the task or the target has the architecture of
    none of its bindings; then the rule-based scheduler schedules the task) and the schedule parameters it is
    instantiated with (`params`)."""

    task: Task
    target: Target
    registration: Registration | None
    binding: TemplateBinding | None = None
    params: Point | None = None

    @property
    def by_template(self) -> bool:
        """Whether a template (a user's, or a library binding) makes the task's kernel, not the rule-based
        scheduler."""
        return self.registration is not None and (not self.registration.library or self.binding is not None)

    @property
    def key(self) -> str:
        """The task's key, the target and the template chosen (with its parameters) in one string: the key of the
        schedule it makes, unless the template declines the task when instantiated."""
        return f"{self.task.key}@{self.target}|{self._chosen()}"

    def _chosen(self) -> str:
        if self.binding is not None:
            params = "" if self.params is None else json.dumps(self.params, sort_keys=True)
            return f"{self.binding.template_ref}{params}"
        if self.by_template:
            template = self.registration.template
            return f"{template.__module__}.{template.__qualname__}#{self.registration.number}"
        return "rules"


def template_choice(task: Task, target: Target, *, prologue: bool = False) -> TemplateChoice:
    """Which template makes `task`'s kernel on `target`, bound how and with which schedule parameters: the template
    registered for it (a user's; or the library's, bound for the target: the binding or the first of its fallbacks
    whose architecture the target has, and whose kernel reads its inputs by elements where a `prologue` is to be
    fused, at the winner recorded for this machine by a tuning run, else at its tuning space's default point), or
    none (the rule-based scheduler's). A 'cuda' target without an architecture chooses for the GPU's where it runs
    on one (`with_device_arch`).

    This is the only place a template is looked up and bound; it is asked again on every call, so a new record or
    template is taken."""
    target = with_device_arch(target)
    registration = TEMPLATES.lookup(task, target)
    if registration is None or not registration.library:
        return TemplateChoice(task, target, registration)
    binding = registration.template(task)
    binding = None if binding is None else binding.for_target(target, prologue)
    if binding is None:
        return TemplateChoice(task, target, registration)
    return TemplateChoice(task, target, registration, binding, schedule_params(binding, target))


def binding_of(task: Task, target: Target) -> TemplateBinding | None:
    """The binding of `task` to the library template `choose_schedule` instantiates for it on `target` (the
    fallback its architecture takes); None when the task's registered template is not one of the library's (or none
    is), or declines the task."""
    return template_choice(task, target).binding


def prologue_alternatives(task: Task, target: Target) -> tuple[TemplateBinding, TemplateBinding] | None:
    """The library bindings `choose_schedule` takes for `task` on `target` without a prologue and with one to fuse,
    where they differ (the first reads an input whole, as a tensor map, which no prologue can ride); None where a
    prologue changes nothing (the same binding, a user's template, the rule-based scheduler)."""
    plain = template_choice(task, target).binding
    if plain is None:
        return None
    fused = template_choice(task, target, prologue=True).binding
    if fused is None or (fused.name, fused.template) == (plain.name, plain.template):
        return None
    return plain, fused


# ----------------------------------------------------------------------------------------- choosing a schedule


@dataclass(frozen=True)
class Schedule:
    """How a task is implemented on a target: its scheduled IR `modules` (candidates, each following the kernel
    contract; the first is the one built), the schedule parameters a tunable library template was instantiated
    with (`params`; None for other schedules), and `key`: the task's key, the target and the schedule in one
    string, by which eager calls and graphs alike cache the compiled kernel (equal keys, one kernel:
    `stdlib_ops.runtime.kernels.KERNELS`)."""

    modules: tuple[IRModule, ...]
    params: Point | None
    key: str

    @property
    def module(self) -> IRModule:
        """The module that is built."""
        return self.modules[0]


_SCHEDULES: dict[str, Schedule] = {}  # by `TemplateChoice.key`: each distinct schedule instantiated once


def choose_schedule(task: Task, target: Target, *, prologue: bool = False) -> Schedule:
    """How `task` is implemented on `target`: the template `template_choice` finds instantiated (with a `prologue`
    to fuse or not), or the rule-based scheduler's module where there is none, it declines the task, or its kernel
    uses an intrinsic the target's CUDA architecture lacks.

    This is the only place a task's schedule is chosen; the choice is made again on every call (a new record or
    template is taken), and each distinct schedule is instantiated once per process."""
    choice = template_choice(task, target, prologue=prologue)
    schedule = _SCHEDULES.get(choice.key)
    if schedule is None:
        schedule = _SCHEDULES[choice.key] = _instantiate(choice)
    return schedule


def _instantiate(choice: TemplateChoice) -> Schedule:
    """The schedule `choice` makes: its template instantiated, or the rule-based scheduler's where there is none or
    it declines the task."""
    result: IRModule | Sequence[IRModule] | None = None
    if choice.binding is not None:
        result = _runnable(choice.binding.instantiate(choice.params), choice.target)
    elif choice.by_template:
        result = choice.registration.template(choice.task)
    if result is None:
        return _rules(choice.task, choice.target)
    modules = tuple(result) if isinstance(result, Sequence) else (result,)
    return Schedule(modules, choice.params, choice.key)


def _runnable(module: IRModule | None, target: Target) -> IRModule | None:
    """`module`, or None when it uses an intrinsic that `target`'s CUDA architecture lacks (a library template
    then leaves the task to the rule-based scheduler, as when it declines it); a target without an architecture
    builds for the device's, which the build checks."""
    if module is None or target.arch is None:
        return module
    return None if intrinsic_lacking(module, target) is not None else module


def _rules(task: Task, target: Target) -> Schedule:
    """The rule-based scheduler's schedule of `task` (instantiated once, under its own key)."""
    key = f"{task.key}@{target}|rules"
    schedule = _SCHEDULES.get(key)
    if schedule is None:
        schedule = _SCHEDULES[key] = Schedule((auto_schedule(task, target),), None, key)
    return schedule

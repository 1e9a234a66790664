"""Which task goes to which template: a table generated from the registrations (`registry.TEMPLATES`), which
`python -m stdlib_ops.templates` prints and README.md copies (a test keeps the copy current).

A library registration is an adapter, which picks among templates by the task it is given (its dtype, shapes,
attributes, the options); the templates it may bind are the functions returning a script module that its code
reaches: the globals its code names, the helpers of the library it calls, the values it was registered with (a
`functools.partial`'s, a mapping's entry for the task's name where the mapping is keyed by task names). A template
that a binding takes only on some CUDA architecture (`TemplateBinding(..., needs_arch=...)` where its code binds
the template) is listed with that architecture: elsewhere the task takes the binding's fallback. A template is
tunable where it declares a tuning space (`space.declare_space`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from stdlib_ops.templates.registry import TEMPLATES, Registration
from stdlib_ops.templates.space import space_of

LIBRARY_PREFIX = "stdlib_ops.templates"
"""The modules whose functions an adapter's code is followed into."""
KERNELS_PREFIX = "stdlib_ops.templates.kernels."
"""The package of the library's templates, which the table leaves out of the names of their adapters."""


@dataclass(frozen=True)
class TemplateRow:
    """One template a registration may bind a task to: the task's name, the target kind, the template's name,
    the CUDA architecture its binding needs (None: any; elsewhere the binding's fallback is taken), whether it
    declares a tuning space, the registered function (`module.function`, the module's name relative to
    `stdlib_ops.templates.kernels` for the library's; a user's template is its own template) and whether it is the
    library's."""

    task: str
    target: str
    template: str
    needs_arch: str | None
    tunable: bool
    registered: str
    library: bool = True


def template_table() -> list[TemplateRow]:
    """The rows of the registrations in force, by task name and target kind, each registration's templates in the
    order its code reaches them."""
    rows: list[TemplateRow] = []
    for registration in sorted(TEMPLATES, key=lambda r: (r.task, str(r.kind))):
        rows.extend(_rows_of(registration))
    return rows


def markdown() -> str:
    """The library's rows as README.md shows them: a markdown table with its columns aligned, so that it reads as
    text too."""
    header = ("task", "target", "template", "arch", "tunable", "registered by")
    rows = [row for row in template_table() if row.library]
    cells = [header] + [(row.task, row.target, f"`{row.template}`", row.needs_arch or "",
                         "yes" if row.tunable else "", f"`{row.registered}`") for row in rows]
    widths = [max(len(line[k]) for line in cells) for k in range(len(header))]
    lines = ["| " + " | ".join(cell.ljust(width) for cell, width in zip(line, widths)) + " |" for line in cells]
    lines.insert(1, "|" + "|".join("-" * (width + 2) for width in widths) + "|")
    return "\n".join(lines) + "\n"


def _rows_of(registration: Registration) -> list[TemplateRow]:
    """The rows of one registration: a user's template is its own row; a library adapter has one row a template
    its code reaches."""
    adapter = registration.template
    function = adapter.func if isinstance(adapter, functools.partial) else adapter
    registered = f"{function.__module__.removeprefix(KERNELS_PREFIX)}.{function.__qualname__}"
    if not registration.library:
        return [TemplateRow(registration.task, str(registration.kind), function.__qualname__, None, False,
                            registered, library=False)]
    arches: dict[int, str] = {}
    templates = list(_reached(adapter, registration.task, arches, set()))
    return [TemplateRow(registration.task, str(registration.kind), template.__name__, arches.get(id(template)),
                        space_of(template) is not None, registered) for template in templates]


def _reached(value: Any, task: str, arches: dict[int, str], seen: set[int]) -> Iterator[types.FunctionType]:
    """The templates `value` (an adapter, or what its code names) reaches, each once, in the order reached; the
    architecture each binding of them needs is noted in `arches` (by the template's id)."""
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, functools.partial):
        for part in (value.func, *value.args, *value.keywords.values()):
            yield from _reached(part, task, arches, seen)
    elif isinstance(value, Mapping):
        yield from _reached(value[task] if task in value else list(value.values()), task, arches, seen)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _reached(item, task, arches, seen)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _reached(getattr(value, field.name), task, arches, seen)
    elif isinstance(value, types.FunctionType) and value.__module__.startswith(LIBRARY_PREFIX):
        if _is_template(value):
            yield value
            return
        arches.update(_needed_arches(value))
        for name in _global_names(value.__code__):
            if name in value.__globals__:
                yield from _reached(value.__globals__[name], task, arches, seen)


def _is_template(function: types.FunctionType) -> bool:
    """Whether `function` is a template: a function returning a script module."""
    returns = function.__annotations__.get("return")
    return returns == "ScriptModule" or getattr(returns, "__name__", None) == "ScriptModule"


def _global_names(code: types.CodeType) -> Iterator[str]:
    """The names `code` and the functions nested in it look up, in order."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _global_names(const)


def _needed_arches(function: types.FunctionType) -> dict[int, str]:
    """The architectures `function`'s bindings need, by the id of the template they bind: each
    `TemplateBinding(name, template, ..., needs_arch='sm_XY')` in its source whose template is a global."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return {}
    needed: dict[int, str] = {}
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "TemplateBinding"
                and len(call.args) > 1 and isinstance(call.args[1], ast.Name)):
            continue
        template = function.__globals__.get(call.args[1].id)
        for keyword in call.keywords:
            if keyword.arg == "needs_arch" and isinstance(keyword.value, ast.Constant) and template is not None:
                needed[id(template)] = keyword.value.value
    return needed

"""Loop constructs: what a kernel's `for` loop can iterate over, each building its own loop statement.

`for <names> in <iterable>:` evaluates the iterable while parsing and asks `loop_construct` for the
`LoopConstruct` it stands for; the construct builds the loop's IR through the narrow `LoopBuilder` interface of
the parser. The constructs:

- `RangeLoop`: `range(start, stop, step)` (Python's `range` with host bounds, or a call with IR bounds), one
  run-time loop;
- `GridLoop`: `grid(m, n, attrs='p.')`, nested run-time loops, each plain, unrolled or parallel;
- `MappingLoop`: `mapping.on(worker)`, the tasks of one worker under a task mapping;
- `UnrolledLoop`: `meta.range(...)`, `meta.each(...)` and Python tuples and lists, unrolled while parsing.

A new loop kind needs no parser change: a host function (like `grid`) returns an instance of a new
`LoopConstruct` subclass, or `register_loop_construct` adapts values of an existing type (as it does for
`range`, `MappingOn`, tuples and lists here).
"""

from __future__ import annotations

import ast
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

from hidet_lang.errors import DSLError, DSLSyntaxError, DSLTypeError, DSLValueError
from hidet_lang.frontend import semantics
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.loop_attrs import LoopAttr
from hidet_lang.ir.mapping import MappingOn, TaskMapping
from hidet_lang.ir.types import DataType, int32


class ConstructBuilder(Protocol):
    """What a loop or block construct (`blocks.py`) may ask of the parser."""

    def error(self, node: ast.AST, message: str, cls: type[DSLError] = DSLTypeError) -> DSLError:
        """A DSL error of class `cls` at `node`."""

    def host_call(self, node: ast.AST, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a Python function while parsing, turning its errors into DSL errors at `node`."""

    def fresh_name(self, hint: str) -> str:
        """A variable name unique in the function, based on `hint`."""


class LoopBuilder(ConstructBuilder, Protocol):
    """What a loop construct may ask of the parser."""

    def loop_body(self, body: list[ast.stmt], bindings: dict[str, Any] | None = None, unrolled: bool = False) -> S.Stmt:
        """The parsed body of a loop, with its variables bound (`unrolled`: a loop unrolled while parsing)."""

    def unpack(self, target: ast.expr, names: list[str], value: Any) -> dict[str, Any]:
        """Bindings of the loop variables of `target` (called `names`) to one Python value."""


class LoopConstruct(ABC):
    """Something a kernel's `for` loop iterates over."""

    @abstractmethod
    def build(self, parser: LoopBuilder, node: ast.For, names: list[str]) -> S.Stmt:
        """The IR of `for <names> in <self>: <node.body>`; errors at `node.iter` or `node.target`."""


_ADAPTERS: dict[type, Callable[[Any], LoopConstruct]] = {}
_LOOPABLE = "range(...), grid(...), mapping.on(worker) or meta.range(...)"


def register_loop_construct(kind: type, adapter: Callable[[Any], LoopConstruct]) -> None:
    """Let `for` loops iterate over values of type `kind` (and its subclasses): `adapter(value)` gives the
    construct; an adapter raises `TypeError` to refuse the value with a message."""
    _ADAPTERS[kind] = adapter


def loop_construct(value: Any) -> LoopConstruct:
    """The construct a `for` loop over `value` runs; a `TypeError` naming what can be looped over otherwise."""
    if isinstance(value, LoopConstruct):
        return value
    for cls in type(value).__mro__:
        adapter = _ADAPTERS.get(cls)
        if adapter is not None:
            return adapter(value)
    raise TypeError(f"cannot loop over {semantics.describe(value)}; use {_LOOPABLE}")


@dataclass(frozen=True)
class RangeLoop(LoopConstruct):
    """`range(start, stop, step)` as one run-time loop; the bounds are Python numbers or IR values."""

    start: Any
    stop: Any
    step: Any

    def build(self, parser: LoopBuilder, node: ast.For, names: list[str]) -> S.Stmt:
        """`for i in range(start, stop, step)`: a loop over the common index type of the bounds."""
        if len(names) != 1:
            raise parser.error(node.target, "range() gives one loop variable", DSLSyntaxError)
        start, stop, step = (parser.host_call(node.iter, E.convert, x) for x in (self.start, self.stop, self.step))
        if isinstance(step, E.Constant) and step.value == 0:
            raise parser.error(node.iter, "range() step must not be zero", DSLValueError)
        itype = parser.host_call(node.iter, semantics.index_type, [start, stop, step])
        var = E.Var(parser.fresh_name(names[0]), itype)
        body = parser.loop_body(node.body, {names[0]: var})
        start, stop, step = (semantics.convert_to(x, itype) for x in (start, stop, step))
        return S.ForStmt(var, start, stop, step, body)


@dataclass(frozen=True)
class GridLoop(LoopConstruct):
    """`grid(4, 4, attrs='p.')`: nested loops from 0 to each extent, each run as its `LoopAttr` says; with
    `bind_tuple` one loop name is bound to the list of indices even for a single dimension."""

    extents: tuple[Any, ...]
    attrs: tuple[LoopAttr, ...]
    bind_tuple: bool = False

    def build(self, parser: LoopBuilder, node: ast.For, names: list[str]) -> S.Stmt:
        """`for i, j in grid(m, n)` (one name per dimension), or `for ij in grid(m, n)` (a list of indices)."""
        extents = [parser.host_call(node.iter, E.convert, x) for x in self.extents]
        vars_ = []
        for k, ext in enumerate(extents):
            itype = parser.host_call(node.iter, semantics.index_type, [ext])
            hint = names[k] if len(names) == len(extents) else f"{names[0]}_{k}"
            vars_.append(E.Var(parser.fresh_name(hint), itype))
        bindings = loop_bindings(parser, node, names, vars_, self.bind_tuple, "grid has {dims} dimension(s)")
        body = parser.loop_body(node.body, bindings)
        for var, ext, attr in reversed(list(zip(vars_, extents, self.attrs))):
            stop = semantics.convert_to(ext, var.type)
            body = S.ForStmt(var, E.Constant(0, var.type), stop, E.Constant(1, var.type), body,
                             S.LoopKind(attr.kind), factor=attr.factor)
        return body


def loop_bindings(parser: LoopBuilder, node: ast.For, names: list[str], vars_: list[E.Var], bind_tuple: bool,
                  what: str) -> dict[str, Any]:
    """The loop names bound to the loop variables, as Hidet Script binds them: one name per variable, except that
    a single name binds the list of all of them when there are several or when `bind_tuple` asks for it (a list
    of one for one dimension). `what` names the dimensions in the error (`{dims}` is their number)."""
    if len(names) == 1 and (bind_tuple or len(vars_) > 1):
        return {names[0]: list(vars_)}
    if len(names) == len(vars_):
        return dict(zip(names, vars_))
    raise parser.error(node.target, f"{what.format(dims=len(vars_))} but the loop names {len(names)} variable(s)",
                       DSLValueError)


@dataclass(frozen=True)
class MappingLoop(LoopConstruct):
    """`mapping.on(worker)`: the tasks of one worker under a task mapping, one loop variable per coordinate (or
    one name for the list of them, as `grid` binds)."""

    on: MappingOn

    def build(self, parser: LoopBuilder, node: ast.For, names: list[str]) -> S.Stmt:
        """`for i, j in mapping.on(worker)`: checks the worker, then a task-mapping loop."""
        m = self.on.mapping
        dims = len(m.task_shape)
        worker = parser.host_call(node.iter, E.convert, self.on.worker)
        wt = worker.type
        if not (isinstance(wt, DataType) and wt.is_integer):
            raise parser.error(node.iter, f"a worker index must be an integer, got {semantics.describe(worker)}")
        if isinstance(worker, E.Constant) and not 0 <= worker.value < m.num_workers:
            raise parser.error(node.iter, f"worker {worker.value} is outside the mapping's {m.num_workers} workers",
                               DSLValueError)
        hints = names if len(names) == dims else [f"{names[0]}_{k}" for k in range(dims)]
        vars_ = [E.Var(parser.fresh_name(n), int32) for n in hints]
        bindings = loop_bindings(parser, node, names, vars_, self.on.bind_tuple,
                                 "the mapping's tasks have {dims} coordinate(s)")
        body = parser.loop_body(node.body, bindings)
        return S.ForMappingStmt(tuple(vars_), m, worker, body)


@dataclass(frozen=True)
class UnrolledLoop(LoopConstruct):
    """A loop unrolled while parsing: the body once per value, with the loop variables bound to Python values."""

    values: tuple[Any, ...]

    def build(self, parser: LoopBuilder, node: ast.For, names: list[str]) -> S.Stmt:
        """The body's IR for each value, in order."""
        return S.seq([parser.loop_body(node.body, parser.unpack(node.target, names, v), unrolled=True)
                      for v in self.values])


def _needs_a_worker(mapping: TaskMapping) -> NoReturn:
    raise TypeError("iterate over a task mapping through a worker: `for i, j in m.on(worker)`")


register_loop_construct(range, lambda r: RangeLoop(r.start, r.stop, r.step))
register_loop_construct(MappingOn, MappingLoop)
register_loop_construct(TaskMapping, _needs_a_worker)
register_loop_construct(tuple, lambda values: UnrolledLoop(tuple(values)))
register_loop_construct(list, lambda values: UnrolledLoop(tuple(values)))

"""The tolerance a run is checked with, from its arithmetic: a float result that sums n terms may differ from
numpy's by about n roundings of its dtype (another summation order, fused multiply-adds, vector lanes: what
differs between an AVX2 and an AVX-512 machine), so rtol = atol = eps(dtype) x (n + HEADROOM), where HEADROOM
covers the elementwise functions (libm's and numpy's exp, tanh, division differ in their last bits). Integers are
exact. The user's rtol/atol, typed in the page, replace it.

n, the length of the reductions, is read from what ran: for a script module, from its IR (the statements that
accumulate into a variable or an array element: the loops between the target's declaration and the statement that
do not index the target, their extents evaluated at the run's sizes); for a graph, from the reductions of its
operators' compute definitions. An extent that cannot be evaluated counts as the largest of the sizes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from hidet_lang.ir.evaluate import evaluate
from hidet_lang.ir.expr import Expr, TensorElement, Var
from hidet_lang.ir.functor import collect
from hidet_lang.ir.node import child_field_names
from hidet_lang.ir.stmt import AssignStmt, BufferStoreStmt, DeclareStmt, ForMappingStmt, ForStmt, Stmt, WhileStmt

HEADROOM = 8


@dataclass(frozen=True)
class Tolerance:
    """rtol and atol, and how they were chosen (as the page says it)."""

    rtol: float
    atol: float
    how: str

    def allowed(self, want: np.ndarray) -> np.ndarray:
        """The largest difference allowed from each element of `want`."""
        return self.atol + self.rtol * np.abs(want.astype(np.float64))


def arithmetic_tolerance(dtype: np.dtype, terms: int) -> Tolerance:
    """The tolerance of a result of `dtype` whose reductions sum `terms` terms."""
    if dtype.kind != "f":
        return Tolerance(0.0, 0.0, f"exact ({dtype})")
    eps = float(np.finfo(dtype).eps)
    value = eps * (terms + HEADROOM)
    return Tolerance(value, value, f"rtol = atol = eps({dtype}) {eps:.3g} x ({terms} summed terms + {HEADROOM}) "
                                   f"= {value:.3g}")


def chosen_tolerance(dtype: np.dtype, terms: int, rtol: float | None, atol: float | None) -> Tolerance:
    """The user's rtol and atol where given, the arithmetic's for the others."""
    arithmetic = arithmetic_tolerance(dtype, terms)
    if rtol is None and atol is None:
        return arithmetic
    r = arithmetic.rtol if rtol is None else rtol
    a = arithmetic.atol if atol is None else atol
    return Tolerance(r, a, f"rtol = {r:.3g}, atol = {a:.3g} (typed in the page; the arithmetic's: "
                           f"{arithmetic.how})")


def _fallback(sizes: dict[str, int]) -> int:
    return max([abs(v) for v in sizes.values()] + [1])


def _value(expr: Any, env: dict[Var, Any], sizes: dict[str, int]) -> int:
    """`expr` (an int or an IR expression) evaluated at the run's sizes, free variables by name, loop variables at
    their first value; the largest size when it cannot be evaluated."""
    if isinstance(expr, int | np.integer):
        return int(expr)
    try:
        bound = {**{v: sizes[v.name] for v in collect(expr, Var) if v.name in sizes}, **env}
        return int(evaluate(expr, {**{v: 0 for v in collect(expr, Var)}, **bound}))
    except Exception:  # an extent the evaluator cannot read: the largest size bounds it
        return _fallback(sizes)


class _Accumulations:
    """Walks a function's body, counting for each accumulated target the terms summed into one of its values."""

    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes
        self.loops: list[tuple[tuple[Var, ...], int]] = []
        self.declared: dict[Var, int] = {}  # variable -> how many loops enclose its declaration
        self.env: dict[Var, Any] = {}
        self.terms: dict[Any, int] = {}

    def walk(self, stmt: Stmt | None) -> None:
        """Count the accumulations of `stmt` and the statements in it."""
        if stmt is None:
            return
        if isinstance(stmt, ForStmt):
            start, stop, step = (_value(e, self.env, self.sizes) for e in (stmt.start, stmt.stop, stmt.step))
            self.env[stmt.var] = start
            self._loop((stmt.var,), max(math.ceil((stop - start) / step), 0) if step else 0, stmt.body)
        elif isinstance(stmt, ForMappingStmt):
            mapping = stmt.mapping
            per_worker = math.prod(mapping.task_shape) // max(mapping.num_workers, 1)
            self.env.update({v: 0 for v in stmt.loop_vars})
            self._loop(tuple(stmt.loop_vars), per_worker, stmt.body)
        elif isinstance(stmt, WhileStmt):
            self._loop((), _fallback(self.sizes), stmt.body)
        elif isinstance(stmt, DeclareStmt):
            self.declared[stmt.var] = len(self.loops)
        elif isinstance(stmt, AssignStmt) and stmt.var in collect(stmt.value, Var):
            self._count(stmt.var, ())
        elif isinstance(stmt, BufferStoreStmt) and any(
                e.base == stmt.buf and e.indices == stmt.indices for e in collect(stmt.value, TensorElement)):
            self._count(stmt.buf, stmt.indices)
        else:
            for child in _statements_in(stmt):
                self.walk(child)

    def _loop(self, variables: tuple[Var, ...], extent: int, body: Stmt) -> None:
        self.loops.append((variables, extent))
        self.walk(body)
        self.loops.pop()

    def _count(self, target: Any, indices: tuple[Expr, ...]) -> None:
        used = set(collect(indices, Var))
        depth = self.declared.get(target, 0) if isinstance(target, Var) else 0
        terms = math.prod(extent for variables, extent in self.loops[depth:] if not used & set(variables))
        self.terms[target] = self.terms.get(target, 0) + terms


def _statements_in(stmt: Stmt) -> list[Stmt]:
    """The statements directly inside `stmt` (a sequence's, an if's branches)."""
    children = []
    for name in child_field_names(type(stmt)):
        value = getattr(stmt, name)
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, Stmt):
                children.append(item)
    return children


def kernel_terms(functions: Any, sizes: dict[str, int]) -> int:
    """The longest reduction of a script module's `functions` (their IR), in terms summed into one value."""
    counter = _Accumulations(sizes)
    for function in functions:
        counter.walk(function.body)
    return max(counter.terms.values(), default=1)


def graph_terms(graph: Any, sizes: dict[str, int]) -> int:
    """The reductions of a graph's operators, in terms summed into one value, added up along the graph (each
    operator's result feeds the next)."""
    from stdlib_ops.compute.nodes import ReduceExpr  # the operator library loads only for programs with graphs

    total = 0
    for node in graph.nodes:
        lengths = [math.prod(_value(e, {}, sizes) for e in reduction.extents)
                   for output in node.task.outputs for reduction in collect(output.body, ReduceExpr)]
        total += max(lengths, default=0)
    return max(total, 1)

"""Assignments to shared scalars inside OpenMP parallel loops: reductions, or refused (`resolve_parallel_reductions`).

The iterations of a parallel loop (`grid(..., attrs='p')`) run on several threads at once, so a scalar declared
outside the loop and assigned inside it is shared by them. Two update shapes are reductions, which OpenMP
computes race-free with a `reduction` clause (each thread accumulates into a private copy, and the copies are
combined at the end of the loop):

- `acc += v` (also `acc = acc + v`, `acc = v + acc`, `acc -= v`): `+`; `acc *= v`: `*`;
- `acc = min(acc, v)` / `acc = max(acc, v)` (either argument order): `min` / `max`;

where `v` does not read `acc`. Any other assignment to such a variable, a variable updated with two different
operators, or a read of a reduction variable elsewhere in the loop (each thread would see its partial value) is
an error at its line. Variables declared inside the loop (and loop variables) are private to an iteration.
Stores into tensors are not checked: which elements each iteration writes is the program's business.
"""

from __future__ import annotations

import dataclasses

from hidet_lang.errors import DSLValueError
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import Function, IRModule
from hidet_lang.ir.functor import IRRewriter, collect, own_expressions
from hidet_lang.ir.types import DataType

REDUCTION_FORMS = "`x += v`, `x -= v`, `x *= v`, `x = min(x, v)` or `x = max(x, v)`"


def resolve_parallel_reductions(module: IRModule) -> IRModule:
    """Requires a parsed module whose kinds are resolved (parallel loops only in CPU functions). Ensures every
    parallel `ForStmt` lists the reductions of its body in `reductions` (the module itself where none has any);
    raises a DSLValueError at the first assignment, inside a parallel loop, to a scalar declared outside it that is
    not such a reduction."""
    functions = tuple(_annotated(f) for f in module.functions)
    return module if all(a is b for a, b in zip(functions, module.functions)) else IRModule(functions)


def _annotated(func: Function) -> Function:
    body = _Annotate().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)


class _Annotate(IRRewriter):
    def visit_ForStmt(self, s: S.ForStmt) -> S.Stmt:
        s = self.rebuild(s)
        if s.kind != S.LoopKind.PARALLEL:
            return s
        reductions = loop_reductions(s)
        return dataclasses.replace(s, reductions=reductions) if reductions else s


def loop_reductions(loop: S.ForStmt) -> tuple[tuple[str, E.Var], ...]:
    """The (operator, variable) reductions of parallel `loop`; a DSLValueError for any other assignment in it to
    a variable declared outside it."""
    private = {loop.var}
    for stmt in collect(loop.body, S.Stmt):
        if isinstance(stmt, S.DeclareStmt):
            private.add(stmt.var)
        elif isinstance(stmt, S.ForStmt):
            private.add(stmt.var)
        elif isinstance(stmt, S.ForMappingStmt):
            private.update(stmt.loop_vars)
    ops: dict[E.Var, str] = {}
    for stmt in collect(loop.body, S.AssignStmt):
        var = stmt.var
        if var in private:
            continue
        op = _reduction_operator(var, stmt.value)
        if op is None:
            raise DSLValueError(f"'{var.name}' is declared outside this parallel loop, whose iterations run at once "
                                f"on several threads: assigning it here races; only reductions ({REDUCTION_FORMS}, "
                                f"with v not reading '{var.name}') may update it; declare '{var.name}' inside the "
                                "loop for a value of one iteration", stmt.span)
        if ops.setdefault(var, op) != op:
            raise DSLValueError(f"'{var.name}' is reduced with both `{ops[var]}` and `{op}` in one parallel loop; "
                                "use one operator", stmt.span)
    for var in ops:
        for stmt in collect(loop.body, S.Stmt):
            if not (isinstance(stmt, S.AssignStmt) and stmt.var is var) and any(
                    _reads(e, var) for e in own_expressions(stmt)):
                raise DSLValueError(f"'{var.name}' is a reduction of this parallel loop and is read here, where "
                                    "each thread sees only its partial value; read it after the loop", stmt.span)
    return tuple((op, var) for var, op in ops.items())


def _reduction_operator(var: E.Var, value: E.Expr) -> str | None:
    """The OpenMP operator of `var = value` if it is a reduction update of `var`, else None."""
    if not isinstance(var.type, DataType) or var.type.is_bool:
        return None
    value = _uncast(value)
    if isinstance(value, E.BinaryOp) and value.op in ("+", "*", "-"):
        a, b = _uncast(value.a), _uncast(value.b)
        if a is var and not _reads(value.b, var):
            return "+" if value.op == "-" else value.op
        if value.op != "-" and b is var and not _reads(value.a, var):
            return value.op
    if isinstance(value, E.Intrinsic) and value.name in ("min", "max") and len(value.args) == 2:
        first, second = (_uncast(x) for x in value.args)
        if (first is var and not _reads(value.args[1], var)) or (second is var and not _reads(value.args[0], var)):
            return value.name
    return None


def _uncast(e: E.Expr) -> E.Expr:
    while isinstance(e, E.Cast):
        e = e.expr
    return e


def _reads(e: E.Expr, var: E.Var) -> bool:
    return any(v is var for v in collect(e, E.Var))

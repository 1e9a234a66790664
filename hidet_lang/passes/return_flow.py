"""The check that a function declared to return a value returns one on every path (`check_returns`).

The analysis is conservative: a statement "ends in a return" when it is `return value`, a sequence one of whose
statements ends in a return, an `if` with an `else` whose branches both do, or a loop whose condition is a
constant true (`while True:`) and that no `break` leaves (it can only be left by returning). Other loops may
run no iteration, so they never count.
"""

from __future__ import annotations

from hidet_lang.errors import DSLValueError
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import IRModule
from hidet_lang.ir.types import VoidType
from hidet_lang.passes.loop_exits import statements_leaving


def check_returns(module: IRModule) -> None:
    """Requires a parsed module. Raises a DSLValueError at the `def` line of the first function with a return
    type whose body can reach its end without `return value` (C would return an unspecified value)."""
    for func in module.functions:
        if not isinstance(func.ret_type, VoidType) and not ends_in_return(func.body):
            raise DSLValueError(f"'{func.name}' returns {func.ret_type} but can reach the end of its body without "
                                "a `return`; return a value on every path (a loop may run no iteration)",
                                func.span)


def ends_in_return(stmt: S.Stmt) -> bool:
    """Whether every way through `stmt` ends in a `return` (see the module docstring)."""
    if isinstance(stmt, S.ReturnStmt):
        return True
    if isinstance(stmt, S.SeqStmt):
        return any(ends_in_return(s) for s in stmt.stmts)
    if isinstance(stmt, S.IfStmt):
        return stmt.else_body is not None and ends_in_return(stmt.then_body) and ends_in_return(stmt.else_body)
    if isinstance(stmt, S.WhileStmt):
        always = isinstance(stmt.cond, E.Constant) and bool(stmt.cond.value)
        return always and not any(isinstance(s, S.BreakStmt) for s in statements_leaving(stmt))
    return False

"""IR statements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hidet_lang.ir.expr import Expr, Var
from hidet_lang.ir.loop_attrs import FULL_UNROLL  # noqa: F401 - `ForStmt.factor`'s value for a complete unroll
from hidet_lang.ir.node import Node
from hidet_lang.ir.str_enum import StrEnum


class LoopKind(StrEnum):
    """How a `ForStmt` runs. Compares equal to its name as a string ('' for a plain loop)."""

    PLAIN = ""
    UNROLL = "unroll"
    PARALLEL = "parallel"  # OpenMP on the CPU


class DeclScope(StrEnum):
    """Where a declared local array lives. Compares equal to its name as a string ('' for local)."""

    LOCAL = ""  # registers on CUDA, the stack on the CPU
    SHARED = "shared"  # the shared memory of a CUDA thread block


class Stmt(Node):
    """Base of IR statements."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class DeclareStmt(Stmt):
    """Declares `var` (a scalar, a local array, or a pointer), with an optional initial value.

    `scope` says where a local array lives (see `DeclScope`).
    """

    var: Var
    init: Expr | None = None
    scope: DeclScope = DeclScope.LOCAL


@dataclass(frozen=True, slots=True)
class AssignStmt(Stmt):
    """`var = value` for a declared scalar or pointer variable."""

    var: Var
    value: Expr


@dataclass(frozen=True, slots=True)
class BufferStoreStmt(Stmt):
    """`buf[indices] = value` on a tensor or pointer."""

    buf: Expr
    indices: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True, slots=True)
class EvaluateStmt(Stmt):
    """An expression evaluated for its effect (a call)."""

    expr: Expr


@dataclass(frozen=True, slots=True)
class SeqStmt(Stmt):
    """Statements run in order."""

    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class IfStmt(Stmt):
    """`if cond: then_body else: else_body`."""

    cond: Expr
    then_body: Stmt
    else_body: Stmt | None = None


@dataclass(frozen=True, slots=True)
class ForStmt(Stmt):
    """`for var in range(start, stop, step)`, run as `kind` says (plain, unrolled, or parallel on the CPU).

    `step` is a compile-time constant or an expression whose sign is not known; for a non-constant step the
    loop runs while `var < stop` if the step is positive and `var > stop` otherwise, as Python's range does.
    `reductions` lists, for a parallel loop, the `(operator, variable)` pairs of the scalars declared outside it
    that its iterations reduce into (`+`, `*`, `min`, `max`; OpenMP's `reduction` clause on the CPU). `factor` is,
    for an unrolled loop, the unroll factor (0: the compiler's choice; `FULL_UNROLL`: completely), and for a
    parallel loop the number of threads (0: OpenMP's default).
    """

    var: Var
    start: Expr
    stop: Expr
    step: Expr
    body: Stmt
    kind: LoopKind = LoopKind.PLAIN
    reductions: tuple[tuple[str, Var], ...] = ()
    factor: int = 0


@dataclass(frozen=True, slots=True)
class ForMappingStmt(Stmt):
    """Runs `body` for each task of `worker` under a task mapping; `loop_vars` take the task's coordinates."""

    loop_vars: tuple[Var, ...]
    mapping: Any  # hidet_lang.ir.mapping.TaskMapping
    worker: Expr
    body: Stmt


@dataclass(frozen=True, slots=True)
class WhileStmt(Stmt):
    """`while cond: body`."""

    cond: Expr
    body: Stmt


@dataclass(frozen=True, slots=True)
class BreakStmt(Stmt):
    """`break` out of the innermost loop."""



@dataclass(frozen=True, slots=True)
class ContinueStmt(Stmt):
    """`continue` with the next iteration of the innermost loop."""



@dataclass(frozen=True, slots=True)
class ReturnStmt(Stmt):
    """`return` or `return value`."""

    value: Expr | None = None


@dataclass(frozen=True, slots=True)
class AssertStmt(Stmt):
    """`assert cond, message`: a failure is reported to Python after the call as an AssertionError."""

    cond: Expr
    message: str


@dataclass(frozen=True, slots=True)
class AsmStmt(Stmt):
    """Inline PTX (CUDA only): `template` with `%0, %1, ...` naming the outputs, then the inputs."""

    template: str
    outputs: tuple[Expr, ...]
    inputs: tuple[Expr, ...]
    volatile: bool = False


def seq(stmts: list[Stmt] | tuple[Stmt, ...]) -> Stmt:
    """One statement for a list: the statement itself when there is one, else a SeqStmt (nested ones flattened)."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))

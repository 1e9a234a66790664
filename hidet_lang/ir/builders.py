"""`StmtBuilder`: Hidet's way of building statements in Python (`hidet.ir.builders.StmtBuilder`).

    sb = StmtBuilder()
    with sb.for_range(m) as i:
        with sb.if_then(i < 3):
            sb += printf("%d\\n", i)
        with sb.otherwise():
            sb += printf("big\\n")
    body = sb.finish()

Statements go into the innermost open scope; a scope (`for_range`, `for_loop`, `for_grid`, `if_then`, `else_if`,
`otherwise`, `while_loop`) becomes one statement when its `with` block ends. The IR's statements are immutable, so a
scope builds its statement from its body at the end instead of filling in an object made at its start, as Hidet's
builder does. `finish()`'s statement is the body of a function made by hand (`Function(name, params, void, body,
attrs)`, compiled through `hidet_lang.ir.module.IRModule`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from hidet_lang.ir import stmt as S
from hidet_lang.ir.expr import Expr, Var, convert
from hidet_lang.ir.loop_attrs import parse_loop_attrs
from hidet_lang.ir.types import Type, int32

_LOOP_NAMES = ("i", "j", "k", "p", "q", "r", "s", "u", "v")
"""The names of the variables of `for_grid`'s loops, outermost first (`i0`, `i1`, ... beyond nine)."""


class StmtBuilder:
    """Builds a statement from appended statements and nested scopes (see the module docstring)."""

    def __init__(self) -> None:
        self._scopes: list[list[S.Stmt]] = [[]]

    def append(self, item: S.Stmt | Expr | Sequence[S.Stmt | Expr]) -> None:
        """Append a statement, an expression evaluated for its effect (a call, `printf`), or a sequence of them."""
        if isinstance(item, (list, tuple)):
            for one in item:
                self.append(one)
        elif isinstance(item, S.Stmt):
            self._scopes[-1].append(item)
        elif isinstance(item, Expr):
            self._scopes[-1].append(S.EvaluateStmt(item))
        else:
            raise TypeError(f"a StmtBuilder appends statements and expressions, not a {type(item).__name__}")

    def __iadd__(self, item: S.Stmt | Expr | Sequence[S.Stmt | Expr]) -> StmtBuilder:
        self.append(item)
        return self

    def declare(self, v: Var, init: Any = None, scope: S.DeclScope = S.DeclScope.LOCAL) -> Var:
        """Declare variable `v` (with initial value `init`) and return it."""
        self.append(S.DeclareStmt(v, None if init is None else convert(init), scope))
        return v

    def declare_var(self, name: str, tp: Type, init: Any = None) -> Var:
        """Declare a new variable called `name` of type `tp` and return it."""
        return self.declare(Var(name, tp), init)

    def assign(self, dst: Var, value: Any) -> None:
        """`dst = value`."""
        self.append(S.AssignStmt(dst, convert(value)))

    def buffer_store(self, buf: Expr, indices: Sequence[Any], value: Any) -> None:
        """`buf[indices] = value`."""
        self.append(S.BufferStoreStmt(buf, tuple(convert(i) for i in indices), convert(value)))

    def assertion(self, cond: Any, msg: str) -> None:
        """`assert cond, msg`."""
        self.append(S.AssertStmt(convert(cond), msg))

    def brk(self) -> None:
        """`break`."""
        self.append(S.BreakStmt())

    def for_loop(self, v: str | Var, extent: Any, attr: str = ".") -> Iterator[Var]:
        """A scope: `for v in range(extent)` run as `attr` says (a loop token of `grid`'s attrs: '.', 'u', 'u+',
        'uN', 'p', 'pN'); gives the loop variable (a new int32 variable when `v` is a name)."""
        return self._loops([Var(v, int32) if isinstance(v, str) else v], [extent], attr)

    def for_range(self, extent: Any, *, attr: str | None = None) -> Iterator[Var]:
        """A scope: `for i in range(extent)`, as `for_loop('i', extent, attr)`."""
        return self.for_loop("i", extent, attr or ".")

    def for_grid(self, shape: Sequence[Any], attr: str | None = None) -> Iterator[list[Var]]:
        """A scope: one loop per dimension of `shape`, outermost first; gives their variables."""
        names = _LOOP_NAMES[:len(shape)] if len(shape) <= len(_LOOP_NAMES) else [f"i{k}" for k in range(len(shape))]
        return self._loops([Var(n, int32) for n in names], list(shape), attr or "." * len(shape), as_list=True)

    def _loops(self, loop_vars: list[Var], extents: list[Any], attr: str, as_list: bool = False) -> Iterator[Any]:
        attrs = parse_loop_attrs(attr, len(loop_vars), "StmtBuilder loop")  # at the call: a bad string fails there
        return self._loop_scope(loop_vars, extents, attrs, as_list)

    @contextmanager
    def _loop_scope(self, loop_vars: list[Var], extents: list[Any], attrs: Sequence[Any],
                    as_list: bool) -> Iterator[Any]:
        with self._scope(lambda body: _nest(body, loop_vars, extents, attrs)):
            yield loop_vars if as_list else loop_vars[0]

    def if_then(self, cond: Any) -> Iterator[None]:
        """A scope: `if cond:`."""
        return self._scope(lambda body: S.IfStmt(convert(cond), body))

    @contextmanager
    def else_if(self, cond: Any) -> Iterator[None]:
        """A scope: `elif cond:` of the `if` statement appended last."""
        if_stmt = self._last_if("else_if")
        with self._scope(lambda body: S.IfStmt(convert(cond), body), into=[]) as built:
            yield
        self._scopes[-1][-1] = _attach_else(if_stmt, built[0])

    @contextmanager
    def otherwise(self) -> Iterator[None]:
        """A scope: `else:` of the `if` statement appended last."""
        if_stmt = self._last_if("otherwise")
        with self._scope(lambda body: body, into=[]) as built:
            yield
        self._scopes[-1][-1] = _attach_else(if_stmt, built[0])

    def while_loop(self, cond: Any) -> Iterator[None]:
        """A scope: `while cond:`."""
        return self._scope(lambda body: S.WhileStmt(convert(cond), body))

    def finish(self) -> S.Stmt:
        """The statement built (a sequence of what was appended); RuntimeError while a scope is still open."""
        if len(self._scopes) != 1:
            raise RuntimeError(f"StmtBuilder.finish(): {len(self._scopes) - 1} scope(s) are still open")
        return S.seq(self._scopes[0])

    @contextmanager
    def _scope(self, make: Callable[[S.Stmt], S.Stmt], into: list[S.Stmt] | None = None) -> Iterator[list[S.Stmt]]:
        """Collect the statements of a `with` block and append `make(body)` to the enclosing scope (or to `into`,
        which the block's caller then places itself)."""
        target = self._scopes[-1] if into is None else into
        self._scopes.append([])
        try:
            yield target
        finally:
            body = S.seq(self._scopes.pop())
        target.append(make(body))

    def _last_if(self, method: str) -> S.IfStmt:
        scope = self._scopes[-1]
        if not scope or not isinstance(scope[-1], S.IfStmt):
            raise RuntimeError(f"StmtBuilder.{method}() must follow an if_then() (or else_if()) scope")
        return scope[-1]


def _nest(body: S.Stmt, loop_vars: list[Var], extents: list[Any], attrs: Sequence[Any]) -> S.Stmt:
    """The loops over `loop_vars` from 0 to `extents` (outermost first) around `body`."""
    for v, extent, attr in reversed(list(zip(loop_vars, extents, attrs))):
        body = S.ForStmt(v, convert(0), convert(extent), convert(1), body, S.LoopKind(attr.kind), factor=attr.factor)
    return body


def _attach_else(if_stmt: S.IfStmt, else_body: S.Stmt) -> S.IfStmt:
    """`if_stmt` with `else_body` at the end of its `elif` chain; RuntimeError when the chain ends in an `else`."""
    if if_stmt.else_body is None:
        return replace(if_stmt, else_body=else_body)
    if not isinstance(if_stmt.else_body, S.IfStmt):
        raise RuntimeError("StmtBuilder: this if statement already has an else branch")
    return replace(if_stmt, else_body=_attach_else(if_stmt.else_body, else_body))

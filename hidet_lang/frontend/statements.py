"""Control-flow statements: expression statements, `if`, `while`, `for`, `with`, `break`, `continue`, `return`,
`assert`.

An `if` on a host value keeps one branch while parsing. A `for` loop evaluates its iterable and hands the loop
to the `LoopConstruct` it stands for (see `loops.py`), a `with` block to its `BlockConstruct` (`blocks.py`), so a
new loop or block kind needs no change here.
"""

from __future__ import annotations

import ast

from hidet_lang.errors import DSLSyntaxError, DSLValueError
from hidet_lang.frontend import semantics
from hidet_lang.frontend.blocks import BlockConstruct
from hidet_lang.frontend.core import ParserCore
from hidet_lang.frontend.loops import loop_construct
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.types import TensorType, VoidType


class StatementParser(ParserCore):
    """The parser's `visit_<Node>` methods for statements other than assignments."""

    def visit_Pass(self, node: ast.Pass) -> None:
        """`pass`: nothing."""

    def visit_Expr(self, node: ast.Expr) -> None:
        """An expression statement: a call, an intrinsic, or a statement a host function returned (an `asm` block,
        one that `StmtBuilder` built), which is inserted here; other values are dropped."""
        self.statement_call = node.value
        value = self.visit_expr(node.value)
        if isinstance(value, (E.Call, E.Intrinsic)):
            self.emit(S.EvaluateStmt(value))
        elif isinstance(value, S.Stmt):
            self.emit(value)

    def visit_If(self, node: ast.If) -> None:
        """`if`/`elif`/`else`: one branch on a host condition, an IR `if` otherwise."""
        cond = self.visit_expr(node.test)
        if not isinstance(cond, E.Expr):
            chosen = node.body if cond else node.orelse
            self.emit(self.block(chosen))
            return
        c = self.host_call(node.test, semantics.condition, cond, "an `if` condition")
        branch = "a branch on a run-time condition"
        then_body = self.block(node.body, run_time=branch)
        else_body = self.block(node.orelse, run_time=branch) if node.orelse else None
        self.emit(S.IfStmt(c, then_body, else_body))

    def visit_While(self, node: ast.While) -> None:
        """`while cond:`."""
        if node.orelse:
            raise self.error(node, "`while ... else` is not supported", DSLSyntaxError)
        cond = self.visit_expr(node.test)
        c = self.host_call(node.test, semantics.condition, cond, "a `while` condition")
        self.emit(S.WhileStmt(c, self.loop_body(node.body)))

    def visit_For(self, node: ast.For) -> None:
        """`for <names> in <iterable>:`, built by the loop construct the iterable stands for."""
        if node.orelse:
            raise self.error(node, "`for ... else` is not supported", DSLSyntaxError)
        iterable = self.visit_expr(node.iter)
        names = self.loop_target_names(node.target)
        construct = self.host_call(node.iter, loop_construct, iterable)
        self.emit(construct.build(self, node, names))

    def visit_With(self, node: ast.With) -> None:
        """`with <construct> [as <name>]:`, built by the block construct (one item, e.g. `warp_groups`)."""
        if len(node.items) != 1:
            raise self.error(node, "a `with` statement in a kernel enters one block construct", DSLSyntaxError)
        item = node.items[0]
        construct = self.visit_expr(item.context_expr)
        if not isinstance(construct, BlockConstruct):
            raise self.error(item.context_expr, f"a `with` statement in a kernel enters a block construct such as "
                                                f"warp_groups(...), not {semantics.describe(construct)}")
        if item.optional_vars is not None and not isinstance(item.optional_vars, ast.Name):
            raise self.error(item.optional_vars, "`with ... as` binds one name", DSLSyntaxError)
        name = item.optional_vars.id if isinstance(item.optional_vars, ast.Name) else None
        self.emit(construct.build(self, node, name))

    def visit_Break(self, node: ast.Break) -> None:
        """`break`."""
        self.check_in_loop(node, "break")
        self.emit(S.BreakStmt())

    def visit_Continue(self, node: ast.Continue) -> None:
        """`continue`."""
        self.check_in_loop(node, "continue")
        self.emit(S.ContinueStmt())

    def check_in_loop(self, node: ast.AST, what: str) -> None:
        """`break`/`continue` need an enclosing loop that exists at run time."""
        if not self.loops:
            raise self.error(node, f"`{what}` outside a loop", DSLSyntaxError)
        if self.loops[-1].unrolled:
            raise self.error(node, f"`{what}` cannot leave a loop unrolled while parsing (meta.range)",
                             DSLSyntaxError)

    def visit_Return(self, node: ast.Return) -> None:
        """`return` or `return value` (converted to the declared return type, if any)."""
        assert self.ctx is not None
        if node.value is None:
            self.emit(S.ReturnStmt(None))
            return
        value = self.host_call(node, E.convert, self.visit_expr(node.value))
        if isinstance(value.type, TensorType):
            raise self.error(node, "a function cannot return a tensor; write into a tensor argument")
        if isinstance(value.type, VoidType):
            raise self.error(node, "cannot return the result of a function that returns nothing")
        if self.ctx.declared_return is not None:
            value = self.host_call(node, semantics.assignable, self.ctx.declared_return, value, "the return value")
        self.ctx.return_types.append(value.type)
        self.emit(S.ReturnStmt(value))

    def visit_Assert(self, node: ast.Assert) -> None:
        """`assert cond, "message"`: checked while parsing on a host condition, at run time otherwise."""
        cond = self.visit_expr(node.test)
        msg = self.visit_expr(node.msg) if node.msg is not None else None
        if msg is not None and not isinstance(msg, str):
            raise self.error(node.msg, "an assertion message must be a Python string")
        text = msg if msg is not None else f"assertion failed: {ast.unparse(node.test)}"
        if not isinstance(cond, E.Expr):
            if not cond:
                raise self.error(node, f"static assertion failed: {text}", DSLValueError)
            return
        c = self.host_call(node.test, semantics.condition, cond, "an assertion")
        self.emit(S.AssertStmt(c, text))

"""Readable DSL-like text for IR nodes; `str(node)` uses it, and so do IR dumps and tests."""

from __future__ import annotations

from typing import Any

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import Function, IRModule

_PRECEDENCE = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
    "<": 7, "<=": 7, ">": 7, ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}
_PY_OPS = {"&&": "and", "||": "or"}


class IRPrinter:
    """Turns IR into indented text, one method per node kind."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    # expressions -----------------------------------------------------------------------------------------
    def expr(self, e: E.Expr, parent: int = 0) -> str:
        """The text of expression `e`, parenthesized if it binds looser than `parent`."""
        if isinstance(e, E.Var):
            return e.name
        if isinstance(e, E.Constant):
            if e.dtype.is_float:
                return f"{e.dtype}({e.value!r})" if e.dtype.short_name != "f32" else repr(float(e.value))
            return repr(e.value) if e.dtype.short_name in ("i32", "bool") else f"{e.dtype}({e.value})"
        if isinstance(e, E.StringLiteral):
            return repr(e.value)
        if isinstance(e, E.BinaryOp):
            prec = _PRECEDENCE[e.op]
            text = f"{self.expr(e.a, prec)} {_PY_OPS.get(e.op, e.op)} {self.expr(e.b, prec + 1)}"
            return f"({text})" if prec < parent else text
        if isinstance(e, E.UnaryOp):
            op = "not " if e.op == "!" else e.op
            return f"{op}{self.expr(e.a, 11)}"
        if isinstance(e, E.Cast):
            return f"{e.dtype}({self.expr(e.expr)})"
        if isinstance(e, E.Reinterpret):
            return f"cast({self.expr(e.expr)}, {e.target})"
        if isinstance(e, E.IfThenElse):
            text = f"{self.expr(e.then_expr, 1)} if {self.expr(e.cond, 1)} else {self.expr(e.else_expr, 1)}"
            return f"({text})" if parent > 0 else text
        if isinstance(e, (E.Call, E.Intrinsic)):
            name = e.func_name if isinstance(e, E.Call) else e.name
            return f"{name}({', '.join(self.expr(a) for a in e.args)})"
        if isinstance(e, E.TensorElement):
            return f"{self.expr(e.base, 12)}[{', '.join(self.expr(i) for i in e.indices)}]"
        if isinstance(e, E.Address):
            return f"~{self.expr(e.expr, 12)}"
        if isinstance(e, E.Dereference):
            return f"deref({self.expr(e.expr)})"
        return repr(e)

    # statements ------------------------------------------------------------------------------------------
    def line(self, text: str) -> None:
        """Append one line at the current indentation."""
        self.lines.append("    " * self.depth + text)

    def block(self, body: S.Stmt) -> None:
        """Print `body` one level deeper."""
        self.depth += 1
        self.stmt(body)
        self.depth -= 1

    def stmt(self, s: S.Stmt) -> None:
        """Print statement `s`."""
        method = getattr(self, "stmt_" + type(s).__name__)
        method(s)

    def stmt_SeqStmt(self, s: S.SeqStmt) -> None:
        for item in s.stmts:
            self.stmt(item)
        if not s.stmts:
            self.line("pass")

    def stmt_DeclareStmt(self, s: S.DeclareStmt) -> None:
        init = "" if s.init is None else f" = {self.expr(s.init)}"
        self.line(f"{s.var.name}: {s.var.type}{init}")

    def stmt_AssignStmt(self, s: S.AssignStmt) -> None:
        self.line(f"{s.var.name} = {self.expr(s.value)}")

    def stmt_BufferStoreStmt(self, s: S.BufferStoreStmt) -> None:
        self.line(f"{self.expr(s.buf, 12)}[{', '.join(self.expr(i) for i in s.indices)}] = {self.expr(s.value)}")

    def stmt_EvaluateStmt(self, s: S.EvaluateStmt) -> None:
        self.line(self.expr(s.expr))

    def stmt_IfStmt(self, s: S.IfStmt) -> None:
        self.line(f"if {self.expr(s.cond)}:")
        self.block(s.then_body)
        if s.else_body is not None:
            self.line("else:")
            self.block(s.else_body)

    def stmt_ForStmt(self, s: S.ForStmt) -> None:
        reductions = "".join(f" reduction({op}: {v.name})" for op, v in s.reductions)
        kind = f"  # {s.kind}{reductions}" if s.kind else ""
        self.line(f"for {s.var.name} in range({self.expr(s.start)}, {self.expr(s.stop)}, {self.expr(s.step)}):{kind}")
        self.block(s.body)

    def stmt_ForMappingStmt(self, s: S.ForMappingStmt) -> None:
        names = ", ".join(v.name for v in s.loop_vars)
        self.line(f"for {names} in ({s.mapping}).on({self.expr(s.worker)}):")
        self.block(s.body)

    def stmt_WhileStmt(self, s: S.WhileStmt) -> None:
        self.line(f"while {self.expr(s.cond)}:")
        self.block(s.body)

    def stmt_BreakStmt(self, s: S.BreakStmt) -> None:
        self.line("break")

    def stmt_ContinueStmt(self, s: S.ContinueStmt) -> None:
        self.line("continue")

    def stmt_ReturnStmt(self, s: S.ReturnStmt) -> None:
        self.line("return" if s.value is None else f"return {self.expr(s.value)}")

    def stmt_AsmStmt(self, s: S.AsmStmt) -> None:
        outputs = ", ".join(self.expr(e) for e in s.outputs)
        inputs = ", ".join(self.expr(e) for e in s.inputs)
        self.line(f"asm({s.template!r}, outputs=[{outputs}], inputs=[{inputs}], is_volatile={s.volatile})")

    def stmt_AssertStmt(self, s: S.AssertStmt) -> None:
        self.line(f"assert {self.expr(s.cond)}, {s.message!r}")

    # functions -------------------------------------------------------------------------------------------
    def function(self, f: Function) -> None:
        """Print a function with its kind and the flags set on it (`noinline`, `fast_math`, `no_alias`)."""
        params = ", ".join(f"{p.name}: {p.type}" for p in f.params)
        flags = "".join(f", {name}" for name in ("noinline", "fast_math", "no_alias") if getattr(f.attrs, name))
        self.line(f"def {f.name}({params}) -> {f.ret_type}:  # {f.attrs.kind}{flags}")
        self.block(f.body)


def to_text(node: Any) -> str:
    """The DSL-like text of any IR node."""
    printer = IRPrinter()
    if isinstance(node, IRModule):
        for i, f in enumerate(node.functions):
            if i:
                printer.lines.append("")
            printer.function(f)
    elif isinstance(node, Function):
        printer.function(node)
    elif isinstance(node, S.Stmt):
        printer.stmt(node)
    elif isinstance(node, E.Expr):
        return printer.expr(node)
    else:
        return repr(node)
    return "\n".join(printer.lines)



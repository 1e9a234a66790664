"""Invariants of the IR at each stage of lowering; `verify` runs between passes in tests and IR dumps.

Checked always: in a function parsed from the user's source (one with a span), every statement has a span
(so errors and line markers can name the user's line); function kinds, loop kinds and declaration scopes are
members of their enums (`FuncKind`, `LoopKind`, `DeclScope`), not stray values; every variable is a parameter
or declared (or a loop variable) before it is used, in an enclosing scope; no variable is declared twice;
`break`/`continue` sit inside loops; a store or element read indexes a tensor or pointer. Checked after
`lower_task_mappings`: no task-mapping loops. Checked after `flatten_tensor_access`: every access has exactly
one index.
"""

from __future__ import annotations

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import FuncKind, Function, IRModule
from hidet_lang.ir.functor import IRVisitor
from hidet_lang.ir.types import PointerType, TensorType

STAGES = ("parsed", "mappings_lowered", "flattened")


class IRVerificationError(AssertionError):
    """The IR breaks an invariant of its stage: a bug in a pass, not in the user's program."""


class _Verifier(IRVisitor):
    def __init__(self, func: Function, stage: str) -> None:
        super().__init__()
        self.func = func
        self.stage = stage
        self.scopes: list[set[E.Var]] = [set(func.params)]
        self.declared: set[E.Var] = set(func.params)
        self.loop_depth = 0
        self.spans_required = func.span is not None

    def visit(self, node: object) -> None:
        if self.spans_required and isinstance(node, S.Stmt) and node.span is None and not isinstance(node, S.SeqStmt):
            self.fail(f"a statement has no span: {str(node).splitlines()[0]}")
        super().visit(node)

    def fail(self, message: str) -> None:
        raise IRVerificationError(f"in function {self.func.name} ({self.stage}): {message}")

    def declare(self, var: E.Var) -> None:
        if var in self.declared:
            self.fail(f"variable {var.name} is declared twice")
        self.declared.add(var)
        self.scopes[-1].add(var)

    def scoped(self, node: S.Stmt | None, *variables: E.Var, loop: bool = False) -> None:
        if node is None:
            return
        self.scopes.append(set())
        for v in variables:
            self.declare(v)
        self.loop_depth += loop
        self.visit(node)
        self.loop_depth -= loop
        self.scopes.pop()

    def visit_Var(self, v: E.Var) -> None:
        if not any(v in scope for scope in self.scopes):
            self.fail(f"variable {v.name} is used outside the scope that declares it")

    def visit_DeclareStmt(self, s: S.DeclareStmt) -> None:
        if not isinstance(s.scope, S.DeclScope):
            self.fail(f"the declaration of {s.var.name} has scope {s.scope!r}, not a DeclScope")
        if s.init is not None:
            self.visit(s.init)
        self.declare(s.var)

    def visit_IfStmt(self, s: S.IfStmt) -> None:
        self.visit(s.cond)
        self.scoped(s.then_body)
        self.scoped(s.else_body)

    def visit_ForStmt(self, s: S.ForStmt) -> None:
        if not isinstance(s.kind, S.LoopKind):
            self.fail(f"the loop over {s.var.name} has kind {s.kind!r}, not a LoopKind")
        self.visit((s.start, s.stop, s.step))
        self.scoped(s.body, s.var, loop=True)

    def visit_ForMappingStmt(self, s: S.ForMappingStmt) -> None:
        if self.stage != "parsed":
            self.fail("a task-mapping loop is left after lower_task_mappings")
        self.visit(s.worker)
        self.scoped(s.body, *s.loop_vars, loop=True)

    def visit_WhileStmt(self, s: S.WhileStmt) -> None:
        self.visit(s.cond)
        self.scoped(s.body, loop=True)

    def visit_BreakStmt(self, s: S.BreakStmt) -> None:
        if not self.loop_depth:
            self.fail("break outside a loop")

    def visit_ContinueStmt(self, s: S.ContinueStmt) -> None:
        if not self.loop_depth:
            self.fail("continue outside a loop")

    def check_access(self, base: E.Expr, indices: tuple[E.Expr, ...]) -> None:
        if not isinstance(base.type, (TensorType, PointerType)):
            self.fail(f"{base} is indexed but is neither a tensor nor a pointer")
        if self.stage == "flattened" and len(indices) != 1:
            self.fail(f"{base} is accessed with {len(indices)} indices after flatten_tensor_access")

    def visit_TensorElement(self, e: E.TensorElement) -> None:
        self.check_access(e.base, e.indices)
        self.visit_children(e)

    def visit_BufferStoreStmt(self, s: S.BufferStoreStmt) -> None:
        self.check_access(s.buf, s.indices)
        self.visit_children(s)


def verify(node: Function | IRModule, stage: str = "parsed") -> None:
    """Raise IRVerificationError if `node` breaks an invariant of `stage` (one of STAGES)."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; stages: {', '.join(STAGES)}")
    functions = node.functions if isinstance(node, IRModule) else (node,)
    for f in functions:
        if not isinstance(f.attrs.kind, FuncKind):
            raise IRVerificationError(f"function {f.name} has kind {f.attrs.kind!r}, not a FuncKind")
        _Verifier(f, stage).visit(f.body)

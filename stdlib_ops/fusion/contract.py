"""The fusion contract of a scheduled kernel, and the error that names where a kernel breaks it.

A tensor parameter that receives a prologue (an *anchor input*) may be used by the kernel only through element
reads with a full index, `x[i, j]`, or as the source of `cp_async(dst, ~x[i, j], nbytes)` or of a vector copy
(`copy_vector_16(~regs[0], ~x[i, j])`); one that receives an epilogue (an *anchor output*) only through element
stores with a full index, `y[i, j] = v`, or as the destination of a vector copy; either one also in the alignment
test of an element's address (`address_aligned(~x[0, 0], 16)`). Any other use (passing
it to a function, viewing or casting it, taking an address, aliasing it, storing to an input, reading an output,
a partial index) is reported with the statement's source position, because a rewrite could not preserve it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import HOST_CALLABLE_KINDS, Function, IRModule
from hidet_lang.ir.functor import IRVisitor, child_field_names
from hidet_lang.ir.intrinsics import ADDRESS_ALIGNED, CP_ASYNC_COPIES, VECTOR_COPIES
from hidet_lang.ir.span import Span
from hidet_lang.ir.types import TensorType


class FusionContractError(Exception):
    """A kernel uses a fused input or output other than the contract allows; names the kernel and the line."""

    def __init__(self, kernel: str, tensor: str, role: str, reason: str, statement: str, span: Span | None) -> None:
        self.kernel, self.tensor, self.role, self.reason, self.span = kernel, tensor, role, reason, span
        allowed = ("be read element by element (x[i, j]) or be the source of cp_async(dst, ~x[i, j], nbytes)"
                   if role == "input" else "be stored to element by element (y[i, j] = v)")
        where = f"{span}: " if span is not None else ""
        super().__init__(
            f"{where}kernel '{kernel}' breaks the fusion contract: its {role} '{tensor}' is {reason} in "
            f"`{statement}`; a fused {role} may only {allowed}")


@dataclass(frozen=True, slots=True)
class Violation:
    """One use of an anchor tensor that the contract does not allow."""

    tensor: E.Var
    reason: str
    statement: S.Stmt
    span: Span | None


def the_kernel(module: IRModule) -> Function:
    """The module's one kernel function (kind `public`, `cpu_kernel` or `cuda_kernel`); ValueError otherwise."""
    kernels = [f for f in module.functions if f.attrs.kind in HOST_CALLABLE_KINDS]
    if len(kernels) != 1:
        names = ", ".join(f.name for f in kernels) or "none"
        raise ValueError(f"a scheduled kernel module has exactly one kernel function; this one has {names}")
    return kernels[0]


def check_fusion_contract(kernel: Function, inputs: Collection[E.Var], outputs: Collection[E.Var]) -> None:
    """Raise a FusionContractError for the first use of `inputs` (anchor inputs) or `outputs` (anchor outputs)
    in `kernel`'s body that the contract does not allow; return when there is none."""
    for v in contract_violations(kernel, inputs, outputs):
        role = "input" if v.tensor in inputs else "output"
        text = str(v.statement).splitlines()[0].strip()
        raise FusionContractError(kernel.name, v.tensor.name, role, v.reason, text, v.span or kernel.span)


def contract_violations(kernel: Function, inputs: Collection[E.Var], outputs: Collection[E.Var]) -> Iterator[Violation]:
    """Every use of `inputs` or `outputs` in `kernel`'s body that the contract does not allow, in program order."""
    finder = _ViolationFinder(frozenset(inputs), frozenset(outputs))
    finder.visit(kernel.body)
    yield from finder.found


class _ViolationFinder(IRVisitor):
    """Walks statements; checks each statement's own expressions with the statement as the place to report."""

    def __init__(self, inputs: frozenset[E.Var], outputs: frozenset[E.Var]) -> None:
        super().__init__()
        self.inputs, self.outputs = inputs, outputs
        self.found: list[Violation] = []
        self.statement: S.Stmt | None = None

    def visit(self, node: object) -> None:
        if isinstance(node, S.Stmt) and not isinstance(node, S.SeqStmt):
            self.statement = node
            self.check_statement(node)
        super().visit(node)

    def check_statement(self, stmt: S.Stmt) -> None:
        for name in child_field_names(type(stmt)):
            value = getattr(stmt, name)
            for item in value if isinstance(value, tuple) else (value,):
                if not isinstance(item, E.Expr):
                    continue
                if isinstance(stmt, S.BufferStoreStmt) and name == "buf" and isinstance(item, E.Var):
                    self.check_store(stmt, item)
                elif not (isinstance(stmt, (S.DeclareStmt, S.AssignStmt, S.ForStmt)) and name == "var"):
                    self.check_expr(item, None)

    def check_store(self, stmt: S.BufferStoreStmt, buf: E.Var) -> None:
        if buf in self.inputs:
            self.report(buf, "stored to")
        elif buf in self.outputs and not _full_index(buf, stmt.indices):
            self.report(buf, f"stored to with {len(stmt.indices)} of its {_rank(buf)} indices")

    def check_expr(self, e: E.Expr, context: str | None) -> None:
        """Check expression `e`; `context` says what the outermost enclosing non-element use does with it."""
        if isinstance(e, E.Var):
            if e in self.inputs or e in self.outputs:
                self.report(e, context or "used as a whole (aliased)")
            return
        if isinstance(e, E.Address) and isinstance(e.expr, E.TensorElement) and self.is_anchor(e.expr.base):
            self.report(e.expr.base, context or "used through the address of an element")
            for index in e.expr.indices:
                self.check_expr(index, None)
            return
        if isinstance(e, E.TensorElement) and self.is_anchor(e.base):
            base = e.base
            if base in self.outputs:
                self.report(base, "read")
            elif not _full_index(base, e.indices):
                self.report(base, f"read with {len(e.indices)} of its {_rank(base)} indices")
            for index in e.indices:
                self.check_expr(index, None)
            return
        if isinstance(e, E.Intrinsic) and e.name in CP_ASYNC_COPIES and self.is_fusible_source(e.args[1]):
            self.check_expr(e.args[0], None)
            for index in e.args[1].expr.indices:
                self.check_expr(index, None)
            return
        if isinstance(e, E.Intrinsic) and self.is_vector_access(e):
            for operand in e.args:
                indices = operand.expr.indices if self.is_anchor_element(operand) else None
                for item in indices if indices is not None else (operand,):
                    self.check_expr(item, None)
            return
        for name in child_field_names(type(e)):
            value = getattr(e, name)
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, E.Expr):
                    self.check_expr(item, context or _context_of(e))

    def is_anchor(self, e: E.Expr) -> bool:
        """Whether `e` is an anchor input or output."""
        return isinstance(e, E.Var) and (e in self.inputs or e in self.outputs)

    def is_fusible_source(self, src: E.Expr) -> bool:
        """Whether `src` is `~x[i, j]` with a full index on an anchor input `x` (a cp_async source fusion handles)."""
        if not (isinstance(src, E.Address) and isinstance(src.expr, E.TensorElement)):
            return False
        base = src.expr.base
        return isinstance(base, E.Var) and base in self.inputs and _full_index(base, src.expr.indices)

    # ---- vector accesses: a vector load from an anchor input (`copy_vector_16(~regs[0], ~x[i, j])`), a vector
    # store to an anchor output (`copy_vector_16(~y[i, j], ~regs[0])`), each with a full index, and the alignment
    # test of an anchor tensor's element (`address_aligned(~x[0, 0], 16)`), which the rewrite makes element
    # copies, element stores and 1

    def is_anchor_element(self, e: E.Expr) -> bool:
        """Whether `e` is `~t[i, j]` with a full index on an anchor tensor `t`."""
        if not (isinstance(e, E.Address) and isinstance(e.expr, E.TensorElement)):
            return False
        base = e.expr.base
        return self.is_anchor(base) and _full_index(base, e.expr.indices)

    def is_vector_access(self, e: E.Intrinsic) -> bool:
        """Whether `e` is a vector access of anchor tensors (and nothing else of them) that fusion rewrites."""
        if e.name == ADDRESS_ALIGNED:
            return self.is_anchor_element(e.args[0])
        if e.name not in VECTOR_COPIES:
            return False
        dst, src = e.args
        loads = self.is_anchor_element(src) and src.expr.base in self.inputs and not self.is_anchor_element(dst)
        stores = self.is_anchor_element(dst) and dst.expr.base in self.outputs and not self.is_anchor_element(src)
        return loads or stores

    def report(self, tensor: E.Var, reason: str) -> None:
        stmt = self.statement
        assert stmt is not None
        self.found.append(Violation(tensor, reason, stmt, stmt.span))


def _context_of(parent: E.Expr) -> str | None:
    """What `parent` does with an anchor tensor found among its operands (None: nothing worth naming)."""
    if isinstance(parent, E.Call):
        return f"passed to the function '{parent.func_name}'"
    if isinstance(parent, E.Intrinsic):
        return f"passed to '{parent.name}'"
    if isinstance(parent, E.Reinterpret):
        return f"viewed as {parent.target} (a view or cast)"
    if isinstance(parent, E.Address):
        return "used through its address"
    if isinstance(parent, E.Dereference):
        return "dereferenced"
    return None


def _rank(tensor: E.Var) -> int:
    t = tensor.type
    assert isinstance(t, TensorType)
    return len(t.shape)


def _full_index(tensor: E.Var, indices: tuple[E.Expr, ...]) -> bool:
    return len(indices) == _rank(tensor)

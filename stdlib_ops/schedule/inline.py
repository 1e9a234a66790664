"""Inlining of computed tensors: every read `t[i, j]` of a `ComputeTensor` becomes its body at that index."""

from __future__ import annotations

from hidet_lang.ir.expr import Expr, TensorElement
from hidet_lang.ir.functor import IRRewriter, substitute
from stdlib_ops.compute.nodes import ComputeTensor


class _Inliner(IRRewriter):
    """Replaces reads of computed tensors by their (already inlined) bodies."""

    def __init__(self) -> None:
        super().__init__()
        self._bodies: dict[int, Expr] = {}

    def body_of(self, t: ComputeTensor) -> Expr:
        """The body of `t` with every computed tensor it reads inlined (memoized per tensor)."""
        key = id(t)
        if key not in self._bodies:
            self._bodies[key] = self.visit(t.body)
        return self._bodies[key]

    def visit_TensorElement(self, e: TensorElement) -> Expr:
        indices = self.visit(e.indices)
        if isinstance(e.base, ComputeTensor):
            return substitute(self.body_of(e.base), dict(zip(e.base.axes, indices)))
        return e if indices is e.indices else TensorElement(e.base, indices)


def inline_computes(t: ComputeTensor) -> Expr:
    """The body of `t` over its own axes, reading task inputs only (no `ComputeTensor` left)."""
    return _Inliner().body_of(t)

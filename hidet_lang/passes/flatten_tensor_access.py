"""The `flatten_tensor_access` pass: multi-dimensional element accesses become one row-major offset.

Requires: no task-mapping loops. Ensures: every `TensorElement` and `BufferStoreStmt` has exactly one index,
`i0 * (s1 * s2 ...) + i1 * (s2 ...) + ...` for a tensor (or tensor pointer) of shape (s0, s1, ...). The
variables keep their tensor types, which say how much storage a local array needs.
"""

from __future__ import annotations

from typing import Any

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.functor import IRRewriter
from hidet_lang.ir.types import PointerType, TensorType


def _shape_of(base: E.Expr) -> tuple[Any, ...] | None:
    t = base.type
    if isinstance(t, TensorType):
        return t.shape
    if isinstance(t, PointerType) and isinstance(t.base, TensorType):
        return t.base.shape
    return None


def row_major_offset(indices: tuple[E.Expr, ...], shape: tuple[Any, ...]) -> E.Expr:
    """The row-major offset of `indices` in a tensor of `shape` (Horner form: ((i0 * s1 + i1) * s2 + i2)...)."""
    offset = indices[0]
    for idx, extent in zip(indices[1:], shape[1:]):
        offset = E.binary("+", E.binary("*", offset, extent), idx)
    return offset


class _Flattener(IRRewriter):
    def flat(self, base: E.Expr, indices: tuple[E.Expr, ...]) -> tuple[E.Expr, ...]:
        shape = _shape_of(base)
        if shape is None or len(indices) == 1:
            return indices
        return (row_major_offset(indices, shape),)

    def visit_TensorElement(self, e: E.TensorElement) -> E.Expr:
        e = self.rebuild(e)
        assert isinstance(e, E.TensorElement)
        flat = self.flat(e.base, e.indices)
        return e if flat is e.indices else E.TensorElement(e.base, flat, e.span)

    def visit_BufferStoreStmt(self, s: S.BufferStoreStmt) -> S.Stmt:
        s = self.rebuild(s)
        assert isinstance(s, S.BufferStoreStmt)
        flat = self.flat(s.buf, s.indices)
        return s if flat is s.indices else S.BufferStoreStmt(s.buf, flat, s.value, s.span)


def flatten_tensor_access(node: S.Stmt) -> S.Stmt:
    """Rewrite every multi-index access in `node` to a single offset."""
    return _Flattener().visit(node)

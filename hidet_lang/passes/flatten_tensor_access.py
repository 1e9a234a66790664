"""The `flatten_tensor_access` pass: multi-dimensional element accesses become one storage offset.

Requires: no task-mapping loops; each access of a tensor (or tensor pointer) has one index per dim; the pass
runs once (an access of a 1-D tensor with a layout looks the same before and after). Ensures: every
`TensorElement` and `BufferStoreStmt` has exactly one index; a node with nothing to flatten in it is returned
itself. For a tensor type with a layout (`TensorType.layout`, `hidet_lang.ir.layout`) the index is the layout's
offset `layout(i0, i1, ...)` (as IR; constant parts folded, and an index that only a `local_layout` dim uses is
dropped, so an index must have no side effects); for one without, it is the row-major offset
`i0 * (s1 * s2 ...) + i1 * (s2 ...) + ...` for shape (s0, s1, ...), combined in the offset type the caller asks
for (int64 for the CPU: the indices and extents converted, then multiplied and added; `simplify` folds the
conversions of constants) or in the indices' own types. The variables keep their tensor types, which say how
much storage a local array needs (`TensorType.storage_size`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.functor import IRRewriter
from hidet_lang.ir.types import DataType, PointerType, TensorType


def _tensor_type_of(base: E.Expr) -> TensorType | None:
    t = base.type
    if isinstance(t, TensorType):
        return t
    if isinstance(t, PointerType) and isinstance(t.base, TensorType):
        return t.base
    return None


def row_major_offset(indices: tuple[E.Expr, ...], shape: tuple[Any, ...],
                     offset_type: DataType | None = None) -> E.Expr:
    """The row-major offset of `indices` in a tensor of `shape` (Horner form: ((i0 * s1 + i1) * s2 + i2)...),
    computed in `offset_type` (each index converted first) when given, else in the indices' own types."""
    if offset_type is not None:  # `simplify` drops a conversion to an operand's own type, and folds a constant's
        indices = tuple(E.Cast(E.convert(i), offset_type) for i in indices)
        shape = tuple(E.Cast(E.convert(d), offset_type) for d in shape)
    offset = indices[0]
    for idx, extent in zip(indices[1:], shape[1:]):
        offset = E.binary("+", E.binary("*", offset, extent), idx)
    return offset


class _Flattener(IRRewriter):
    def __init__(self, offset_type: DataType | None) -> None:
        super().__init__()
        self.offset_type = offset_type

    def flat(self, base: E.Expr, indices: tuple[E.Expr, ...]) -> tuple[E.Expr, ...]:
        t = _tensor_type_of(base)
        if t is None:
            return indices
        if t.layout is not None and len(indices) == t.layout.ndim:
            return (E.convert(t.layout(*indices)),)  # a Python int where the offset is constant
        if len(indices) == 1:
            return indices
        return (row_major_offset(indices, t.shape, self.offset_type),)

    def visit_TensorElement(self, e: E.TensorElement) -> E.Expr:
        e = self.rebuild(e)
        assert isinstance(e, E.TensorElement)
        flat = self.flat(e.base, e.indices)
        return e if flat is e.indices else dataclasses.replace(e, indices=flat)

    def visit_BufferStoreStmt(self, s: S.BufferStoreStmt) -> S.Stmt:
        s = self.rebuild(s)
        assert isinstance(s, S.BufferStoreStmt)
        flat = self.flat(s.buf, s.indices)
        return s if flat is s.indices else dataclasses.replace(s, indices=flat)


def flatten_tensor_access(node: S.Stmt, offset_type: DataType | None = None) -> S.Stmt:
    """Rewrite every multi-index access in `node` to a single offset, combining row-major indices in `offset_type`
    when given (the CPU's int64: an offset whose terms cannot wrap is one the C compiler can follow from one
    iteration to the next, and so vectorize the loop; the indices themselves keep the program's arithmetic)."""
    return _Flattener(offset_type).visit(node)

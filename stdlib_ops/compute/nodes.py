"""The nodes a compute definition adds to hidet_lang's IR expressions: computed tensors and reductions.

A compute definition is ordinary IR (`hidet_lang.ir.expr`) over tensor inputs (`Var`s of tensor type) plus
three node kinds that only the scheduler removes: `ComputeTensor` (a tensor defined element-wise by an
expression over its axes; read it with `t[i, j]`), `ReduceExpr` (a reduction over extra axes) and
`ArgReduceExpr` (the index of the largest or smallest value along one axis).
"""

from __future__ import annotations

from dataclasses import dataclass

from hidet_lang.ir.expr import Expr, Var
from hidet_lang.ir.types import DataType, TensorType, int64

REDUCE_KINDS = ("sum", "mean", "max", "min", "prod")
ARG_REDUCE_KINDS = ("max", "min")


@dataclass(frozen=True, slots=True)
class ComputeTensor(Expr):
    """A tensor whose element at `axes` is `body`: `compute(name, shape, fcompute)` makes it."""

    name: str
    shape: tuple
    axes: tuple[Var, ...]
    body: Expr

    @property
    def type(self) -> TensorType:
        return TensorType(_scalar(self.body), tuple(self.shape))

    @property
    def dtype(self) -> DataType:
        """The element type."""
        return _scalar(self.body)

    def __str__(self) -> str:
        return f"{self.name}[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True, slots=True)
class ReduceExpr(Expr):
    """`kind` (sum, mean, max, min, prod) of `body` over `axes`, each ranging over its extent; of type `dtype`."""

    axes: tuple[Var, ...]
    extents: tuple
    body: Expr
    kind: str
    dtype: DataType

    @property
    def type(self) -> DataType:
        return self.dtype

    def __str__(self) -> str:
        return f"reduce_{self.kind}({', '.join(map(str, self.extents))})"


@dataclass(frozen=True, slots=True)
class ArgReduceExpr(Expr):
    """The first index along `axis` (0 <= axis < extent) where `body` is largest (`kind` 'max') or smallest."""

    axis: Var
    extent: object
    body: Expr
    kind: str

    @property
    def type(self) -> DataType:
        return int64

    def __str__(self) -> str:
        return f"arg{self.kind}({self.extent})"


def _scalar(e: Expr) -> DataType:
    t = e.type
    if not isinstance(t, DataType):
        raise TypeError(f"a compute body must be a scalar expression, got one of type {t}")
    return t

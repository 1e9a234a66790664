"""A reduction over consecutive axes seen as the `[outer, extent, inner]` array its templates compute over.

`x` of shape `[*lead, *middle, *trail]` (`middle` the reduced axes) is `[product(lead), product(middle),
product(trail)]`, and the output (the reduced axes dropped, or kept as ones) is `[outer, inner]`; a scalar result
is stored as `[1]`. Where `inner` is 1 the rows templates take `[outer, extent]` and `[outer]` views, otherwise the
columns templates take the three-dimensional ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hidet_lang.ir import expr as E
from hidet_lang.ir.types import int32
from stdlib_ops.schedule.signature import KernelSignature, kernel_signature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import shape_of
from stdlib_ops.templates.views import Dim, Indices, View, product, unravel


@dataclass(frozen=True)
class ReductionViews:
    """The kernel `signature` of a reduction task, its `outer` and `extent` sizes, its `inner` size, the reduced
    axes' sizes (`middle`, whose product is `extent`), and the views of its input and output for a rows template
    (`rows`, where `inner` is 1) and a columns template (`columns`)."""

    signature: KernelSignature
    outer: Dim
    extent: Dim
    inner: Dim
    middle: tuple[Dim, ...]
    rows: Sequence[View]
    columns: Sequence[View]


def reduction_views(task: Task, axes: Sequence[int]) -> ReductionViews | None:
    """The views of `task` (one input, one output) reducing its input over `axes`, or None unless they are
    consecutive (and at least one)."""
    axes = tuple(axes)
    if len(task.inputs) != 1 or len(task.outputs) != 1 or not axes or axes != tuple(range(axes[0], axes[-1] + 1)):
        return None
    signature = kernel_signature(task.inputs, task.outputs)
    x, out = task.inputs[0], signature.outputs[0]
    shape = shape_of(x)
    lead, middle, trail = shape[:axes[0]], shape[axes[0]:axes[-1] + 1], shape[axes[-1] + 1:]
    zero = E.Constant(0, int32)
    kept = [zero] * len(middle) if task.attrs.get("keepdims") else []

    def x_index(o: E.Expr, k: E.Expr, j: E.Expr) -> Indices:
        return (*unravel(o, lead), *unravel(k, middle), *unravel(j, trail))

    def out_index(o: E.Expr, j: E.Expr) -> Indices:
        return (*unravel(o, lead), *kept, *unravel(j, trail)) or (zero,)

    rows = [View(x, lambda i: x_index(i[0], i[1], zero)), View(out, lambda i: out_index(i[0], zero))]
    columns = [View(x, lambda i: x_index(*i)), View(out, lambda i: out_index(*i))]
    return ReductionViews(signature, product(lead), product(middle), product(trail), tuple(middle), rows, columns)

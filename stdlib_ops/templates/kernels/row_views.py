"""The row-wise tasks seen as the `[rows, cols]` matrices their templates compute over, and their registration.

`softmax` / `log_softmax` over the last axis, `layer_norm` over trailing axes with a weight and a bias, and
`rms_norm` over the last axis with a weight: `x` of shape `[*lead, *trail]` (`trail` the normalized axes) is the
matrix `[product(lead), product(trail)]`, the parameters (of shape `trail`) are vectors of `cols` values, and the
output is viewed as `x` is. `register_row_templates` registers one target's templates for the four tasks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from hidet_lang.ir import expr as E
from hidet_lang.ir.types import dtype_from_name
from hidet_lang.target import Target
from stdlib_ops.schedule.signature import kernel_signature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import Instantiate, TemplateBinding, common_dtype, shape_of
from stdlib_ops.templates.cpu_lanes import machine_lanes
from stdlib_ops.templates.kernels.row_chunks import vector_lanes
from stdlib_ops.templates.registry import library_template
from stdlib_ops.templates.views import Dim, View, product, unravel


@dataclass(frozen=True)
class RowTemplates:
    """One target's row-wise templates: the dtypes they take, the template of each task name, whether they need
    the machine's vector FMA (`cpu_lanes.machine_lanes`), and whether they take a `vectors` flag (16-byte accesses
    of a row, `row_chunks`), which `rows_binding` gives."""

    dtypes: tuple[str, ...]
    templates: Mapping[str, Instantiate]
    needs_lanes: bool = False
    vectors: bool = False


def whole_vectors(dims: Sequence[Dim], dtype: str) -> bool:
    """Whether a row over axes `dims` may be accessed as 16-byte vectors of `dtype` once it is a whole number of
    them: always for one axis; over several, only where the innermost is a known multiple of a vector, since a
    fused prologue or epilogue indexes a vector's lanes along that axis alone."""
    lanes = vector_lanes(dtype_from_name(dtype))
    return len(dims) <= 1 or (isinstance(dims[-1], int) and dims[-1] % lanes == 0)


def row_view(tensor: E.Var, lead: Sequence[Dim], trail: Sequence[Dim]) -> View:
    """`tensor` of shape `[*lead, *trail]` seen as the matrix `[product(lead), product(trail)]`."""
    return View(tensor, lambda i: (*unravel(i[0], lead), *unravel(i[1], trail)))


def trailing_axes(task: Task, key: str) -> int | None:
    """How many trailing axes the task's attribute `key` (an axis or axes) names, or None if they are not the
    trailing axes of its first input."""
    rank = len(shape_of(task.inputs[0]))
    value = task.attrs.get(key)
    axes = (value,) if isinstance(value, int) else tuple(value) if isinstance(value, (tuple, list)) else ()
    count = len(axes)
    return count if count and tuple(axes) == tuple(range(rank - count, rank)) else None


def rows_binding(task: Task, rows: RowTemplates, key: str, params: int, **options: object) -> TemplateBinding | None:
    """The binding of `task` to its template among `rows` (by the task's name), over the trailing axes that
    attribute `key` names, for a task whose inputs are `x` and `params` parameter tensors of the normalized shape;
    None when the task is not of that form (or the templates need vector FMA and the machine has none)."""
    count = trailing_axes(task, key)
    dtype = common_dtype(task, rows.dtypes)
    if count is None or dtype is None or len(task.inputs) != 1 + params or len(task.outputs) != 1:
        return None
    if rows.needs_lanes and machine_lanes() is None:
        return None
    signature = kernel_signature(task.inputs, task.outputs)
    x = task.inputs[0]
    shape = shape_of(x)
    lead, trail = shape[:len(shape) - count], shape[len(shape) - count:]
    if any(shape_of(p) != trail for p in task.inputs[1:]):
        return None
    template = rows.templates[task.name]
    sizes = {"rows": product(lead), "cols": product(trail)}
    views = [row_view(x, lead, trail), *[View(p, lambda i: tuple(unravel(i[0], trail))) for p in task.inputs[1:]],
             row_view(signature.outputs[0], lead, trail)]
    if rows.vectors:
        options = {**options, "vectors": whole_vectors(trail, dtype)}
    return TemplateBinding(template.__name__, template, signature, sizes, views, {"dtype": dtype, **options})


def softmax_rows(task: Task, rows: RowTemplates) -> TemplateBinding | None:
    """Softmax or log-softmax over the last axis."""
    return rows_binding(task, rows, "axis", 0) if trailing_axes(task, "axis") == 1 else None


def layer_norm_rows(task: Task, rows: RowTemplates) -> TemplateBinding | None:
    """Layer norm over trailing axes, with a weight and a bias."""
    if task.attrs.get("params") != (True, True):
        return None
    return rows_binding(task, rows, "axes", 2, eps=float(task.attrs["eps"]))


def rms_norm_rows(task: Task, rows: RowTemplates) -> TemplateBinding | None:
    """RMS norm over the last axis, with a weight."""
    if task.attrs.get("params") != (True,) or trailing_axes(task, "axes") != 1:
        return None
    return rows_binding(task, rows, "axes", 1, eps=float(task.attrs["eps"]))


ROW_ADAPTERS: dict[str, Callable[[Task, RowTemplates], TemplateBinding | None]] = {
    "softmax": softmax_rows, "log_softmax": softmax_rows, "layer_norm": layer_norm_rows, "rms_norm": rms_norm_rows,
}
"""The adapter of each row-wise task."""


def register_row_templates(target: Target, rows: RowTemplates) -> None:
    """Register `rows`' template of each row-wise task on `target` (`registry.library_template`)."""
    for name in rows.templates:
        library_template(name, target)(functools.partial(ROW_ADAPTERS[name], rows=rows))

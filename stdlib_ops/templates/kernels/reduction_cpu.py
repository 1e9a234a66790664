"""CPU templates for the reductions `sum`, `mean`, `max` and `min` over a run of consecutive axes, seen as the 3-D
view `[outer, extent, inner]` of the input (the reduced axes in the middle) and `[outer, inner]` of the output.

- **Rows** (`reduce_rows_cpu`, trailing axes: `inner` is 1). The rows are spread over the OpenMP threads; a thread
  copies its row, `chunk` values at a time, into a local f32 buffer with element reads (where a fused prologue is
  computed) and reduces it with the vector functions of `row_reduce_cpu` (vector accumulators of the machine's
  widest type: the C compiler may not reorder a scalar f32 sum into vectors itself), then stores one element.
- **Columns** (`reduce_columns_cpu`, leading or middle axes: `inner` above 1). Each parallel work item is one
  `outer` index and a strip of at most `chunk` consecutive `inner` positions; it accumulates the strip's rows into a
  local f32 array, `acc[j] = acc[j] + x[o, r, j]`, row after row: lane-independent operations on contiguous
  memory, which the C compiler vectorizes without reordering any sum. Strips are narrowed (to whole vectors) until
  there are at least `min_items` work items, so both cores get work when `outer` is 1.

Sums are in f32 whatever the storage dtype (f16 values are converted as they are read, the result rounded once);
`mean` divides the sum by `extent`. `max` and `min` give NaN where the reduced values hold one, as numpy's `max`
and the rule-based scheduler's reductions do: the rows through `row_max`/`row_min` (a NaN lane mask, looked at
once per chunk), the columns by `acc = acc if acc != acc else max(acc, x)`: lane-independent compares and
selects that the C compiler vectorizes as it did the plain `max`. Both kernels follow the fusion contract: the
input is only read element by element, the output only stored element by element. The loops along contiguous
memory count in i64, for the reason `normalization_cpu` gives.
"""

from __future__ import annotations

import math

from hidet_lang import attrs, f32, grid, i32, i64, register_tensor, script, script_module
from hidet_lang.frontend.script import ScriptModule
from hidet_lang.ir.types import DataType
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding, common_dtype
from stdlib_ops.templates.cpu_lanes import machine_lanes, template_lanes
from stdlib_ops.templates.kernels.reduction_views import reduction_views
from stdlib_ops.templates.kernels.row_reduce_cpu import row_reducers
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype
from stdlib_ops.templates.registry import LIBRARY_CPU, library_template
from stdlib_ops.templates.sizes import bind_sizes

REDUCTION_CPU_DTYPES = ("float32", "float16", "bfloat16")
REDUCTION_CPU_KINDS = ("sum", "mean", "max", "min")

ROW_CHUNK = 4096
"""The default length of a thread's row buffer, in f32 values (16 KB: it stays in the L1 cache)."""

COLUMN_CHUNK = 1024
"""The default widest strip of the column schedule, in f32 accumulators (4 KB)."""

STRIP_ALIGN = 16
"""Strips are narrowed in steps of this many columns (a 64-byte cache line of f32, one AVX-512 vector)."""


def _check(template: str, kind: str, dtype: str, sizes: dict[str, Size], chunk: int) -> DataType:
    """The storage dtype, after checking the template's parameters."""
    check_sizes(template, sizes)
    require(kind in REDUCTION_CPU_KINDS, template, f"kind {kind!r} (supported: {', '.join(REDUCTION_CPU_KINDS)})")
    require(chunk >= 1, template, f"a chunk of {chunk} values")
    return template_dtype(template, dtype, REDUCTION_CPU_DTYPES)


def reduce_rows_cpu(outer: Size, extent: Size, kind: str, dtype: str = "float32", *, lanes: int | None = None,
                    chunk: int = ROW_CHUNK) -> ScriptModule:
    """A module with one CPU kernel `reduce(<symbolic sizes>, x, y)`: `y[o] = kind(x[o, :])`.

    `x: dtype[outer, extent]`, `y: dtype[outer]`; each size is an int or a symbolic name; `kind` is 'sum', 'mean',
    'max' or 'min'. `lanes`: the vector width (4, 8 or 16; default the machine's widest); `chunk`: the length of
    the row buffer."""
    name = "reduce_rows_cpu"
    dt = _check(name, kind, dtype, {"outer": outer, "extent": extent}, chunk)
    r = row_reducers(template_lanes(name, lanes))
    start = {"sum": 0.0, "mean": 0.0, "max": -math.inf, "min": math.inf}[kind]

    with script_module() as module:

        @script
        def reduce(outer: i32, extent: i32, x: dt[outer, extent], y: dt[outer]):
            attrs.func_kind = "cpu_kernel"
            for o in grid(outer, attrs="p"):
                buf = register_tensor(f32, [chunk])
                acc: f32 = start
                for c0 in range(0, extent, chunk):
                    n = min(chunk, extent - c0)
                    for j in range(i64(n)):
                        buf[j] = f32(x[o, c0 + j])
                    if kind == "max":
                        if acc == acc:  # once NaN, the row's result is NaN
                            acc = max(acc, r.row_max(~buf[0], n))  # a NaN second: taken
                    elif kind == "min":
                        if acc == acc:
                            acc = min(acc, r.row_min(~buf[0], n))
                    else:
                        acc += r.row_sum(~buf[0], n)
                if kind == "mean":
                    acc = acc / f32(extent)
                y[o] = dt(acc)

    return bind_sizes(module, "reduce", {"outer": outer, "extent": extent})


def reduce_columns_cpu(outer: Size, extent: Size, inner: Size, kind: str, dtype: str = "float32", *,
                       chunk: int = COLUMN_CHUNK, min_items: int = 4) -> ScriptModule:
    """A module with one CPU kernel `reduce(<symbolic sizes>, x, y)`: `y[o, j] = kind(x[o, :, j])`.

    `x: dtype[outer, extent, inner]`, `y: dtype[outer, inner]`; each size is an int or a symbolic name; `kind` as
    for `reduce_rows_cpu`. `chunk`: the widest strip of columns a work item accumulates; `min_items`: the least
    number of work items the strips are narrowed to give, where `inner` allows."""
    name = "reduce_columns_cpu"
    dt = _check(name, kind, dtype, {"outer": outer, "extent": extent, "inner": inner}, chunk)
    require(min_items >= 1, name, "min_items must be positive")

    with script_module() as module:

        @script
        def reduce(outer: i32, extent: i32, inner: i32, x: dt[outer, extent, inner], y: dt[outer, inner]):
            attrs.func_kind = "cpu_kernel"
            strip = min(chunk, inner)
            if outer * ((inner + strip - 1) // strip) < min_items:  # narrower strips, whole cache lines
                wanted = (min_items + outer - 1) // outer
                aligned = ((inner + wanted - 1) // wanted + STRIP_ALIGN - 1) // STRIP_ALIGN * STRIP_ALIGN
                strip = min(max(STRIP_ALIGN, aligned), inner, chunk)
            strips = (inner + strip - 1) // strip
            for item in grid(outer * strips, attrs="p"):
                o = item // strips
                j0 = item % strips * strip
                n = min(strip, inner - j0)
                acc = register_tensor(f32, [chunk])
                for j in range(i64(n)):
                    acc[j] = f32(x[o, 0, j0 + j])
                for k in range(1, extent):
                    for j in range(i64(n)):  # along a row of x: the C compiler vectorizes it
                        if kind == "max":
                            a = acc[j]  # a NaN in acc[j] is kept; max gives a NaN x, its second operand
                            acc[j] = a if a != a else max(a, f32(x[o, k, j0 + j]))
                        elif kind == "min":
                            a = acc[j]
                            acc[j] = a if a != a else min(a, f32(x[o, k, j0 + j]))
                        else:
                            acc[j] = acc[j] + f32(x[o, k, j0 + j])
                for j in range(i64(n)):
                    if kind == "mean":
                        y[o, j0 + j] = dt(acc[j] / f32(extent))
                    else:
                        y[o, j0 + j] = dt(acc[j])

    return bind_sizes(module, "reduce", {"outer": outer, "extent": extent, "inner": inner})


def reduction_on_cpu(task: Task) -> TemplateBinding | None:
    """A reduction (its kind: the task's name) over consecutive axes, as `[outer, extent, inner]`: the rows
    template when no axis follows the reduced ones, the columns template otherwise."""
    dtype = common_dtype(task, REDUCTION_CPU_DTYPES)
    views = reduction_views(task, task.attrs.get("axes") or ())
    if views is None or dtype is None or machine_lanes() is None:
        return None
    sizes = {"outer": views.outer, "extent": views.extent}
    options = {"kind": task.name, "dtype": dtype}
    if isinstance(views.inner, int) and views.inner == 1:
        return TemplateBinding("reduce_rows_cpu", reduce_rows_cpu, views.signature, sizes, views.rows, options)
    return TemplateBinding("reduce_columns_cpu", reduce_columns_cpu, views.signature, {**sizes, "inner": views.inner},
                           views.columns, options)


for _kind in REDUCTION_CPU_KINDS:
    library_template(_kind, LIBRARY_CPU)(reduction_on_cpu)
del _kind

"""Reductions over a row of f32 values in local memory, with the CPU's vector types, as `cpu_internal` functions.

`row_reducers(lanes)` gives the functions for vectors of `lanes` f32 lanes (4, 8 or 16; `cpu_lanes` says which this
machine has). Each function takes a pointer `p` to `n >= 1` floats (a template's row buffer, never a kernel's
tensor, so the fusion contract is not involved), runs whole vectors through vector accumulators (two, alternating,
where the loop is bound by the latency of its additions or maxima rather than by exp), adds them, combines the lanes
as a tree (`hidet_lang.cpu`'s `reduce_sum` / `reduce_max`), and finishes the last `n % lanes` values with scalars.
Sums are in f32: each lane adds about `n / (2 lanes)` terms, so a sum is off by about `(n / lanes + log2(lanes) + 1)
* 2^-24` of the sum of the terms' magnitudes.

- `row_max(p, n)`, `row_min(p, n)`: the largest / smallest value, NaN when the row holds one (numpy's `max`). The
  lanes pick by the `max` / `min` rule of `hidet_lang.cpu` (which may skip a NaN), and a NaN lane mask rides along:
  `seen = seen + max(inf, v)` is +inf in a lane that saw only numbers (infinities included) and NaN, for good,
  in one that saw a NaN; it is looked at once, at the end. An independent chain per accumulator, so the loop keeps
  its speed on NaN-free data.
- `row_shift(p, n)`: the largest value by the `max` rule alone (a NaN may be skipped): the shift of softmax,
  whose NaN reaches every output through `exp(NaN - shift)` and the sum anyway.
- `row_sum(p, n)`: the sum.
- `row_exp_sum(p, n, shift)`: the sum of `exp(p[j] - shift)`; `row_exp_sum_in_place` also stores each
  `exp(p[j] - shift)` into `p[j]`. Whole vectors use the vector exp (within 1 ulp), the scalar tail the C
  library's `expf`.
- `row_deviations(p, n, center, out)`: `out[0] = sum(p[j] - center)`, `out[1] = sum((p[j] - center)^2)`, for the
  corrected two-pass variance (see `normalization_cpu`).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

from hidet_lang import attrs, f32, i32, script
from hidet_lang import cpu as V
from hidet_lang.frontend.script import ScriptFunction
from stdlib_ops.templates.cpu_lanes import VECTOR_LANES
from stdlib_ops.templates.params import require


class RowReducers(NamedTuple):
    """The `cpu_internal` row functions of one vector width (see the module docstring)."""

    row_max: ScriptFunction
    row_min: ScriptFunction
    row_shift: ScriptFunction
    row_sum: ScriptFunction
    row_exp_sum: ScriptFunction
    row_exp_sum_in_place: ScriptFunction
    row_deviations: ScriptFunction


@functools.cache
def row_reducers(lanes: int) -> RowReducers:
    """The row functions for vectors of `lanes` f32 lanes (4, 8 or 16)."""
    require(lanes in VECTOR_LANES, "row_reducers", f"{lanes} lanes (the vector types have 4, 8 or 16)")
    prefix = f"f32x{lanes}_"
    load, store, broadcast, setzero, vexp, fma, reduce_sum = (getattr(V, prefix + name) for name in (
        "load", "store", "broadcast", "setzero", "exp", "fma", "reduce_sum"))
    W = lanes  # noqa: N806 - the width, a Python int while parsing
    names = {name: f"{name}_x{lanes}" for name in RowReducers._fields}  # one set of functions per width

    def extremum(kind: str, propagate_nan: bool) -> ScriptFunction:
        name, pick = names[f"row_{kind}" if propagate_nan else "row_shift"], getattr(V, f"{prefix}{kind}")
        reduce_lanes, scalar_pick = getattr(V, f"{prefix}reduce_{kind}"), max if kind == "max" else min
        vmax = getattr(V, f"{prefix}max")

        @script
        def row_extremum(p: ~f32, n: i32) -> f32:
            attrs.func_name = name
            attrs.func_kind = "cpu_internal"
            acc0 = broadcast(p[0])
            acc1 = acc0
            inf = broadcast(math.inf)
            seen0 = inf  # per lane: +inf while only numbers were seen, NaN from the first NaN on
            seen1 = inf
            j = 0
            while j + 2 * W <= n:
                v0 = load(p + j)
                v1 = load(p + j + W)
                acc0 = pick(acc0, v0)
                acc1 = pick(acc1, v1)
                if propagate_nan:
                    seen0 = seen0 + vmax(inf, v0)  # max(inf, v): v when it is NaN, else +inf
                    seen1 = seen1 + vmax(inf, v1)
                j += 2 * W
            if j + W <= n:
                v = load(p + j)
                acc0 = pick(acc0, v)
                if propagate_nan:
                    seen0 = seen0 + vmax(inf, v)
                j += W
            best = reduce_lanes(pick(acc0, acc1))
            seen = reduce_sum(seen0 + seen1)
            while j < n:
                best = scalar_pick(best, p[j])
                if propagate_nan:
                    seen += max(math.inf, p[j])
                j += 1
            if propagate_nan:
                if seen != seen:
                    return seen
            return best

        return row_extremum

    @script
    def row_sum(p: ~f32, n: i32) -> f32:
        attrs.func_name = names["row_sum"]
        attrs.func_kind = "cpu_internal"
        acc0 = setzero()
        acc1 = setzero()
        j = 0
        while j + 2 * W <= n:
            acc0 = acc0 + load(p + j)
            acc1 = acc1 + load(p + j + W)
            j += 2 * W
        if j + W <= n:
            acc0 = acc0 + load(p + j)
            j += W
        total = reduce_sum(acc0 + acc1)
        while j < n:
            total += p[j]
            j += 1
        return total

    def exp_sum(in_place: bool) -> ScriptFunction:
        name = names["row_exp_sum_in_place" if in_place else "row_exp_sum"]

        @script
        def row_exp_sum(p: ~f32, n: i32, shift: f32) -> f32:
            attrs.func_name = name
            attrs.func_kind = "cpu_internal"
            by = broadcast(shift)
            acc = setzero()
            j = 0
            while j + W <= n:
                e = vexp(load(p + j) - by)
                if in_place:
                    store(p + j, e)
                acc = acc + e
                j += W
            total = reduce_sum(acc)
            while j < n:
                s = math.exp(p[j] - shift)
                if in_place:
                    p[j] = s
                total += s
                j += 1
            return total

        return row_exp_sum

    @script
    def row_deviations(p: ~f32, n: i32, center: f32, out: ~f32):
        attrs.func_name = names["row_deviations"]
        attrs.func_kind = "cpu_internal"
        by = broadcast(center)
        acc0 = setzero()
        acc1 = setzero()
        squares0 = setzero()
        squares1 = setzero()
        j = 0
        while j + 2 * W <= n:
            d0 = load(p + j) - by
            d1 = load(p + j + W) - by
            acc0 = acc0 + d0
            acc1 = acc1 + d1
            squares0 = fma(d0, d0, squares0)
            squares1 = fma(d1, d1, squares1)
            j += 2 * W
        if j + W <= n:
            d = load(p + j) - by
            acc0 = acc0 + d
            squares0 = fma(d, d, squares0)
            j += W
        total = reduce_sum(acc0 + acc1)
        total_squares = reduce_sum(squares0 + squares1)
        while j < n:
            s = p[j] - center
            total += s
            total_squares += s * s
            j += 1
        out[0] = total
        out[1] = total_squares

    return RowReducers(extremum("max", True), extremum("min", True), extremum("max", False), row_sum,
                       exp_sum(False), exp_sum(True), row_deviations)

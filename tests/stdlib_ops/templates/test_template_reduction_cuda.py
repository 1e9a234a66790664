"""The CUDA reduction templates against float64 numpy on the emulator's checking mode: every kind over rows (a
warp per row, a block per row, symbolic sizes) and over columns, NaN and ties as numpy treats them; reductions of
`ops` reach them (group norm reaches the layer norm template), and a fused prologue and epilogue still apply."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import U, data

import stdlib_ops as ops
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.fusion.contract import the_kernel
from stdlib_ops.templates.kernels.reduction_cuda import (
    reduce_columns_cuda,
    reduce_rows_cuda,
)
from stdlib_ops.templates.registry import choose_schedule

THREADS = 64
REFERENCE = {
    "sum": lambda x, axis: x.sum(axis), "mean": lambda x, axis: x.mean(axis), "max": lambda x, axis: x.max(axis),
    "min": lambda x, axis: x.min(axis), "var": lambda x, axis: x.var(axis, ddof=1),
    "std": lambda x, axis: x.std(axis), "argmax": lambda x, axis: x.argmax(axis),
    "argmin": lambda x, axis: x.argmin(axis),
}
DDOF = {"var": 1}
# rows: short known rows (a warp each), long known rows (a block each), symbolic rows (a block each)
EXTENTS = {"warp": 33, "block": 1100, "symbolic": None}


@cache
def rows_kernel(kind: str, layout: str):
    extent = EXTENTS[layout] or "extent"
    return reduce_rows_cuda("outer", extent, kind, ddof=DDOF.get(kind, 0), threads=THREADS).build(check=True)


@cache
def columns_kernel(kind: str):
    return reduce_columns_cuda("outer", "extent", "inner", kind, ddof=DDOF.get(kind, 0),
                               threads=THREADS).build(check=True)


def assert_reduced(kind: str, got: np.ndarray, x: np.ndarray, axis: int) -> None:
    """`got` equals numpy's reduction of `x` along `axis`: indices and extrema exactly, sums within f32's error."""
    expected = REFERENCE[kind](x.astype(np.float64), axis)
    if kind.startswith("arg") or kind in ("max", "min"):
        np.testing.assert_array_equal(got, expected)
        return
    terms = x.shape[axis]
    magnitude = np.abs(x.astype(np.float64)).sum(axis) / (terms if kind != "sum" else 1)
    if kind in ("var", "std"):  # squared deviations: their sum's error, relative to their size (the variance)
        magnitude = np.maximum(magnitude, 1) ** 2
    # an f32 sum of n terms in any order is off by about n * 2^-24 of the terms' magnitudes (a few more roundings
    # for the mean, the deviations and the square root)
    bound = (terms + 8) * U * 4 * magnitude + 1e-30
    assert (np.abs(got - expected) <= bound).all(), f"max error {np.abs(got - expected).max()}"


# each kind once, on one of the layouts: the four code paths (sums, variances, extrema, arg-extrema) on each
ROW_CASES = [(kind, "symbolic") for kind in ("mean", "min", "std", "argmin")] + [
    ("sum", "warp"), ("var", "block"), ("max", "block"), ("argmax", "warp")]


@pytest.mark.parametrize(("kind", "layout"), ROW_CASES)
@settings(max_examples=example_count(2), deadline=None)
@given(draw=st.data(), outer=st.sampled_from([1, 5, 9]), nan=st.booleans())
def test_rows(kind: str, layout: str, draw: st.DataObject, outer: int, nan: bool) -> None:
    extent = EXTENTS[layout] or draw.draw(st.sampled_from([1, 7, 40, 257]), label="extent")
    x = data(draw.draw, (outer, extent), scale=4.0)
    x = np.round(x)  # whole numbers: many ties for argmax and argmin to break as numpy does
    if nan and kind in ("max", "min", "argmax", "argmin"):
        x[outer // 2, extent // 2] = np.nan
    arg = kind.startswith("arg")
    y = np.full(outer, -5 if arg else np.nan, np.int64 if arg else np.float32)
    kernel = rows_kernel(kind, layout)
    if EXTENTS[layout] is None:
        kernel(outer, extent, x, y)
    else:
        kernel(outer, x, y)
    if kind == "var" and extent == 1:
        assert np.isnan(y).all() or np.isinf(y).all()  # ddof=1 of one value: 0 / 0
        return
    assert_reduced(kind, y, x, 1)


@pytest.mark.parametrize("kind", ["sum", "max", "std"])  # the columns' code paths: sums, extrema, deviations
@settings(max_examples=example_count(3), deadline=None)
@given(draw=st.data(), outer=st.sampled_from([1, 3]), extent=st.sampled_from([2, 7, 70]),
       inner=st.sampled_from([2, 33, 70]), nan=st.booleans())
def test_columns(kind: str, draw: st.DataObject, outer: int, extent: int, inner: int, nan: bool) -> None:
    x = data(draw.draw, (outer, extent, inner), scale=4.0)
    if nan and kind in ("max", "min"):
        x[0, extent - 1, inner // 2] = np.nan
    y = np.full((outer, inner), np.nan, np.float32)
    columns_kernel(kind)(outer, extent, inner, x, y)
    assert_reduced(kind, y, x, 1)


@pytest.mark.parametrize(("make", "kernel"), [
    (lambda s: ops.sum(s, axis=-1), "reduce_rows_cuda"),
    (lambda s: ops.mean(s, axis=(1, 2)), "reduce_rows_cuda"),
    (lambda s: ops.max(s, axis=0), "reduce_columns_cuda"),
    (lambda s: ops.var(s, axis=1, ddof=1), "reduce_columns_cuda"),
    (lambda s: ops.argmin(s, axis=2), "reduce_rows_cuda"),
    (lambda s: ops.argmax(s, axis=0), "argmax"),  # an argmax over a leading axis: the rule-based scheduler's
    (lambda s: ops.sum(s, axis=(0, 2)), "sum"),  # axes that are not consecutive: the rule-based scheduler's
])
def test_reductions_of_ops_choose_the_templates(make, kernel: str) -> None:
    task = make(ops.symbol([4, 5, 6])).producer.task
    assert the_kernel(choose_schedule(task, Target.of("cuda")).module).name == kernel


def test_group_norm_uses_the_layer_norm_template() -> None:
    x = np.random.default_rng(2).uniform(-2, 2, (2, 6, 5, 7)).astype(np.float32)
    norm = ops.group_norm(ops.symbol([2, 6, 5, 7]), 3).producer.inputs[0].producer.task
    assert the_kernel(choose_schedule(norm, Target.of("cuda")).module).name == "layer_norm_cuda"
    got = ops.group_norm(ops.asarray(x, device="cuda"), 3).numpy()
    g = x.astype(np.float64).reshape(2, 3, -1)
    expected = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    # normalized values below sqrt(70); the statistics' f32 sums of 70 terms are off by 70 * 2^-24 relative
    np.testing.assert_allclose(got, expected, rtol=0, atol=80 * 8 * U * np.sqrt(70))


def test_a_prologue_and_an_epilogue_fuse_into_a_row_reduction() -> None:
    xs = ops.symbol([9, 40], "float32")
    compiled = ops.optimize(ops.trace_from(ops.relu(ops.sum(xs * 2.0, axis=-1)) + 1.0, [xs])).build("cuda")
    assert len(compiled.kernels) == 1
    x = np.random.default_rng(4).uniform(-1, 1, (9, 40)).astype(np.float32)
    expected = np.maximum((x.astype(np.float64) * 2).sum(-1), 0) + 1
    # 40 terms of magnitude up to 2: the f32 sum is off by about 40 * 2^-24 * 80
    np.testing.assert_allclose(compiled(x).numpy(), expected, rtol=0, atol=48 * U * 80)

"""The row-wise CUDA templates in each of their layouts (a warp per row, a block per row with the row in registers,
a block per row reading it each pass) and with or without the norms' weight and bias, against float64 numpy on the
emulator's checking mode; the tasks without parameters reach the templates through `ops`, and a fused epilogue
still applies to them in a compiled graph."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import U, assert_softmax_close, data, softmax_reference

import stdlib_ops as ops
from hidet_lang.testing import example_count
from stdlib_ops.templates.kernels.normalization_cuda import (
    MAX_CACHED,
    WARP_ROW_MAX_COLS,
    layer_norm_cuda,
    log_softmax_cuda,
    rms_norm_cuda,
    row_layout,
    softmax_cuda,
)

THREADS = 64  # rows past 64 * MAX_CACHED columns are read again each pass; a smaller block keeps them small
# columns: short (a warp per row), long with the row in registers, longer (read each pass), and symbolic
COLS = {"warp": st.sampled_from([7, 33]), "cached": st.just(1100),
        "streamed": st.just(THREADS * MAX_CACHED + 3),
        # known at run time only: in registers up to THREADS * MAX_CACHED columns, read pass by pass past them
        "symbolic": st.sampled_from([5, 40, 257, THREADS * MAX_CACHED, THREADS * MAX_CACHED + 1])}


def test_the_layouts_the_columns_choose() -> None:
    assert row_layout(WARP_ROW_MAX_COLS, THREADS).width == 32
    assert row_layout(1100, THREADS).width == THREADS and row_layout(1100, THREADS).cached == 18
    assert row_layout(THREADS * MAX_CACHED + 3, THREADS).cached == 0
    assert row_layout("cols", THREADS).cached == MAX_CACHED  # checked against the columns at run time
    # without a block size: the fewest threads that keep the row in registers (the most where none can)
    assert [(row_layout(c).threads, row_layout(c).cached) for c in (4096, 8192, 32768, 32769, "cols")] == [
        (128, 32), (256, 32), (1024, 32), (1024, 0), (512, 32)]


@cache
def built(template, layout: str, cols: int, **options):
    size = "cols" if layout == "symbolic" else cols
    return template("rows", size, threads=THREADS, **options).build(check=True)


def call(kernel, layout: str, x: np.ndarray, *tensors: np.ndarray) -> None:
    rows, cols = x.shape
    kernel(*((rows, cols) if layout == "symbolic" else (rows,)), x, *tensors)


def layer_norm_reference(x: np.ndarray, center: bool, eps: float) -> np.ndarray:
    x64 = x.astype(np.float64)
    if center:
        return (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + eps)
    return x64 / np.sqrt((x64 * x64).mean(1, keepdims=True) + eps)


@pytest.mark.parametrize("layout", sorted(COLS))
@settings(max_examples=example_count(3), deadline=None)
@given(draw=st.data(), rows=st.sampled_from([1, 5, 9]))
def test_softmax_and_log_softmax(layout: str, draw: st.DataObject, rows: int) -> None:
    cols = draw.draw(COLS[layout], label="cols")
    x = data(draw.draw, (rows, cols), scale=30.0)
    y = np.full_like(x, np.nan)
    call(built(softmax_cuda, layout, cols), layout, x, y)
    assert_softmax_close(y, x)
    if layout in ("warp", "streamed"):
        return  # log-softmax shares its layouts' code with softmax: two of them keep the builds few
    call(built(log_softmax_cuda, layout, cols), layout, x, y)
    _, shifted, log_total = softmax_reference(x)
    # x - max - log(sum): two roundings of the terms' size, and log of a sum off by cols * 2^-24 relative
    bound = 4 * U * (np.abs(x) + np.abs(shifted) + np.abs(log_total)) + (cols + 8) * U
    assert (np.abs(y - (shifted - log_total)) <= bound).all()


# every layout without parameters; with both, a weight alone and a bias alone on one layout each (few builds)
NORM_CASES = [(layout, False, False) for layout in sorted(COLS)] + [("symbolic", True, True), ("warp", False, True),
                                                                   ("cached", True, False)]


@pytest.mark.parametrize(("layout", "weight", "bias"), NORM_CASES)
@settings(max_examples=example_count(2), deadline=None)
@given(draw=st.data(), rows=st.sampled_from([1, 5, 9]))
def test_layer_norm_with_and_without_parameters(layout: str, weight: bool, bias: bool, draw: st.DataObject,
                                                rows: int) -> None:
    cols = draw.draw(COLS[layout], label="cols")
    x = data(draw.draw, (rows, cols), scale=3.0) + np.float32(draw.draw(st.sampled_from([0.0, 5.0])))
    w, b = data(draw.draw, (cols,)), data(draw.draw, (cols,))
    y = np.full_like(x, np.nan)
    call(built(layer_norm_cuda, layout, cols, weight=weight, bias=bias), layout, x,
         *([w] if weight else []), *([b] if bias else []), y)
    expected = layer_norm_reference(x, True, 1e-5) * (w if weight else 1) + (b if bias else 0)
    # the mean is off by cols * 2^-24 of max |x| and scaled by 1/std, the normalized values reach sqrt(cols)
    inv_std = 1 / np.sqrt(x.astype(np.float64).var(1, keepdims=True) + 1e-5)
    magnitude = (np.abs(x).max(1, keepdims=True) * inv_std * (np.abs(w) if weight else 1) * (1 + np.sqrt(cols))
                 + (np.abs(b) if bias else 0))
    assert (np.abs(y - expected) <= 8 * (cols + 2) * U * magnitude).all()


@pytest.mark.parametrize(("layout", "weight"), [("warp", False), ("cached", False), ("symbolic", True)])
@settings(max_examples=example_count(2), deadline=None)
@given(draw=st.data(), rows=st.sampled_from([1, 5, 9]))
def test_rms_norm_with_and_without_weight(layout: str, weight: bool, draw: st.DataObject, rows: int) -> None:
    cols = draw.draw(COLS[layout], label="cols")
    x = data(draw.draw, (rows, cols), scale=3.0)
    w = data(draw.draw, (cols,))
    y = np.full_like(x, np.nan)
    call(built(rms_norm_cuda, layout, cols, weight=weight), layout, x, *([w] if weight else []), y)
    expected = layer_norm_reference(x, False, 1e-6) * (w if weight else 1)
    # the mean of squares is off by cols * 2^-24 relative (positive terms); rsqrt and two products add a few ulps
    np.testing.assert_allclose(y, expected, rtol=(cols + 8) * U, atol=2.0**-146)


@settings(max_examples=example_count(2), deadline=None)
@given(draw=st.data())
def test_half_precision_rows_in_registers(draw: st.DataObject) -> None:
    x = data(draw.draw, (3, 1100), "float16", scale=4.0)
    y = np.zeros_like(x)
    built(layer_norm_cuda, "cached", 1100, dtype="float16", weight=False, bias=False)(3, x, y)
    # f32 arithmetic as above, then one rounding to f16 (2^-11 relative; f16's subnormal spacing 2^-24)
    np.testing.assert_allclose(y, layer_norm_reference(x, True, 1e-5), rtol=2.0**-11 + 1100 * 8 * U, atol=2.0**-13)


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_norms_without_parameters_use_the_template_and_fuse_an_epilogue(op: str) -> None:
    xs = ops.symbol([6, 3, 40], "float32")
    norm = ops.layer_norm(xs, [3, 40]) if op == "layer_norm" else ops.rms_norm(xs, [3, 40])
    compiled = ops.optimize(ops.trace_from(ops.relu(norm) * 2.0, [xs])).build("cuda")
    # one kernel, the template's (a warp per row of 120 columns: its warp_sum), the epilogue fused into it
    assert len(compiled.kernels) == 1 and "warp_sum" in [f.name for f in compiled.modules[0].ir.functions]
    x = np.random.default_rng(3).uniform(-2, 2, (6, 3, 40)).astype(np.float32)
    flat = layer_norm_reference(x.reshape(6, 120), op == "layer_norm", 1e-5 if op == "layer_norm" else 1e-6)
    expected = np.maximum(flat, 0).reshape(6, 3, 40) * 2
    # normalized values below sqrt(120); the statistics' f32 sums are off by 120 * 2^-24 relative
    np.testing.assert_allclose(compiled(x).numpy(), expected, rtol=0, atol=130 * 8 * U * np.sqrt(120))


def test_symbolic_columns_take_the_registers_up_to_their_share_and_passes_past_it() -> None:
    # one kernel for both: the row in registers at THREADS * MAX_CACHED columns, read pass by pass one column past
    rng = np.random.default_rng(7)
    softmax, norm = built(softmax_cuda, "symbolic", 0), built(layer_norm_cuda, "symbolic", 0, weight=False, bias=False)
    for cols in (THREADS * MAX_CACHED, THREADS * MAX_CACHED + 1):
        x = (rng.standard_normal((3, cols)) * 4).astype(np.float32)
        y = np.full_like(x, np.nan)
        call(softmax, "symbolic", x, y)
        assert_softmax_close(y, x)
        call(norm, "symbolic", x, y)
        magnitude = np.abs(x).max(1, keepdims=True) / np.sqrt(x.astype(np.float64).var(1, keepdims=True)) * (
            1 + np.sqrt(cols))
        assert (np.abs(y - layer_norm_reference(x, True, 1e-5)) <= 8 * (cols + 2) * U * magnitude).all()

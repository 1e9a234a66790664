"""The row-wise CPU templates (softmax, log-softmax, layer norm, RMS norm) against float64 numpy references, for
each vector width the machine has (16 lanes with AVX-512F, 8 with AVX and FMA; 4 at the odd sizes), through one
build with symbolic sizes: every cols size (1, 3, 17, 255, 1000, 1024: whole vectors, scalar tails and both), rows
held in one buffer and rows taken in chunks (a 64-value buffer), [4096, 1024], hypothesis-drawn shapes and data
with large magnitudes (softmax) and large means (layer norm), f16 storage.

Errors are bounded by what f32 arithmetic allows: a sum of n terms in any order is off by at most n * 2^-24 of the
sum of their magnitudes, exp (the vector one: 1 ulp; the C library's in the tails) and log and sqrt by an ulp or
two; a row taken in c chunks adds one rounding a chunk where the running sums are merged."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import SUBNORMAL, H, U, assert_softmax_close, data, sizes, softmax_reference

from hidet_lang.testing import example_count
from stdlib_ops.templates.cpu_lanes import machine_has_lanes
from stdlib_ops.templates.kernels.normalization_cpu import (
    CHUNK,
    layer_norm_cpu,
    log_softmax_cpu,
    rms_norm_cpu,
    softmax_cpu,
)

ODD_COLS = (1, 3, 17, 255, 1000, 1024)
SMALL_CHUNK = 64
TEMPLATES = {"softmax": softmax_cpu, "log_softmax": log_softmax_cpu, "layer_norm": layer_norm_cpu,
             "rms_norm": rms_norm_cpu}


def widths(*lanes: int) -> list[object]:
    """`lanes` as test parameters, each skipped where the machine lacks its vector type."""
    return [pytest.param(n, marks=pytest.mark.skipif(not machine_has_lanes(n), reason=f"no {n}-lane vectors here"))
            for n in lanes]


@cache
def built(kind: str, lanes: int | None = None, chunk: int = CHUNK, rows: object = "rows", cols: object = "cols",
          dtype: str = "float32") -> object:
    return TEMPLATES[kind](rows, cols, dtype=dtype, lanes=lanes, chunk=chunk).build()


def run(kind: str, x: np.ndarray, w: np.ndarray, b: np.ndarray, **options: object) -> np.ndarray:
    """The template `kind` (symbolic sizes) on `x`, with the parameter tensors it takes."""
    rows, cols = x.shape
    y = np.full_like(x, np.nan)
    params = {"softmax": (), "log_softmax": (), "layer_norm": (w, b), "rms_norm": (w,)}[kind]
    built(kind, **options)(rows, cols, x, *params, y)
    return y


def chunks(cols: int, chunk: int) -> int:
    return -(-cols // chunk)


def check(kind: str, y: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray, chunk: int = CHUNK) -> None:
    """`y` within f32's error of the float64 result of `kind` on `x` (see each bound)."""
    cols = x.shape[1]
    merges = chunks(cols, chunk) * U  # a rounding for each chunk's merge into the running sums
    if kind == "softmax":
        assert_softmax_close(y, x, extra_rtol=merges)
    elif kind == "log_softmax":
        _, shifted, log_total = softmax_reference(x)
        # x - max - log(sum): two roundings of the terms' size, and log of a sum off by (cols + chunks) * 2^-24
        bound = 4 * U * (np.abs(x) + np.abs(shifted) + np.abs(log_total)) + (cols + 8) * U + merges
        assert (np.abs(y - (shifted - log_total)) <= bound).all()
    elif kind == "layer_norm":
        assert_layer_norm_close(y, x, w, b, chunk)
    else:
        x64 = x.astype(np.float64)
        inv_rms = 1 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6)
        # the mean of squares is off by cols * 2^-24 relative (positive terms); rsqrt and two products a few ulps
        np.testing.assert_allclose(y, x64 * inv_rms * w, rtol=(cols + 8) * U, atol=SUBNORMAL)


def assert_layer_norm_close(y: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray, chunk: int,
                            extra: float = 0.0) -> None:
    """`y` within f32's error of layer norm (eps 1e-5) by the corrected two-pass algorithm, however large the
    rows' means: the mean is off by a rounding of its size a chunk merge plus the sum of the deviations' error
    (cols * 2^-24 of the largest deviation); the variance, a sum of positive squares, by cols * 2^-24 relative,
    half of which reaches 1/std; the products and the sum of the output a few roundings of their size. A one-pass
    variance (E[x^2] - E[x]^2) is off by cols * 2^-24 of the mean's square and fails this by far."""
    cols = x.shape[1]
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    deviation = x64 - mean
    inv_std = 1 / np.sqrt(x64.var(axis=1, keepdims=True) + 1e-5)
    expected = deviation * inv_std * w + b
    mean_error = (chunks(cols, chunk) + 1) * U * np.abs(mean) + (cols + 4) * U * np.abs(deviation).max(1, keepdims=True)
    bound = np.abs(w) * inv_std * (2 * mean_error + np.abs(deviation) * (cols + 16) * U) \
        + 4 * U * (np.abs(expected) + np.abs(b)) + extra + SUBNORMAL
    err = np.abs(y - expected)
    worst = np.unravel_index(np.argmax(err - bound), y.shape)
    assert (err <= bound).all(), f"{y[worst]} != {expected[worst]} at {worst}, bound {bound[worst]}"


def row_data(rows: int, cols: int, seed: int, scale: float = 1.0, offset: float = 0.0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * scale + offset).astype(np.float32)
    return x, rng.uniform(-2, 2, cols).astype(np.float32), rng.uniform(-2, 2, cols).astype(np.float32)


@pytest.mark.parametrize("kind", sorted(TEMPLATES))
@pytest.mark.parametrize("chunk", [CHUNK, SMALL_CHUNK], ids=["one chunk", "chunked"])
@pytest.mark.parametrize("lanes", widths(16, 8))
def test_every_cols_size_matches_numpy(kind: str, chunk: int, lanes: int) -> None:
    for cols in ODD_COLS:
        x, w, b = row_data(5, cols, seed=cols, scale=10.0, offset=3.0)
        check(kind, run(kind, x, w, b, lanes=lanes, chunk=chunk), x, w, b, chunk)


@pytest.mark.parametrize("kind", sorted(TEMPLATES))
@pytest.mark.parametrize("lanes", widths(4))
def test_four_lane_vectors(kind: str, lanes: int) -> None:
    for cols in ODD_COLS:
        x, w, b = row_data(3, cols, seed=cols, scale=10.0)
        check(kind, run(kind, x, w, b, lanes=lanes), x, w, b)


@pytest.mark.parametrize("kind", sorted(TEMPLATES))
def test_the_benchmark_shape_with_sizes_known_at_build_time(kind: str) -> None:
    x, w, b = row_data(4096, 1024, seed=7)
    y = np.full_like(x, np.nan)
    params = {"softmax": (), "log_softmax": (), "layer_norm": (w, b), "rms_norm": (w,)}[kind]
    built(kind, rows=4096, cols=1024)(x, *params, y)
    check(kind, y, x, w, b)


@pytest.mark.parametrize("kind", sorted(TEMPLATES))
@settings(max_examples=example_count(8), deadline=None)
@given(draw=st.data(), chunk=st.sampled_from([CHUNK, SMALL_CHUNK]))
def test_drawn_shapes_and_data(kind: str, draw: st.DataObject, chunk: int) -> None:
    rows, cols = draw.draw(sizes(20), label="rows"), draw.draw(sizes(1100), label="cols")
    scale = draw.draw(st.sampled_from([1.0, 100.0, 1e4]), label="scale")  # exp(100) overflows: the shift is needed
    offset = draw.draw(st.sampled_from([0.0, 5.0, 1e4]), label="offset")  # a large mean for layer norm
    x = data(draw.draw, (rows, cols), scale=scale) + np.float32(offset)
    w, b = data(draw.draw, (cols,)), data(draw.draw, (cols,))
    check(kind, run(kind, x, w, b, chunk=chunk), x, w, b, chunk)


@pytest.mark.parametrize("chunk", [CHUNK, SMALL_CHUNK], ids=["one chunk", "chunked"])
def test_layer_norm_keeps_its_accuracy_for_a_large_mean(chunk: int) -> None:
    x, w, b = row_data(8, 1000, seed=3, scale=1.0, offset=1e4)  # std 1 around 10000: mean^2 / var = 1e8
    y = run("layer_norm", x, w, b, chunk=chunk)
    assert_layer_norm_close(y, x, w, b, chunk)
    # and the normalized values are right to about 1e-3 (the inputs themselves are 2^-10 apart near 1e4)
    x64 = x.astype(np.float64)
    z = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
    assert np.abs((y - b) / w - z).max() < 2e-3


def test_softmax_of_masked_rows() -> None:
    x, _, _ = row_data(4, 300, seed=5, scale=3.0)
    x[:, ::3] = -np.inf  # masked positions: exp(-inf) = 0
    y = run("softmax", x, x[0], x[0], chunk=SMALL_CHUNK)
    expected, _, _ = softmax_reference(x)
    assert (y[:, ::3] == 0).all()
    np.testing.assert_allclose(y, expected, rtol=(300 + 16) * U, atol=SUBNORMAL)


@settings(max_examples=example_count(4), deadline=None)
@given(draw=st.data())
def test_half_precision_rows_compute_in_f32(draw: st.DataObject) -> None:
    rows, cols = draw.draw(sizes(16), label="rows"), draw.draw(sizes(300), label="cols")
    x = data(draw.draw, (rows, cols), "float16", scale=8.0)
    w, b = data(draw.draw, (cols,), "float16"), data(draw.draw, (cols,), "float16")
    y = np.zeros_like(x)
    built("softmax", dtype="float16")(rows, cols, x, y)
    # f32 arithmetic as above, then one rounding to f16 (2^-11 relative; subnormal halves have 2^-24 spacing)
    assert_softmax_close(y.astype(np.float32), x.astype(np.float32), extra_rtol=H, atol=2.0**-24)
    built("layer_norm", dtype="float16")(rows, cols, x, w, b, y)
    x32, w32, b32 = (a.astype(np.float32) for a in (x, w, b))
    ref = (x32 - x32.mean(1, keepdims=True)) / np.sqrt(x32.var(1, keepdims=True) + 1e-5) * w32 + b32
    assert_layer_norm_close(y.astype(np.float32), x32, w32, b32, CHUNK, extra=H * np.abs(ref) + 2.0**-24)

"""bfloat16 on the CPU: computed through f32 and rounded back to nearest, ties to even (as torch and ml_dtypes
round), checked against numpy on ml_dtypes' bf16 arrays.

Tolerances follow from the arithmetic. An element-wise `+ - * /` of bf16 values is one f32 operation on exact
operands and one rounding to bf16: numpy doing the same in f32 gives the same bits. A math function differs from
numpy's f32 one by an f32 ulp or so, which moves the bf16 result by at most one bf16 ulp (2^-7 relative: 8
significant bits). A matmul or convolution accumulates exact f32 products (8-bit significands multiply exactly in
24 bits) in f32 in its own order, within `terms * 2^-24` of the sum of the products' magnitudes from numpy's f32
sum, and rounds once to bf16 (half a bf16 ulp: 2^-8 relative) at the end.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdlib_ops as ops

BF16 = ml_dtypes.bfloat16
BF16_ULP = 2.0 ** -7  # the spacing of bf16 values in [1, 2)


def bf16(values: np.ndarray) -> np.ndarray:
    """`values` rounded to bf16 (ml_dtypes: to nearest, ties to even)."""
    return np.asarray(values, np.float32).astype(BF16)


def bits(values: np.ndarray) -> np.ndarray:
    return np.asarray(values).view(np.uint16)


def arrays(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> np.ndarray:
    return bf16(np.random.default_rng(seed).standard_normal(shape) * scale)


def test_conversions_round_to_nearest_even_as_ml_dtypes() -> None:
    special = [1.0, 1.00390625, 1.01171875, 1.0 + 2 ** -8 + 2 ** -9, -3.3, np.inf, -np.inf, 3.4e38, 1e-40, -0.0,
               1e-45, 65504.0, 3.3895e38]
    values = np.concatenate([np.array(special, np.float32),
                             np.random.default_rng(0).standard_normal(1000).astype(np.float32) * 1e3])
    got = ops.asarray(values).astype("bfloat16").numpy()
    np.testing.assert_array_equal(bits(got), bits(bf16(values)))
    nan = ops.asarray(np.array([np.nan, -np.nan], np.float32)).astype("bfloat16").numpy()
    assert list(bits(nan)) == [0x7FC0, 0x7FC0]  # the quiet NaN, as torch writes it
    back = ops.asarray(bf16(values)).astype("float32").numpy()
    np.testing.assert_array_equal(back, bf16(values).astype(np.float32))  # exact: a bf16 is half an f32
    as_int = ops.asarray(bf16(np.array([2.5, -7.75, 300.0]))).astype("int32").numpy()
    assert list(as_int) == [2, -7, 300]


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 5), st.integers(1, 37), st.sampled_from(["+", "-", "*", "/"]), st.integers(0, 1000))
def test_elementwise_arithmetic_is_one_f32_operation_rounded_once(rows: int, cols: int, op: str, seed: int) -> None:
    a, b = arrays((rows, cols), seed), arrays((rows, cols), seed + 1)
    x, y = ops.asarray(a), ops.asarray(b)
    got = {"+": x + y, "-": x - y, "*": x * y, "/": x / y}[op].numpy()
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    want = bf16({"+": fa + fb, "-": fa - fb, "*": fa * fb, "/": fa / fb}[op])
    assert got.dtype == BF16
    np.testing.assert_array_equal(bits(got), bits(want))


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 3), st.integers(1, 50), st.integers(0, 1000))
def test_math_functions_within_a_bf16_ulp(rows: int, cols: int, seed: int) -> None:
    a = arrays((rows, cols), seed)
    for fn, ref in ((ops.exp, np.exp), (ops.tanh, np.tanh), (ops.relu, lambda v: np.maximum(v, 0))):
        got = fn(ops.asarray(a)).numpy().astype(np.float32)
        want = bf16(ref(a.astype(np.float32))).astype(np.float32)
        np.testing.assert_allclose(got, want, rtol=BF16_ULP, atol=0)


def dot_tolerance(magnitudes: np.ndarray, terms: int, want: np.ndarray) -> np.ndarray:
    """The f32 accumulation's reordering (`terms * 2^-24` of the sum of the products' magnitudes) and the final
    rounding to bf16 (half a bf16 ulp of the result, 2^-8 relative, and as much again for the reference's own)."""
    return terms * 2.0 ** -24 * magnitudes + 2 * 2.0 ** -8 * np.abs(want)


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 3), st.integers(1, 41), st.integers(1, 70), st.integers(1, 37), st.integers(0, 1000))
def test_matmul_accumulates_in_f32_and_rounds_once(batch: int, m: int, k: int, n: int, seed: int) -> None:
    a, b = arrays((batch, m, k), seed), arrays((batch, k, n), seed + 1)
    got = ops.matmul(ops.asarray(a), ops.asarray(b)).numpy()
    assert got.dtype == BF16
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    want = fa @ fb
    error = np.abs(got.astype(np.float32) - want)
    assert np.all(error <= dot_tolerance(np.abs(fa) @ np.abs(fb), k, want))


@settings(max_examples=5, deadline=None)
@given(st.integers(1, 2), st.integers(1, 5), st.integers(1, 9), st.integers(3, 9), st.sampled_from([1, 3]),
       st.integers(0, 1000))
def test_conv2d_accumulates_in_f32_and_rounds_once(batch: int, channels: int, out_channels: int, size: int,
                                                   kernel: int, seed: int) -> None:
    import torch

    x, w = arrays((batch, channels, size, size), seed), arrays((out_channels, channels, kernel, kernel), seed + 1)
    got = ops.conv2d(ops.asarray(x), ops.asarray(w), padding=kernel // 2).numpy()
    assert got.dtype == BF16
    tx, tw = torch.from_numpy(x.astype(np.float32)), torch.from_numpy(w.astype(np.float32))
    want = torch.nn.functional.conv2d(tx, tw, padding=kernel // 2).numpy()
    magnitudes = torch.nn.functional.conv2d(tx.abs(), tw.abs(), padding=kernel // 2).numpy()
    error = np.abs(got.astype(np.float32) - want)
    assert np.all(error <= dot_tolerance(magnitudes, channels * kernel * kernel, want))


def test_normalizations_and_reductions_round_once_from_f32() -> None:
    x = arrays((3, 45), 7)
    fx = x.astype(np.float32)
    softmax = ops.softmax(ops.asarray(x), axis=-1).numpy().astype(np.float32)
    e = np.exp(fx - fx.max(-1, keepdims=True))
    np.testing.assert_allclose(softmax, e / e.sum(-1, keepdims=True), rtol=BF16_ULP, atol=1e-6)
    total = ops.sum(ops.asarray(x), axis=1).numpy().astype(np.float32)
    np.testing.assert_allclose(total, fx.sum(1), rtol=BF16_ULP, atol=45 * 2.0 ** -24 * np.abs(fx).sum(1).max())
    weight, bias = arrays((45,), 8), arrays((45,), 9)
    normed = ops.layer_norm(ops.asarray(x), ops.asarray(weight), ops.asarray(bias)).numpy().astype(np.float32)
    mean, var = fx.mean(-1, keepdims=True), fx.var(-1, keepdims=True)
    want = (fx - mean) / np.sqrt(var + 1e-5) * weight.astype(np.float32) + bias.astype(np.float32)
    np.testing.assert_allclose(normed, want, rtol=2 * BF16_ULP, atol=1e-2)


def test_a_bf16_graph_builds_and_runs_on_the_cpu() -> None:
    w = arrays((19, 11), 3)
    xs = ops.symbol(["batch", 19], dtype="bfloat16")
    out = ops.relu(ops.matmul(xs, ops.asarray(w)) + 1.0)
    compiled = ops.optimize(ops.trace_from(out, inputs=[xs])).build("cpu")
    x = arrays((5, 19), 4)
    got = compiled(x).numpy()
    want = np.maximum(x.astype(np.float32) @ w.astype(np.float32) + 1.0, 0)
    assert got.dtype == BF16
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2 * 2.0 ** -8, atol=19 * 2.0 ** -24 * 100)
    with pytest.raises(TypeError, match="has dtype bfloat16, got an array of dtype float32"):
        compiled(x.astype(np.float32))

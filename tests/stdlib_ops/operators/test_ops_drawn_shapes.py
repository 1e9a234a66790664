"""Operators against numpy on hypothesis-drawn shapes (sizes 1, 7, 33, 257 and small odd ones), axes and data, on
cpu and cuda. Each operator is traced once per (rank, axes, broadcasting pattern, ...) from inputs with symbolic
dimensions and built into one compiled graph, which then runs on every drawn shape without a rebuild: many shapes
for the price of a few kernels. Dimensions an operator needs at build time (a concatenation or slicing axis, pad
widths, a convolution's channels and image) come from small fixed sets instead."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_cases import DEVICES, assert_ulps, data, ints
from references import ATOL, ULPS, UNARY, U, assert_normalized_close, conv2d_reference, reduction_tolerance

import stdlib_ops as ops
from hidet_lang.testing import example_count
from stdlib_ops.graph.compiled import CompiledGraph

# each example draws a shape and data; a test's configurations (hence its builds) are few and cached below
DRAWN = settings(max_examples=example_count(12), deadline=None)
SIZES = (1, 7, 33, 257)
MAX_ELEMENTS = 2048  # per input: keeps the emulator's runs and the float64 references quick


def dims(rank: int, limit: int = MAX_ELEMENTS) -> st.SearchStrategy[tuple[int, ...]]:
    """`rank` dimensions (from SIZES or 1..40, in any order) whose product is at most `limit`."""

    @st.composite
    def draw_dims(draw: st.DrawFn) -> tuple[int, ...]:
        shape: list[int] = []
        for _ in range(rank):
            room = limit // math.prod(shape)  # the dimensions still to draw may all be 1
            choices = [s for s in SIZES if s <= room]
            shape.append(draw(st.sampled_from(choices) | st.integers(1, min(40, room))))
        return tuple(draw(st.permutations(shape)))

    return draw_dims()


def names(rank: int, prefix: str = "d") -> list[str]:
    """Symbolic dimension names d0, d1, ... for a rank-`rank` input."""
    return [f"{prefix}{k}" for k in range(rank)]


def build(device: str, inputs: Sequence[ops.Tensor], outputs: Any) -> CompiledGraph:
    """The optimized graph from `inputs` to `outputs`, compiled for `device`."""
    return ops.optimize(ops.trace_from(outputs, list(inputs))).build(device)


def results(graph: CompiledGraph, *arrays: np.ndarray) -> list[np.ndarray]:
    """The graph's outputs on `arrays`, as numpy arrays (a list even for one output)."""
    out = graph(*arrays)
    return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]


# ---- element-wise ----------------------------------------------------------------------------------------------

UNARY_NAMES = sorted(UNARY)


@functools.cache
def unary_graph(device: str, rank: int) -> CompiledGraph:
    """Every unary function of `x` (those needing positive inputs of `p`), clip and two casts, all of one shape."""
    x, p = ops.symbol(names(rank)), ops.symbol(names(rank))
    outs = [getattr(ops, n)(p if UNARY[n][1][0] >= 0 else x) for n in UNARY_NAMES]
    outs += [ops.clip(x, -1.5, 2.5), ops.cast(x, "int32"), ops.cast(x, "float16")]
    return build(device, [x, p], outs)


@pytest.mark.parametrize("device", DEVICES)
@DRAWN
@given(st.data())
def test_unary_clip_cast(device: str, draw: st.DataObject) -> None:
    rank = draw.draw(st.sampled_from([1, 3]))
    shape = draw.draw(dims(rank))
    x = draw.draw(data(shape))
    p = draw.draw(data(shape, 0.01, 8))
    got = results(unary_graph(device, rank), x, p)
    for name, value in zip(UNARY_NAMES, got):
        reference, (lo, _) = UNARY[name]
        operand = p if lo >= 0 else x
        # the tolerances of the fixed-shape tests: libm within 2 ulp, one more rounding per composed step
        assert_ulps(value, reference(operand.astype(np.float64)), ULPS.get(name, 2), ATOL.get(name, 0.0))
    clipped, as_int, as_half = got[len(UNARY_NAMES):]
    np.testing.assert_array_equal(clipped, np.clip(x, -1.5, 2.5))
    np.testing.assert_array_equal(as_int, x.astype(np.int32))  # truncation, as numpy's astype
    np.testing.assert_array_equal(as_half, x.astype(np.float16))  # one correctly rounded conversion


# which dimensions are 1 in two operands (True: size 1), aligned at the right: a fixed few, so that every run
# reuses their kernels; ranks 1 to 3, both operands broadcast, size 1 against size 1
BROADCAST_PATTERNS = [((False, True, False), (True, False)), ((True,), (False, False, False)),
                      ((False, False), (True, True)), ((True, False, True), (False, True, False)),
                      ((False,), (False,))]


def operand_shape(ones: tuple[bool, ...], sizes: Sequence[Any]) -> list[Any]:
    """The operand's shape: 1 where `ones` says so, else the matching trailing entry of `sizes`."""
    tail = list(sizes)[len(sizes) - len(ones):]
    return [1 if one else d for one, d in zip(ones, tail)]


@functools.cache
def broadcast_graph(device: str, ones_a: tuple[bool, ...], ones_b: tuple[bool, ...]) -> CompiledGraph:
    rank = max(len(ones_a), len(ones_b))
    a, b = (ops.symbol(operand_shape(ones, names(rank))) for ones in (ones_a, ones_b))
    return build(device, [a, b], [a - b, ops.less(a, b)])


@pytest.mark.parametrize("device", DEVICES)
@DRAWN
@given(pattern=st.sampled_from(BROADCAST_PATTERNS), draw=st.data())
def test_binary_broadcasting(device: str, pattern: tuple, draw: st.DataObject) -> None:
    ones_a, ones_b = pattern
    sizes = draw.draw(dims(max(len(ones_a), len(ones_b)), MAX_ELEMENTS // 2))
    a = draw.draw(data(tuple(operand_shape(ones_a, sizes))))
    b = draw.draw(data(tuple(operand_shape(ones_b, sizes))))
    difference, less = results(broadcast_graph(device, ones_a, ones_b), a, b)
    np.testing.assert_array_equal(difference, a - b)  # one IEEE operation, as numpy: bit-exact
    np.testing.assert_array_equal(less, a < b)


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
          "minimum": np.minimum}
COMPARISONS = ("less", "less_equal", "greater", "greater_equal", "equal", "not_equal")


@functools.cache
def binary_graph(device: str) -> CompiledGraph:
    """Every binary operator on [d0, d1] operands, pow, and where(c, a, b) with c of shape [d0, 1]."""
    a, b, c = ops.symbol(["d0", "d1"]), ops.symbol(["d0", "d1"]), ops.symbol(["d0", 1], dtype="bool")
    outs = [getattr(ops, n)(a, b) for n in (*BINARY, *COMPARISONS)]
    return build(device, [a, b, c], [*outs, ops.pow(b, a), ops.where(c, a, b)])


@pytest.mark.parametrize("device", DEVICES)
@DRAWN
@given(st.data())
def test_binary_comparisons_where(device: str, draw: st.DataObject) -> None:
    shape = draw.draw(dims(2))
    a = draw.draw(data(shape))
    b = draw.draw(data(shape, 0.5, 4))
    c = draw.draw(ints((shape[0], 1), 0, 1)).astype(bool)
    got = results(binary_graph(device), a, b, c)
    for name, value in zip([*BINARY, *COMPARISONS], got):
        np.testing.assert_array_equal(value, getattr(np, BINARY[name].__name__ if name in BINARY else name)(a, b),
                                      err_msg=name)
    assert_ulps(got[-2], np.power(b.astype(np.float64), a), 2)  # powf: within 2 ulp
    np.testing.assert_array_equal(got[-1], np.where(c, a, b))


# ---- reductions ------------------------------------------------------------------------------------------------

REDUCTIONS = ("sum", "mean", "max", "min", "var", "std")


# (rank, axis, keepdims): all axes, one (negative) axis, axes that skip one, every rank
REDUCTION_CASES = [(1, None, False), (2, -1, True), (3, (0, -1), False), (3, 1, True), (2, (-2,), False),
                   (3, None, True)]


@functools.cache
def reduction_graph(device: str, rank: int, axis: Any, keepdims: bool) -> CompiledGraph:
    x = ops.symbol(names(rank))
    return build(device, [x], [getattr(ops, n)(x, axis=axis, keepdims=keepdims) for n in REDUCTIONS])


@pytest.mark.parametrize("device", DEVICES)
@DRAWN
@given(st.data())
def test_reductions_over_drawn_axes(device: str, draw: st.DataObject) -> None:
    rank, axis, keepdims = draw.draw(st.sampled_from(REDUCTION_CASES))
    x = draw.draw(data(draw.draw(dims(rank, MAX_ELEMENTS // 4))))  # the emulator's warp shuffles are slow
    for name, got in zip(REDUCTIONS, results(reduction_graph(device, rank, axis, keepdims), x)):
        want = getattr(x.astype(np.float64), name)(axis=axis, keepdims=keepdims)
        # n-term sums in f32: the bound grows with n (see reduction_tolerance); max and min are exact
        assert_ulps(got, want, 1, reduction_tolerance(name, x, axis))


ARG_CASES = [(1, None, False), (3, None, True), (2, -1, True), (3, 0, False), (3, -2, False)]


@functools.cache
def arg_graph(device: str, rank: int, axis: int | None, keepdims: bool) -> CompiledGraph:
    x = ops.symbol(names(rank))
    return build(device, [x], [ops.argmax(x, axis=axis, keepdims=keepdims), ops.argmin(x, axis=axis,
                                                                                     keepdims=keepdims)])


@pytest.mark.parametrize("device", DEVICES)
@DRAWN
@given(st.data())
def test_argmax_argmin_over_drawn_axis(device: str, draw: st.DataObject) -> None:
    rank, axis, keepdims = draw.draw(st.sampled_from(ARG_CASES))
    x = draw.draw(ints(draw.draw(dims(rank)), -3, 3)).astype(np.float32)  # few values: many ties
    got_max, got_min = results(arg_graph(device, rank, axis, keepdims), x)
    np.testing.assert_array_equal(got_max, np.argmax(x, axis=axis, keepdims=keepdims))
    np.testing.assert_array_equal(got_min, np.argmin(x, axis=axis, keepdims=keepdims))


# ---- network operators -----------------------------------------------------------------------------------------

def softmax_reference(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@functools.cache
def softmax_graph(device: str, rank: int, axis: int) -> CompiledGraph:
    x = ops.symbol(names(rank))
    return build(device, [x], [ops.softmax(x, axis=axis), ops.log_softmax(x, axis=axis)])


@pytest.mark.parametrize("device", DEVICES)
@DRAWN
@given(st.data())
def test_softmax_log_softmax_over_drawn_axis(device: str, draw: st.DataObject) -> None:
    rank = draw.draw(st.integers(1, 3))
    axis = draw.draw(st.integers(-rank, rank - 1))
    x = draw.draw(data(draw.draw(dims(rank))))
    n = x.shape[axis]
    soft, log_soft = results(softmax_graph(device, rank, axis), x)
    x64 = x.astype(np.float64)
    # exp within 2 ulp, a sum of n terms (relative error n * u), one division
    assert_ulps(soft, softmax_reference(x64, axis), n + 8, 1e-7)
    # x - max - log(sum): log of a sum off by a relative n * u is off by n * u absolutely; values up to
    # 8 + log(n) < 16 take a few roundings
    shifted = x64 - x64.max(axis, keepdims=True)
    want = shifted - np.log(np.exp(shifted).sum(axis, keepdims=True))
    assert_ulps(log_soft, want, 8, n * U + 8 * U * 16)


@functools.cache
def norm_graph(device: str, rank: int) -> CompiledGraph:
    shape = names(rank)
    x, w, b = ops.symbol(shape), ops.symbol(shape[-1:]), ops.symbol(shape[-1:])
    return build(device, [x, w, b], [ops.layer_norm(x, w, b), ops.rms_norm(x, w)])


@pytest.mark.parametrize("device", DEVICES)
@DRAWN
@given(st.data())
def test_layer_norm_rms_norm_last_axis(device: str, draw: st.DataObject) -> None:
    rank = draw.draw(st.integers(1, 3))
    shape = draw.draw(dims(rank))
    x, w, b = draw.draw(data(shape)), draw.draw(data(shape[-1:])), draw.draw(data(shape[-1:]))
    layer, rms = results(norm_graph(device, rank), x, w, b)
    x64, n = x.astype(np.float64), shape[-1]
    centered = x64 - x64.mean(-1, keepdims=True)
    want = centered / np.sqrt(np.square(centered).mean(-1, keepdims=True) + 1e-5) * w + b
    assert_normalized_close(layer, want, x, (rank - 1,), 4)
    # no centering: a sum of n squares (relative error n * u) under a square root, times the weight
    want = x64 / np.sqrt(np.square(x64).mean(-1, keepdims=True) + 1e-6) * w
    assert_ulps(rms, want, n + 8, 1e-6)


# matmul operand shapes over the symbolic sizes b (batch), m, n, k: 1-D operands, batch broadcasting
MATMUL_FORMS = {
    "vector-vector": (["k"], ["k"]),
    "vector-matrix": (["k"], ["k", "n"]),
    "matrix-vector": (["m", "k"], ["k"]),
    "matrix-matrix": (["m", "k"], ["k", "n"]),
    "batch-matrix": (["b", "m", "k"], ["k", "n"]),
    "broadcast-batch": (["b", 1, "m", "k"], [1, "b", "k", "n"]),
    "vector-batch": (["k"], ["b", "k", "n"]),
}


@functools.cache
def matmul_graph(device: str, form: str) -> CompiledGraph:
    a, b = (ops.symbol(s) for s in MATMUL_FORMS[form])
    return build(device, [a, b], ops.matmul(a, b))


@pytest.mark.parametrize("device", DEVICES)
@DRAWN
@given(form=st.sampled_from(sorted(MATMUL_FORMS)), draw=st.data())
def test_matmul_drawn_sizes(device: str, form: str, draw: st.DataObject) -> None:
    sizes = dict(zip("bmnk", draw.draw(dims(4, MAX_ELEMENTS // 2))))
    a, b = (draw.draw(data(tuple(sizes.get(d, d) for d in s))) for s in MATMUL_FORMS[form])
    (got,) = results(matmul_graph(device, form), a, b)
    # k products summed in f32 (the order is the kernel's): within k * u * sum_k |a b| of the exact value
    bound = sizes["k"] * U * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert_ulps(got, a.astype(np.float64) @ b, 1, float(np.max(bound, initial=0.0)) + 1e-30)


# ---- data movement ---------------------------------------------------------------------------------------------

@functools.cache
def transpose_graph(device: str, perm: tuple[int, ...]) -> CompiledGraph:
    x = ops.symbol(names(len(perm)))
    return build(device, [x], [ops.transpose(x, perm), ops.permute(x, perm[::-1])])


@pytest.mark.parametrize("device", DEVICES)
@DRAWN
@given(st.data())
def test_transpose_drawn_permutation(device: str, draw: st.DataObject) -> None:
    rank = draw.draw(st.integers(1, 3))
    perm = tuple(a - rank if draw.draw(st.booleans()) else a for a in draw.draw(st.permutations(range(rank))))
    x = draw.draw(data(draw.draw(dims(rank))))
    transposed, permuted = results(transpose_graph(device, perm), x)
    np.testing.assert_array_equal(transposed, np.transpose(x, perm))  # data movement: bit-exact
    np.testing.assert_array_equal(permuted, np.transpose(x, perm[::-1]))


CONCAT_SIZES = (3, 1, 5)  # the concatenation axis is fixed at build time; the other dimensions are symbolic


@functools.cache
def join_graph(device: str, rank: int, axis: int) -> CompiledGraph:
    parts = []
    for size in CONCAT_SIZES:
        shape: list[Any] = names(rank)
        shape[axis] = size
        parts.append(ops.symbol(shape))
    same = [ops.symbol(names(rank)) for _ in range(2)]
    return build(device, [*parts, *same], [ops.concat(parts, axis=axis), ops.stack(same, axis=axis)])


@pytest.mark.parametrize("device", DEVICES)
@DRAWN
@given(st.data())
def test_concat_stack_drawn_axis(device: str, draw: st.DataObject) -> None:
    rank = draw.draw(st.integers(1, 3))
    axis = draw.draw(st.integers(-rank, rank - 1))
    shape = draw.draw(dims(rank, MAX_ELEMENTS // 8))
    parts = []
    for size in CONCAT_SIZES:
        part_shape = list(shape)
        part_shape[axis] = size
        parts.append(draw.draw(data(tuple(part_shape))))
    same = [draw.draw(data(shape)) for _ in range(2)]
    joined, stacked = results(join_graph(device, rank, axis), *parts, *same)
    np.testing.assert_array_equal(joined, np.concatenate(parts, axis))
    np.testing.assert_array_equal(stacked, np.stack(same, axis))


SLICED = 9  # the sliced axis has a size fixed at build time (a slice of a symbolic one would have no name)
# (start, stop, step): a few fixed ones (each a kernel): negative steps and bounds, out-of-range bounds, empty
SLICES = [(None, None, None), (1, -2, 2), (None, None, -1), (-3, 20, None), (7, 2, -3), (9, None, None)]


@functools.cache
def slice_graph(device: str, bounds: tuple[int | None, ...], picked: int) -> CompiledGraph:
    x = ops.symbol(["d0", SLICED, "d2"])
    return build(device, [x], [x[:, slice(*bounds)], x[..., None, picked, :], ops.pad(x, ((0, 0), (1, 2), (0, 0)))])


@pytest.mark.parametrize("device", DEVICES)
@DRAWN
@given(bounds=st.sampled_from(SLICES), picked=st.sampled_from([0, -1, 4]), draw=st.data())
def test_slicing_drawn_bounds_and_pad(device: str, bounds: tuple, picked: int, draw: st.DataObject) -> None:
    d0, d2 = draw.draw(dims(2, MAX_ELEMENTS // SLICED))
    x = draw.draw(data((d0, SLICED, d2)))
    sliced, picked_out, padded = results(slice_graph(device, bounds, picked), x)
    np.testing.assert_array_equal(sliced, x[:, slice(*bounds)])
    np.testing.assert_array_equal(picked_out, x[..., None, picked, :])
    np.testing.assert_array_equal(padded, np.pad(x, ((0, 0), (1, 2), (0, 0))))


# ---- convolution and pooling: only the batch may be symbolic -----------------------------------------------------

CONV_INPUT, CONV_WEIGHT = (4, 7, 9), (6, 2, 3, 3)  # channels, height, width; groups of 2 channels


@functools.cache
def conv_pool_graph(device: str) -> CompiledGraph:
    x, w = ops.symbol(["n", *CONV_INPUT]), ops.symbol(list(CONV_WEIGHT))
    outs = [ops.conv2d(x, w, stride=(2, 1), padding=1, dilation=(1, 2), groups=2), ops.max_pool2d(x, 3, 2, 1),
            ops.avg_pool2d(x, 2), ops.adaptive_avg_pool2d(x, (3, 4))]
    return build(device, [x, w], outs)


def window_reference(x: np.ndarray, kernel: int, stride: int, pad: float | None) -> np.ndarray:
    """The windows of each output element, [n, c, oh, ow, kernel * kernel], padded by 1 with `pad` when given."""
    if pad is not None:
        x = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=pad)
    n, c, h, w = x.shape
    oh, ow = (h - kernel) // stride + 1, (w - kernel) // stride + 1
    rows = [x[:, :, ky:ky + stride * (oh - 1) + 1:stride, kx:kx + stride * (ow - 1) + 1:stride]
            for ky in range(kernel) for kx in range(kernel)]
    return np.stack(rows, -1)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=example_count(6), deadline=None)
@given(batch=st.sampled_from([1, 7]) | st.integers(1, 5), draw=st.data())
def test_conv_pool_drawn_batch(device: str, batch: int, draw: st.DataObject) -> None:
    x, w = draw.draw(data((batch, *CONV_INPUT))), draw.draw(data(CONV_WEIGHT))
    conv, max_pool, avg_pool, adaptive = results(conv_pool_graph(device), x, w)
    # 2 * 3 * 3 = 18 products of values up to 4 summed in f32
    assert_ulps(conv, conv2d_reference(x, w, None, (2, 1), (1, 1), (1, 2), 2), 1, 18 * U * 18 * 16)
    np.testing.assert_array_equal(max_pool, window_reference(x, 3, 2, -np.inf).max(-1))
    # 4 terms summed and divided: a few roundings of values up to 4
    assert_ulps(avg_pool, window_reference(x.astype(np.float64), 2, 2, None).mean(-1), 4, 4 * U * 4)
    x64 = x.astype(np.float64)
    bins_h = [(i * 7 // 3, -(-(i + 1) * 7 // 3)) for i in range(3)]
    bins_w = [(j * 9 // 4, -(-(j + 1) * 9 // 4)) for j in range(4)]
    want = np.stack([np.stack([x64[:, :, h0:h1, w0:w1].mean((-2, -1)) for w0, w1 in bins_w], -1)
                     for h0, h1 in bins_h], -2)
    assert_ulps(adaptive, want, 8, 9 * U * 4)  # up to 3 x 3 = 9 terms per bin

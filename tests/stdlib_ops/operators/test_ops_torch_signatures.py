"""The network operators called as torch.nn.functional calls them, against numpy on drawn shapes and data, on cpu
and cuda: layer_norm and rms_norm with a normalized_shape of one or two trailing dimensions and every choice of
weight and bias, next to the older order (the weight second); softmax's `dim`; batch_norm's and group_norm's
torch order; pooling's ceil_mode, divisor_override and count_include_pad. Norms are traced once per (rank,
normalized dimensions) from symbolic inputs and run on every drawn shape; pooling windows need static images,
so those come from a fixed set and only the batch is drawn."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_cases import DEVICES, assert_ulps, data
from references import U, assert_normalized_close
from test_ops_drawn_shapes import DRAWN, build, dims, names, results

import stdlib_ops as ops
from hidet_lang.testing import example_count
from stdlib_ops.graph.compiled import CompiledGraph

# (rank, normalized trailing dimensions)
NORM_CASES = [(2, 1), (3, 2)]
# the layer_norm outputs of norm_graph: which of weight and bias each passes
AFFINE = [(False, False), (True, False), (False, True), (True, True)]


@functools.cache
def norm_graph(device: str, rank: int, count: int) -> CompiledGraph:
    """layer_norm as torch calls it with each choice of weight and bias (one call with normalized_shape an int
    where it is one dimension), the older order layer_norm(x, w, b, eps); rms_norm as torch calls it with and
    without a weight, and rms_norm(x, w) in the older order."""
    shape = names(rank)
    x, w, b = ops.symbol(shape), ops.symbol(shape[rank - count:]), ops.symbol(shape[rank - count:])
    normalized = shape[rank - count:]
    layer = [ops.layer_norm(x, normalized, w if weight else None, b if bias else None) for weight, bias in AFFINE]
    layer.append(ops.layer_norm(x, w, b, 1e-3))
    if count == 1:
        layer.append(ops.layer_norm(x, normalized[0], weight=w, eps=1e-3))
    rms = [ops.rms_norm(x, normalized, w, eps=1e-5), ops.rms_norm(x, normalized), ops.rms_norm(x, w)]
    return build(device, [x, w, b], [*layer, *rms])


def layer_norm_reference(x: np.ndarray, axes: tuple, eps: float) -> np.ndarray:
    x64 = x.astype(np.float64)
    centered = x64 - x64.mean(axes, keepdims=True)
    return centered / np.sqrt(np.square(centered).mean(axes, keepdims=True) + eps)


def rms_norm_reference(x: np.ndarray, axes: tuple, eps: float) -> np.ndarray:
    x64 = x.astype(np.float64)
    return x64 / np.sqrt(np.square(x64).mean(axes, keepdims=True) + eps)


@pytest.mark.parametrize("device", DEVICES)
@DRAWN
@given(st.data())
def test_layer_norm_and_rms_norm_in_torch_order(device: str, draw: st.DataObject) -> None:
    rank, count = draw.draw(st.sampled_from(NORM_CASES))
    shape = draw.draw(dims(rank))
    normalized = shape[rank - count:]
    x, w, b = draw.draw(data(shape)), draw.draw(data(normalized)), draw.draw(data(normalized))
    got = results(norm_graph(device, rank, count), x, w, b)
    axes = tuple(range(rank - count, rank))
    for out, (weight, bias) in zip(got, AFFINE):
        want = layer_norm_reference(x, axes, 1e-5) * (w if weight else 1) + (b if bias else 0)
        assert_normalized_close(out, want, x, axes, 4 if weight else 1)
    older_and_int = got[len(AFFINE):-3]
    assert_normalized_close(older_and_int[0], layer_norm_reference(x, axes, 1e-3) * w + b, x, axes, 4)
    if count == 1:
        assert_normalized_close(older_and_int[1], layer_norm_reference(x, axes, 1e-3) * w, x, axes, 4)
    # no centering: a sum of n squares (relative error n * u) under a square root, times the weight
    n = math.prod(normalized)
    rms, rms_plain, rms_older = got[-3:]
    assert_ulps(rms, rms_norm_reference(x, axes, 1e-5) * w, n + 8, 1e-6)
    assert_ulps(rms_plain, rms_norm_reference(x, axes, 1e-6), n + 8, 1e-6)
    assert_ulps(rms_older, rms_norm_reference(x, axes, 1e-6) * w, n + 8, 1e-6)


@functools.cache
def softmax_graph(device: str, rank: int, axis: int) -> CompiledGraph:
    x = ops.symbol(names(rank))
    return build(device, [x], [ops.softmax(x, dim=axis), ops.log_softmax(x, dim=axis)])


@pytest.mark.parametrize("device", DEVICES)
@DRAWN
@given(st.data())
def test_softmax_dim(device: str, draw: st.DataObject) -> None:
    rank = draw.draw(st.integers(1, 3))
    axis = draw.draw(st.integers(-rank, rank - 1))
    x = draw.draw(data(draw.draw(dims(rank))))
    soft, log_soft = results(softmax_graph(device, rank, axis), x)
    x64 = x.astype(np.float64)
    shifted = x64 - x64.max(axis, keepdims=True)
    total = np.exp(shifted).sum(axis, keepdims=True)
    n = x.shape[axis]
    # exp within 2 ulp, a sum of n terms (relative error n * u), one division; log of that sum is off by n * u
    assert_ulps(soft, np.exp(shifted) / total, n + 8, 1e-7)
    assert_ulps(log_soft, shifted - np.log(total), 8, n * U + 8 * U * 16)


CHANNELS, GROUPS = 4, 2


@functools.cache
def channel_norm_graph(device: str) -> CompiledGraph:
    """batch_norm in torch's order (training and momentum before eps), group_norm with a weight only and with a
    bias only, over an (n, 4, h, w) input."""
    x = ops.symbol(["n", CHANNELS, "h", "w"])
    mean, var, w, b = (ops.symbol([CHANNELS]) for _ in range(4))
    outs = [ops.batch_norm(x, mean, var, w, b, False, 0.1, 1e-3), ops.batch_norm(x, mean, var, eps=1e-4),
            ops.group_norm(x, GROUPS, w), ops.group_norm(x, GROUPS, None, b, 1e-3)]
    return build(device, [x, mean, var, w, b], outs)


@pytest.mark.parametrize("device", DEVICES)
@DRAWN
@given(st.data())
def test_batch_norm_and_group_norm_in_torch_order(device: str, draw: st.DataObject) -> None:
    n, h, w_ = draw.draw(dims(3, 512))
    x = draw.draw(data((n, CHANNELS, h, w_)))
    mean, var, w, b = (draw.draw(data((CHANNELS,), *bounds)) for bounds in ((-4, 4), (0.25, 4), (-4, 4), (-4, 4)))
    batch, batch_plain, group_w, group_b = results(channel_norm_graph(device), x, mean, var, w, b)
    x64, c = x.astype(np.float64), (1, CHANNELS, 1, 1)
    # a few element-wise roundings in f32 on values up to (4 + 4) / 0.5 * 4
    want = (x64 - mean.reshape(c)) / np.sqrt(var.reshape(c) + 1e-3) * w.reshape(c) + b.reshape(c)
    assert_ulps(batch, want, 8, 1e-5)
    assert_ulps(batch_plain, (x64 - mean.reshape(c)) / np.sqrt(var.reshape(c) + 1e-4), 8, 1e-5)
    grouped = x64.reshape(n, GROUPS, -1)
    bound_x = np.repeat(x.reshape(n, GROUPS, -1), CHANNELS // GROUPS, axis=1).reshape(n, CHANNELS, -1)
    for got, eps, scale, shift in ((group_w, 1e-5, w, 0), (group_b, 1e-3, 1, b)):
        want = (layer_norm_reference(grouped, (-1,), eps).reshape(x.shape) * np.reshape(scale, (-1, 1, 1))
                + np.reshape(shift, (-1, 1, 1)))
        assert_normalized_close(got.reshape(n, CHANNELS, -1), want.reshape(n, CHANNELS, -1), bound_x, (2,), 4)


def _pooled_size(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """torch's output size: (n + 2p - d(k - 1) - 1) / s + 1 rounded down (up with ceil_mode, unless the last
    window would start in the right padding)."""
    size = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    return size - 1 if ceil_mode and (size - 1) * s >= n + p else size


def pool_reference(x: np.ndarray, case: tuple, ceil_mode: bool, kind: str, count_include_pad: bool = True,
                   divisor_override: int | None = None) -> np.ndarray:
    """Pooling written out from torch's definition, one window at a time: elements outside the input do not take
    part; an average divides by divisor_override, else by the window's size clipped to the padded input
    (count_include_pad) or its element count inside the input."""
    k, s, p, d = case[2:]
    h, w = x.shape[-2:]
    oh, ow = (_pooled_size(n, kk, ss, pp, dd, ceil_mode) for n, kk, ss, pp, dd in zip((h, w), k, s, p, d))
    out = np.empty((*x.shape[:-2], oh, ow))
    for i in range(oh):
        for j in range(ow):
            rows = [r for r in range(i * s[0] - p[0], i * s[0] - p[0] + d[0] * (k[0] - 1) + 1, d[0]) if 0 <= r < h]
            cols = [c for c in range(j * s[1] - p[1], j * s[1] - p[1] + d[1] * (k[1] - 1) + 1, d[1]) if 0 <= c < w]
            window = x[..., rows, :][..., cols].astype(np.float64)
            if kind == "max":
                out[..., i, j] = window.max((-1, -2))
                continue
            padded_rows = min(i * s[0] - p[0] + k[0], h + p[0]) - (i * s[0] - p[0])
            padded_cols = min(j * s[1] - p[1] + k[1], w + p[1]) - (j * s[1] - p[1])
            divisor = divisor_override or (padded_rows * padded_cols if count_include_pad else len(rows) * len(cols))
            out[..., i, j] = window.sum((-1, -2)) / divisor
    return out


# (channels, image, kernel, stride, padding, dilation). With ceil_mode: a partial last window on both axes, the
# one on H reaching past the padded input (its divisor clipped at the padding's end); one without padding, past
# the input; on H of the third, none (the window would start in the right padding), on W one
POOL_CASES = [
    (2, (8, 6), (3, 3), (2, 2), (1, 1), (1, 1)),
    (3, (5, 7), (2, 3), (2, 2), (0, 0), (1, 1)),
    (1, (8, 7), (3, 2), (3, 2), (1, 0), (1, 1)),
]
MAX_POOL_DILATED = (2, (9, 8), (2, 3), (2, 2), (1, 1), (2, 2))


@functools.cache
def pool_graph(device: str, case: tuple) -> CompiledGraph:
    """max_pool2d and avg_pool2d in torch's positional order (ceil_mode fifth; avg_pool2d's count_include_pad
    sixth, divisor_override seventh), with and without ceil_mode."""
    channels, image, k, s, p, d = case
    x = ops.symbol(["n", channels, *image])
    outs = [ops.max_pool2d(x, k, s, p, d, ceil_mode) for ceil_mode in (False, True)]
    outs += [ops.avg_pool2d(x, k, s, p, ceil_mode, include, None)
             for ceil_mode in (False, True) for include in (True, False)]
    outs.append(ops.avg_pool2d(x, k, s, p, True, True, 5))
    return build(device, [x], outs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", [*POOL_CASES, MAX_POOL_DILATED])
@settings(max_examples=example_count(4), deadline=None)
@given(batch=st.integers(1, 3), draw=st.data())
def test_pools_in_torch_order(device: str, case: tuple, batch: int, draw: st.DataObject) -> None:
    x = draw.draw(data((batch, case[0], *case[1])))
    got = results(pool_graph(device, case), x)
    for out, ceil_mode in zip(got[:2], (False, True)):
        np.testing.assert_array_equal(out, pool_reference(x, case, ceil_mode, "max"))
    if case[-1] != (1, 1):
        return  # avg_pool2d has no dilation: the dilated case's averages are those of its undilated window
    averages = [(ceil_mode, include, None) for ceil_mode in (False, True) for include in (True, False)]
    # a sum of at most 9 values up to 4 (9 roundings) and one division
    for out, (ceil_mode, include, divisor) in zip(got[2:], [*averages, (True, True, 5)]):
        assert_ulps(out, pool_reference(x, case, ceil_mode, "avg", include, divisor), 1, 9 * U * 4 * 9)

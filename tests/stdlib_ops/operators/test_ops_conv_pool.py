"""Convolutions and pooling against numpy references written out from torch's definitions (stride, padding,
dilation, groups, output_padding, count_include_pad, adaptive bins), max pooling over channels in blocks too; on cpu
and cuda."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from operator_cases import DEVICES, SETTINGS, assert_ulps, data, run
from references import conv2d_reference

import stdlib_ops as ops
from stdlib_ops.operators.pool import max_pool2d_blocked


def conv_transpose2d_reference(x: np.ndarray, w: np.ndarray, stride: tuple, padding: tuple, output_padding: tuple,
                               groups: int, dilation: tuple) -> np.ndarray:
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // groups
    full_h = (h - 1) * stride[0] + dilation[0] * (kh - 1) + 1 + output_padding[0]
    full_w = (wd - 1) * stride[1] + dilation[1] * (kw - 1) + 1 + output_padding[1]
    out = np.zeros((n, og * groups, full_h, full_w))
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg].astype(np.float64)
        for ky in range(kh):
            for kx in range(kw):
                contrib = np.einsum("nchw,co->nohw", xs, w[g * cg:(g + 1) * cg, :, ky, kx])
                y0, x0 = ky * dilation[0], kx * dilation[1]
                out[:, g * og:(g + 1) * og, y0:y0 + stride[0] * (h - 1) + 1:stride[0],
                    x0:x0 + stride[1] * (wd - 1) + 1:stride[1]] += contrib
    return out[:, :, padding[0]:full_h - padding[0], padding[1]:full_w - padding[1]]


# (input shape, weight shape, stride, padding, dilation, groups): odd sizes, 1x1 kernels, groups, strides
CONV_CASES = [
    ((2, 4, 7, 9), (6, 2, 3, 3), (2, 1), (1, 2), (1, 2), 2),
    ((1, 3, 5, 5), (4, 3, 1, 1), (1, 1), (0, 0), (1, 1), 1),
    ((1, 1, 1, 7), (3, 1, 1, 3), (1, 3), (0, 1), (1, 1), 1),
]


def _products_atol(terms: int) -> float:
    """Sum of `terms` products of values up to 4 in f32: below terms * u * terms * 16 (u = 2**-24)."""
    return terms * 2.0**-24 * terms * 16 + 1e-7


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CONV_CASES)
@SETTINGS
@given(st.data())
def test_conv2d(device: str, case: tuple, draw: st.DataObject) -> None:
    xs, ws, stride, padding, dilation, groups = case
    x, w, b = draw.draw(data(xs)), draw.draw(data(ws)), draw.draw(data((ws[0],)))
    got = run(ops.conv2d, x, w, b, device=device, stride=stride, padding=padding, dilation=dilation, groups=groups)
    want = conv2d_reference(x, w, b, stride, padding, dilation, groups)
    assert_ulps(got, want, 1, _products_atol(math.prod(ws[1:]) + 1))


TRANSPOSE_CASES = [
    ((2, 4, 3, 5), (4, 3, 3, 2), (2, 2), (1, 0), (1, 1), 2, (1, 2)),
    ((1, 3, 1, 7), (3, 2, 1, 3), (1, 3), (0, 1), (0, 2), 1, (1, 1)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", TRANSPOSE_CASES)
@SETTINGS
@given(st.data())
def test_conv_transpose2d(device: str, case: tuple, draw: st.DataObject) -> None:
    xs, ws, stride, padding, output_padding, groups, dilation = case
    x, w = draw.draw(data(xs)), draw.draw(data(ws))
    got = run(ops.conv_transpose2d, x, w, device=device, stride=stride, padding=padding,
              output_padding=output_padding, groups=groups, dilation=dilation)
    want = conv_transpose2d_reference(x, w, stride, padding, output_padding, groups, dilation)
    assert_ulps(got, want, 1, _products_atol(xs[1] // groups * ws[2] * ws[3]))


def _windows(x: np.ndarray, k: tuple, s: tuple, p: tuple, d: tuple, fill: float) -> np.ndarray:
    """The pooling windows of `x` as [..., OH, OW, KH, KW], padding filled with `fill`."""
    xp = np.pad(x.astype(np.float64), [(0, 0)] * (x.ndim - 2) + [(p[0],) * 2, (p[1],) * 2], constant_values=fill)
    oh = (xp.shape[-2] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (xp.shape[-1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    out = np.empty((*x.shape[:-2], oh, ow, *k))
    for ky in range(k[0]):
        for kx in range(k[1]):
            y0, x0 = ky * d[0], kx * d[1]
            out[..., ky, kx] = xp[..., y0:y0 + s[0] * (oh - 1) + 1:s[0], x0:x0 + s[1] * (ow - 1) + 1:s[1]]
    return out


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(x=data((2, 3, 7, 9)), y=data((3, 5, 5)))
def test_pools(device: str, x: np.ndarray, y: np.ndarray) -> None:
    got = run(ops.max_pool2d, x, device=device, kernel_size=3, stride=2, padding=1)
    np.testing.assert_array_equal(got, _windows(x, (3, 3), (2, 2), (1, 1), (1, 1), -np.inf).max((-1, -2)))
    got = run(ops.max_pool2d, y, device=device, kernel_size=(2, 3), stride=1, padding=(1, 0), dilation=(2, 1))
    np.testing.assert_array_equal(got, _windows(y, (2, 3), (1, 1), (1, 0), (2, 1), -np.inf).max((-1, -2)))
    # means of 9 values: a sum with 9 roundings and one division
    got = run(ops.avg_pool2d, x, device=device, kernel_size=3, stride=2, padding=1)
    assert_ulps(got, _windows(x, (3, 3), (2, 2), (1, 1), (1, 1), 0.0).mean((-1, -2)), 1, 9 * 2.0**-24 * 4)
    ones = _windows(np.ones(x.shape), (3, 3), (2, 2), (1, 1), (1, 1), 0.0).sum((-1, -2))
    got = run(ops.avg_pool2d, x, device=device, kernel_size=3, stride=2, padding=1, count_include_pad=False)
    assert_ulps(got, _windows(x, (3, 3), (2, 2), (1, 1), (1, 1), 0.0).sum((-1, -2)) / ones, 1, 9 * 2.0**-24 * 4)
    got = run(ops.avg_pool2d, y, device=device, kernel_size=2)
    assert_ulps(got, _windows(y, (2, 2), (2, 2), (0, 0), (1, 1), 0.0).mean((-1, -2)), 1, 4 * 2.0**-24 * 4)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(x=data((2, 3, 7, 9), edges=True))
def test_max_pool_propagates_nan(device: str, x: np.ndarray) -> None:
    # torch's max_pool2d: a window holding a NaN gives NaN (np.max over the windows does the same); the padding,
    # -inf, never wins over a value, -inf included. Values only: -0.0 == 0.0
    got = run(ops.max_pool2d, x, device=device, kernel_size=3, stride=2, padding=1)
    np.testing.assert_array_equal(got, _windows(x, (3, 3), (2, 2), (1, 1), (1, 1), -np.inf).max((-1, -2)))


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(x=data((2, 6, 7, 9), edges=True))
def test_max_pool_over_channel_blocks(device: str, x: np.ndarray) -> None:
    # (N, C, H, W) as (N, C / 3, H, W, 3): blocks of 3 channels, a multiple of no vector width, so that the CPU's
    # blocked template declines and the generic schedule computes it
    def blocked(a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a.reshape(2, 2, 3, *a.shape[2:]).transpose(0, 1, 3, 4, 2))

    got = run(max_pool2d_blocked, blocked(x), device=device, kernel_size=3, stride=2, padding=1)
    np.testing.assert_array_equal(got, blocked(_windows(x, (3, 3), (2, 2), (1, 1), (1, 1), -np.inf).max((-1, -2))))
    got = run(max_pool2d_blocked, blocked(x), device=device, kernel_size=(2, 3), stride=1, padding=(1, 0),
              dilation=(2, 1))
    np.testing.assert_array_equal(got, blocked(_windows(x, (2, 3), (1, 1), (1, 0), (2, 1), -np.inf).max((-1, -2))))


def adaptive_reference(x: np.ndarray, oh: int, ow: int) -> np.ndarray:
    h, w = x.shape[-2:]
    out = np.empty((*x.shape[:-2], oh, ow))
    for i in range(oh):
        for j in range(ow):
            y0, y1 = i * h // oh, -(-(i + 1) * h // oh)
            x0, x1 = j * w // ow, -(-(j + 1) * w // ow)
            out[..., i, j] = x[..., y0:y1, x0:x1].astype(np.float64).mean((-1, -2))
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("size", [(3, 4), 1, (5, None)])
@SETTINGS
@given(x=data((2, 3, 7, 9)))
def test_adaptive_avg_pool2d(device: str, size: object, x: np.ndarray) -> None:
    oh, ow = (size, size) if isinstance(size, int) else (size[0], size[1] or 9)
    # a bin of at most 63 values: 63 roundings of partial sums up to 63 * 4, then a division
    assert_ulps(run(ops.adaptive_avg_pool2d, x, device=device, output_size=size), adaptive_reference(x, oh, ow), 1,
                63 * 2.0**-24 * 4)

"""Network operators against numpy: softmax, log_softmax, layer_norm, rms_norm, batch_norm, group_norm, linear
and matmul; on cpu and cuda (where templates are registered for some of them)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from operator_cases import DEVICES, SETTINGS, assert_ulps, data, run
from references import assert_normalized_close

import stdlib_ops as ops


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(x=data((7, 33)))
def test_softmax_log_softmax(device: str, x: np.ndarray) -> None:
    x64 = x.astype(np.float64)
    # exp within an ulp or two, then an f32 sum of n terms (up to n - 1 roundings of the running sum) and a division
    assert_ulps(run(ops.softmax, x, device=device), _softmax(x64, -1), 33 + 8, 1e-7)
    assert_ulps(run(ops.softmax, x, device=device, axis=0), _softmax(x64, 0), 7 + 8, 1e-7)
    want = x64 - x64.max(-1, keepdims=True) - np.log(np.exp(x64 - x64.max(-1, keepdims=True)).sum(-1, keepdims=True))
    assert_ulps(run(ops.log_softmax, x, device=device, axis=-1), want, 8, 1e-5)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(x=data((7, 33), edges=True))
def test_softmax_of_rows_with_nan_and_infinities(device: str, x: np.ndarray) -> None:
    # numpy's exp(x - max) / sum: a row holding a NaN, a +inf (inf - inf) or only -inf is NaN throughout; a -inf
    # among numbers gives 0 (log_softmax -inf). The other rows as in test_softmax_log_softmax
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        shifted = x64 - x64.max(-1, keepdims=True)
        want = _softmax(x64, -1)
        log_want = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    for got, reference, ulps in ((run(ops.softmax, x, device=device), want, 33 + 8),
                                 (run(ops.log_softmax, x, device=device, axis=-1), log_want, 8)):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(reference))
        np.testing.assert_allclose(got, reference, rtol=ulps * 2.0**-23, atol=1e-5, equal_nan=True)


def _normalized(x: np.ndarray, axes: tuple, eps: float) -> np.ndarray:
    m = x.mean(axes, keepdims=True)
    return (x - m) / np.sqrt(x.var(axes, keepdims=True) + eps)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(x=data((7, 33)), w=data((33,)), b=data((33,)))
def test_layer_norm_rms_norm(device: str, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> None:
    x64 = x.astype(np.float64)
    want = _normalized(x64, (-1,), 1e-5) * w + b
    assert_normalized_close(run(ops.layer_norm, x, w, b, device=device, eps=1e-5), want, x, (1,), 4)
    # torch's order, with the shape as ints: the ops.layer_norm(h, [64]) and ops.layer_norm(h, [64], weight=w)
    got = ops.layer_norm(ops.asarray(x, device=device), [33], ops.asarray(w, device=device),
                         ops.asarray(b, device=device)).numpy()
    assert_normalized_close(got, want, x, (1,), 4)
    got = ops.layer_norm(ops.asarray(x, device=device), [33], weight=ops.asarray(w, device=device)).numpy()
    assert_normalized_close(got, want - b, x, (1,), 4)
    # no centering: a sum of squares (relative error n * u) under a square root
    want = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-6) * w
    assert_ulps(run(ops.rms_norm, x, w, device=device), want, 33 + 8, 1e-6)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(x=data((3, 4, 1, 7)), mean=data((4,)), var=data((4,), 0.25, 4), w=data((4,)), b=data((4,)))
def test_batch_norm_group_norm(device: str, x: np.ndarray, mean: np.ndarray, var: np.ndarray, w: np.ndarray,
                               b: np.ndarray) -> None:
    x64 = x.astype(np.float64)
    c = (1, 4, 1, 1)
    want = (x64 - mean.reshape(c)) / np.sqrt(var.reshape(c) + 1e-5) * w.reshape(c) + b.reshape(c)
    # a few element-wise roundings in f32 on values up to (4 + 4) / 0.5 * 4
    assert_ulps(run(ops.batch_norm, x, mean, var, w, b, device=device), want, 8, 1e-5)
    grouped = x64.reshape(3, 2, -1)
    want = _normalized(grouped, (-1,), 1e-5).reshape(x.shape) * w.reshape(c) + b.reshape(c)
    got = run(ops.group_norm, x, device=device, num_groups=2, weight=ops.asarray(w, device=device),
              bias=ops.asarray(b, device=device))
    bound_x = np.repeat(x.reshape(3, 2, -1), 2, axis=1).reshape(3, 4, -1)  # each channel with its group's values
    assert_normalized_close(got.reshape(3, 4, -1), want.reshape(3, 4, -1), bound_x, (2,), 4)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(x=data((2, 7, 33)), w=data((5, 33)), b=data((5,)), v=data((33,)))
def test_linear_matmul(device: str, x: np.ndarray, w: np.ndarray, b: np.ndarray, v: np.ndarray) -> None:
    x64 = x.astype(np.float64)
    # 33 products of values up to 4 summed in f32: error below 33 * u * sum|x w| <= 33 * 2**-24 * 33 * 16
    atol = 33 * 2.0**-24 * 33 * 16
    assert_ulps(run(ops.linear, x, w, b, device=device), x64 @ w.T + b, 1, atol)
    assert_ulps(run(ops.matmul, x, v, device=device), x64 @ v, 1, atol)
    assert_ulps(run(ops.matmul, v, w.T.copy(), device=device), v.astype(np.float64) @ w.T, 1, atol)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_matmul_batches_beyond_a_grid_dimension_other_than_x(dtype: str) -> None:
    """65537 batch entries: more blocks than CUDA allows in grid y or z (65535), all in grid x (the f16 operands
    take the tensor-core template)."""
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-3, 4, shape).astype(dtype) for shape in ((65537, 1, 2), (65537, 2, 1)))
    got = ops.matmul(ops.asarray(a, device="cuda"), ops.asarray(b, device="cuda")).numpy()
    np.testing.assert_array_equal(got, a @ b)  # small integers: exact in either dtype

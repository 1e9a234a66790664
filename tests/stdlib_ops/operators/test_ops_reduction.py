"""Reductions against numpy over any axes (negative ones included), with and without keepdims, numpy's result
dtypes for integer inputs, and ddof; on cpu and cuda."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from operator_cases import DEVICES, SETTINGS, assert_ulps, data, ints, run
from references import reduction_tolerance

import stdlib_ops as ops

SHAPE = (7, 1, 33)
# each reduction over one of: all axes, two axes (one negative) kept, one negative axis
CASES = [("sum", None, False), ("sum", (0, -1), True), ("mean", -3, False), ("mean", None, True),
         ("max", (0, -1), True), ("min", -1, False), ("var", None, False), ("var", -3, True),
         ("std", (0, -1), False)]
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,axis,keepdims", CASES)
@SETTINGS
@given(x=data(SHAPE))
def test_float_reductions(device: str, name: str, axis: object, keepdims: bool, x: np.ndarray) -> None:
    got = run(getattr(ops, name), x, device=device, axis=axis, keepdims=keepdims)
    want = getattr(x.astype(np.float64), name)(axis=axis, keepdims=keepdims)
    assert got.dtype == np.float32
    assert_ulps(got, want, 1, reduction_tolerance(name, x, axis))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,axis", [("max", None), ("max", (0, -1)), ("min", -1), ("min", 0)])
@SETTINGS
@given(x=data(SHAPE, edges=True))
def test_max_min_propagate_nan(device: str, name: str, axis: object, x: np.ndarray) -> None:
    # np.max/np.min: NaN where the reduced values hold a NaN; +-inf are ordinary values. Values only (-0.0 == 0.0):
    # which zero wins a tie of zeros is numpy's choice of code path, not part of the contract
    got = run(getattr(ops, name), x, device=device, axis=axis)
    np.testing.assert_array_equal(got, getattr(np, name)(x, axis=axis))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,axis", [("argmax", None), ("argmax", -1), ("argmin", 0)])
@SETTINGS
@given(x=data(SHAPE, edges=True))
def test_argmax_argmin_take_the_first_nan(device: str, name: str, axis: object, x: np.ndarray) -> None:
    np.testing.assert_array_equal(run(getattr(ops, name), x, device=device, axis=axis),
                                  getattr(np, name)(x, axis=axis))


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(x=data((7, 5), 0.5, 1.5))
def test_prod_and_ddof(device: str, x: np.ndarray) -> None:
    # 7 factors in [0.5, 1.5]: one rounding each, relative error below 7 ulp
    assert_ulps(run(ops.prod, x, device=device, axis=0), x.astype(np.float64).prod(axis=0), 8)
    assert_ulps(run(ops.var, x, device=device, axis=-1, ddof=1), x.astype(np.float64).var(axis=-1, ddof=1), 8, 1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,axis,keepdims", [("argmax", None, False), ("argmax", -1, True), ("argmin", 0, False)])
@SETTINGS
@given(x=ints(SHAPE, -3, 3).map(lambda a: a.astype(np.float32)))
def test_argmax_argmin_first_of_ties(device: str, name: str, axis: object, keepdims: bool, x: np.ndarray) -> None:
    got = run(getattr(ops, name), x, device=device, axis=axis, keepdims=keepdims)
    want = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    assert got.dtype == want.dtype == np.int64
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["int8", "bool"])
@SETTINGS
@given(x=ints((7, 33), 0, 1))
def test_integer_result_dtypes(device: str, dtype: str, x: np.ndarray) -> None:
    x = (x * 5).astype(dtype) if dtype != "bool" else x.astype(bool)
    for name in ("sum", "mean"):
        got = run(getattr(ops, name), x, device=device, axis=1)
        want = getattr(np, name)(x, axis=1)
        assert got.dtype == want.dtype, (name, dtype, got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
def test_operators_with_empty_outputs_launch_nothing(device: str) -> None:
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    empty_rows = ops.asarray(x, device=device)[3:]
    assert empty_rows.shape == (0, 5)
    for result, expected in ((ops.sum(empty_rows, axis=1), x[3:].sum(axis=1)), (ops.exp(empty_rows), np.exp(x[3:]))):
        assert result.shape == expected.shape and result.numpy().shape == expected.shape

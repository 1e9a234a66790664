"""Operators against numpy on hypothesis-drawn data, on the cpu target and on cuda (the emulator without a GPU).

Shapes come from a small fixed set (odd and size-1 sizes included) so kernels are reused across examples; the
data is drawn freshly for each example."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import stdlib_ops as ops

DEVICES = ["cpu", "cuda"]
SHAPES = [(1,), (7, 33), (3, 1, 5)]
FLOATS = st.floats(-4, 4, width=32)
SETTINGS = settings(max_examples=4, deadline=None)


def data(shape: tuple) -> st.SearchStrategy:
    return arrays(np.float32, shape, elements=FLOATS)


# float32 math in C and numpy may differ by a few ulp (libm vs numpy's own kernels)
UNARY = {
    "relu": lambda x: np.maximum(x, 0), "exp": np.exp, "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "neg": np.negative, "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "round": np.round, "sin": np.sin,
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(UNARY))
@SETTINGS
@given(x=data((7, 33)))
def test_unary(device: str, name: str, x: np.ndarray) -> None:
    got = getattr(ops, name)(ops.asarray(x, device=device)).numpy()
    np.testing.assert_allclose(got, UNARY[name](x), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes", [((7, 33), (33,)), ((3, 1, 5), (4, 1)), ((1,), (1,))])
@SETTINGS
@given(st.data())
def test_binary_broadcast(device: str, shapes: tuple, data_: st.DataObject) -> None:
    a, b = (data_.draw(data(s)) for s in shapes)
    ta, tb = ops.asarray(a, device=device), ops.asarray(b, device=device)
    np.testing.assert_array_equal((ta + tb).numpy(), a + b)
    np.testing.assert_array_equal((ta * tb).numpy(), a * b)
    np.testing.assert_array_equal(ops.maximum(ta, tb).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal((ta < tb).numpy(), a < b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, True), ((0, 2), False), (-1, False)])
@SETTINGS
@given(x=data((3, 1, 5)))
def test_reductions(device: str, axis: object, keepdims: bool, x: np.ndarray) -> None:
    t = ops.asarray(x, device=device)
    # sums of at most 15 terms in another order: a few ulp of the magnitudes summed
    np.testing.assert_allclose(ops.sum(t, axis=axis, keepdims=keepdims).numpy(),
                               x.sum(axis=axis, keepdims=keepdims), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(ops.max(t, axis=axis, keepdims=keepdims).numpy(),
                                  x.max(axis=axis, keepdims=keepdims))
    np.testing.assert_allclose(ops.var(t, axis=axis, keepdims=keepdims).numpy(),
                               x.var(axis=axis, keepdims=keepdims), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(x=data((7, 33)))
def test_argmax_softmax(device: str, x: np.ndarray) -> None:
    t = ops.asarray(x, device=device)
    np.testing.assert_array_equal(ops.argmax(t, axis=1).numpy(), x.argmax(1))
    np.testing.assert_array_equal(ops.argmin(t).numpy(), x.argmin())
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(ops.softmax(t).numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(x=data((7, 33)), w=data((33, 5)))
def test_matmul(device: str, x: np.ndarray, w: np.ndarray) -> None:
    got = ops.matmul(ops.asarray(x, device=device), ops.asarray(w, device=device)).numpy()
    # 33 products of values up to 4 in magnitude, summed in another order
    np.testing.assert_allclose(got, x @ w, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(x=data((3, 1, 5)))
def test_transforms(device: str, x: np.ndarray) -> None:
    t = ops.asarray(x, device=device)
    np.testing.assert_array_equal(ops.transpose(t, (2, 0, 1)).numpy(), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(ops.reshape(t, [5, -1]).numpy(), x.reshape(5, -1))
    np.testing.assert_array_equal(t[1:, 0, ::-2].numpy(), x[1:, 0, ::-2])
    np.testing.assert_array_equal(ops.concat([t, t], axis=1).numpy(), np.concatenate([x, x], 1))
    np.testing.assert_array_equal(ops.pad(t, ((1, 0), (0, 2), (1, 1))).numpy(), np.pad(x, ((1, 0), (0, 2), (1, 1))))


def test_bad_inputs_name_the_operator_and_shapes() -> None:
    a, b = ops.zeros([2, 3]), ops.zeros([4])
    with pytest.raises(ValueError, match=r"add: .*\(2, 3\) \(4,\)"):
        a + b
    with pytest.raises(ValueError, match="matmul"):
        ops.matmul(a, ops.zeros([2, 3]))
    with pytest.raises(np.exceptions.AxisError, match="sum: axis 2"):
        ops.sum(a, axis=2)
    with pytest.raises(TypeError, match="unsupported dtype"):
        ops.asarray(np.zeros(2, np.complex64))


def test_symbolic_tensors_record_operators() -> None:
    x = ops.symbol(["batch", 8])
    y = ops.relu(x + 1)
    assert y.is_symbolic and y.shape == ("batch", 8)
    assert y.producer.name == "relu" and y.producer.inputs[0].producer.name == "add"
    assert y.producer.task.is_injective and not ops.sum(x, axis=1).producer.task.is_injective


def test_dlpack_round_trip() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ops.from_dlpack(x)
    np.testing.assert_array_equal(np.from_dlpack(t), x)

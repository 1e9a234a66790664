"""Data movement against numpy: reshape, transpose, broadcast_to, expand_dims, squeeze, flatten, concat, stack,
split, slicing, take, pad (negative axes included); take's out-of-range indices; the inverse maps that let
epilogues absorb transposes, reshapes, casts and element-wise operators."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from operator_cases import DEVICES, SETTINGS, data, ints

import stdlib_ops as ops
from hidet_lang.ir.evaluate import evaluate
from stdlib_ops.operators.channel_blocks import from_channel_blocks, to_channel_blocks

SHAPE = (3, 1, 7)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(x=data(SHAPE))
def test_views_and_permutations(device: str, x: np.ndarray) -> None:
    t = ops.asarray(x, device=device)
    # pure data movement: bit-exact
    checks = [
        (ops.transpose(t, (2, -3, 1)), x.transpose(2, 0, 1)),
        (ops.transpose(t), x.T),
        (ops.reshape(t, [7, -1]), x.reshape(7, -1)),
        (ops.broadcast_to(t, (2, 3, 5, 7)), np.broadcast_to(x, (2, 3, 5, 7))),
        (ops.expand_dims(t, -1), np.expand_dims(x, -1)),
        (ops.expand_dims(t, (0, 2)), np.expand_dims(x, (0, 2))),
        (ops.squeeze(t), np.squeeze(x)),
        (ops.squeeze(t, -2), np.squeeze(x, -2)),
        (ops.flatten(t), x.flatten()),
        (ops.flatten(t, 1), x.reshape(3, -1)),
        (t[1:, 0, ::-2], x[1:, 0, ::-2]),
        (t[..., None, -1], x[..., None, -1]),
        (ops.pad(t, ((1, 0), (0, 2), (1, 1))), np.pad(x, ((1, 0), (0, 2), (1, 1)))),
        (ops.pad(t, (2, 1), constant_values=1.5), np.pad(x, (2, 1), constant_values=1.5)),
    ]
    for k, (got, want) in enumerate(checks):
        np.testing.assert_array_equal(got.numpy(), want, err_msg=f"check {k}")


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(x=data(SHAPE), y=data((3, 4, 7)))
def test_join_and_split(device: str, x: np.ndarray, y: np.ndarray) -> None:
    t, u = ops.asarray(x, device=device), ops.asarray(y, device=device)
    np.testing.assert_array_equal(ops.concat([t, u, t], axis=-2).numpy(), np.concatenate([x, y, x], -2))
    np.testing.assert_array_equal(ops.stack([t, t], axis=-1).numpy(), np.stack([x, x], -1))
    np.testing.assert_array_equal(ops.stack([t, t]).numpy(), np.stack([x, x]))
    for got, want in zip(ops.split(u, 2, axis=1), np.split(y, 2, axis=1)):
        np.testing.assert_array_equal(got.numpy(), want)
    for got, want in zip(ops.split(u, [1, 5], axis=-1), np.split(y, [1, 5], axis=-1)):
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(x=data((5, 7)), indices=ints((2, 3), -5, 4, "int64"))
def test_take(device: str, x: np.ndarray, indices: np.ndarray) -> None:
    t = ops.asarray(x, device=device)
    np.testing.assert_array_equal(ops.take(t, ops.asarray(indices, device=device), axis=0).numpy(),
                                  np.take(x, indices, axis=0))
    np.testing.assert_array_equal(ops.take(t, indices + 2, axis=-1).numpy(), np.take(x, indices + 2, axis=-1))
    np.testing.assert_array_equal(ops.take(t, indices * 7).numpy(), np.take(x, indices * 7))


def test_take_out_of_range_raises_before_running() -> None:
    t = ops.zeros([5, 7])
    for bad in ([5], [-6], [[0, 9]]):
        with pytest.raises(IndexError, match=r"take: index -?\d+ is out of bounds for axis 0 with size 5"):
            ops.take(t, bad, axis=0)
        with pytest.raises(IndexError):
            np.take(np.zeros((5, 7)), bad, axis=0)
    with pytest.raises(TypeError, match="take: indices must be integers"):
        ops.take(t, np.array([0.5]), axis=0)


def _check_inverse(op_name: str, shape: tuple, make: object) -> None:
    """Every input element x[a] equals out[inverse(a)]: the inverse map says where each input element goes."""
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    out = make(ops.symbol(shape))
    task = out.producer.task
    assert task.name == op_name and 0 in task.inverse_maps, (op_name, task.inverse_maps)
    inverse = task.inverse_maps[0]
    want = make(ops.asarray(x)).numpy()
    for a in itertools.product(*[range(d) for d in shape]):
        index = tuple(evaluate(e, dict(zip(inverse.axes, a))) for e in inverse.indices)
        assert want[index] == x[a], (op_name, a, index)


def test_inverse_maps() -> None:
    _check_inverse("transpose", (2, 3, 4), lambda t: ops.transpose(t, (2, 0, 1)))
    _check_inverse("reshape", (2, 3, 4), lambda t: ops.reshape(t, [4, 6]))
    _check_inverse("reshape", (6,), lambda t: ops.reshape(t, [3, 1, 2]))
    _check_inverse("cast", (3, 4), lambda t: ops.cast(t, "int32"))
    _check_inverse("relu", (3, 4), ops.relu)
    _check_inverse("add", (3, 4), lambda t: t + ops.zeros([4]))
    _check_inverse("to_channel_blocks", (2, 6, 2, 3), lambda t: to_channel_blocks(t, 3))
    _check_inverse("from_channel_blocks", (2, 2, 3, 1, 4), from_channel_blocks)


@pytest.mark.parametrize("block", [1, 4, 12])
def test_channel_blocks_against_numpy(block: int) -> None:
    """[N, C, H, W] -> [N, C / c, H, W, c] and back, with a symbolic batch in the graph."""
    x = np.arange(2 * 12 * 3 * 5, dtype=np.float32).reshape(2, 12, 3, 5)
    want = x.reshape(2, 12 // block, block, 3, 5).transpose(0, 1, 3, 4, 2)
    blocks = to_channel_blocks(ops.asarray(x), block)
    np.testing.assert_array_equal(blocks.numpy(), want)
    np.testing.assert_array_equal(from_channel_blocks(blocks).numpy(), x)
    s = ops.symbol(["n", 12, 3, 5])
    compiled = ops.trace_from(from_channel_blocks(to_channel_blocks(s, block)) + 1, [s]).build("cpu")
    np.testing.assert_array_equal(compiled(x).numpy(), x + 1)


def test_channel_blocks_refuse_what_does_not_split() -> None:
    with pytest.raises(ValueError, match="12 channels do not split into blocks of 5"):
        to_channel_blocks(ops.symbol([2, 12, 3, 5]), 5)
    with pytest.raises(ValueError, match=r"expected an input \[N, C, H, W\] with C known"):
        to_channel_blocks(ops.symbol([2, 12, 3]), 4)
    with pytest.raises(ValueError, match=r"expected an input \[N, C / c, H, W, c\]"):
        from_channel_blocks(ops.symbol([2, 12, 3, 5]))


def test_symbolic_views_have_inverse_maps() -> None:
    x = ops.symbol(["batch", 1, 5])
    y = ops.squeeze(x, 1)
    inverse = y.producer.task.inverse_maps[0]
    assert y.shape == ("batch", 5) and len(inverse.axes) == 3
    env = dict(zip(inverse.axes, (4, 0, 3)))
    assert tuple(evaluate(e, env) for e in inverse.indices) == (4, 3)


@st.composite
def _permutations(draw: st.DrawFn) -> tuple[int, ...]:
    return tuple(draw(st.permutations(range(3))))


@SETTINGS
@given(perm=_permutations(), x=data((2, 1, 3)))
def test_transpose_any_permutation_cpu(perm: tuple[int, ...], x: np.ndarray) -> None:
    np.testing.assert_array_equal(ops.transpose(ops.asarray(x), perm).numpy(), x.transpose(perm))

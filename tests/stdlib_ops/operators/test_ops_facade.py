"""`hidet.ops` is `stdlib_ops`; API.md section 5's example runs as written; symbolic tensors record operators; DLPack
round trip."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

import hidet_lang as hidet
import stdlib_ops as ops
from hidet_lang.testing import arrays, example_count, shapes


def test_hidet_ops_is_stdlib_ops() -> None:
    assert hidet.ops is ops
    assert hidet.ops.conv2d is ops.conv2d and hidet.ops.attention is ops.attention


# each new shape compiles a kernel: a dozen shapes are enough here
@settings(max_examples=example_count(12), deadline=None)
@given(arrays(dtype='float32', shape=shapes(min_dims=1, max_dims=3)))
def test_relu(x):
    np.testing.assert_allclose(ops.relu(ops.asarray(x)).numpy(), np.maximum(x, 0))


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

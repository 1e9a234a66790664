"""Bad inputs for each operator family raise, before any kernel runs, an exception naming the operator and the
shapes (numpy's or torch's kind of exception and wording)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import stdlib_ops as ops
from stdlib_ops.operators.pool import max_pool2d_blocked
from stdlib_ops.runtime import KERNELS


def test_elementwise_and_reductions() -> None:
    a, b = ops.zeros([2, 3]), ops.zeros([4])
    with pytest.raises(ValueError, match=r"add: .*\(2, 3\) \(4,\)"):
        a + b
    with pytest.raises(ValueError, match=r"where: .*\(2, 3\)"):
        ops.where(a > 0, a, b)
    with pytest.raises(np.exceptions.AxisError, match="sum: axis 2 is out of bounds for array of dimension 2"):
        ops.sum(a, axis=2)
    with pytest.raises(np.exceptions.AxisError, match="argmax: axis -3"):
        ops.argmax(a, axis=-3)
    with pytest.raises(ValueError, match="mean: repeated axis"):
        ops.mean(a, axis=(1, -1))
    with pytest.raises(TypeError, match="unsupported dtype"):
        ops.asarray(np.zeros(2, np.complex64))


def test_transforms() -> None:
    x = ops.zeros([2, 3])
    with pytest.raises(ValueError, match=r"reshape: cannot reshape array of size 6 into shape \(4, 2\)"):
        ops.reshape(x, [4, 2])
    with pytest.raises(ValueError, match=r"concat: .*\(2, 3\) \(3, 2\)"):
        ops.concat([x, ops.zeros([3, 2])], axis=0)
    with pytest.raises(np.exceptions.AxisError, match="transpose: axis 2"):
        ops.transpose(x, (0, 2))
    with pytest.raises(ValueError, match=r"squeeze: .*axis 0 of shape \(2, 3\)"):
        ops.squeeze(x, 0)
    with pytest.raises(ValueError, match=r"broadcast_to: .*\(2, 3\)"):
        ops.broadcast_to(x, (2, 4))
    with pytest.raises(IndexError, match=r"getitem: index 5 is out of bounds for axis 1 with size 3"):
        x[0, 5]
    with pytest.raises(ValueError, match=r"split: .*equal division"):
        ops.split(x, 2, axis=1)


def test_linalg_and_norms() -> None:
    with pytest.raises(ValueError, match=r"matmul: .*\(2, 3\) and \(4, 5\)"):
        ops.matmul(ops.zeros([2, 3]), ops.zeros([4, 5]))
    with pytest.raises(ValueError, match=r"layer_norm: normalized shape \(4,\) does not end input shape \(2, 3\)"):
        ops.layer_norm(ops.zeros([2, 3]), ops.ones([4]))
    with pytest.raises(ValueError, match="group_norm: 3 channels do not split into 2 groups"):
        ops.group_norm(ops.zeros([1, 3, 4]), 2)
    with pytest.raises(TypeError, match="unsupported dtype 'int32'"):
        ops.softmax(ops.zeros([2, 3], dtype="int32"))


def test_torch_order_conflicts() -> None:
    """Calls that torch's order and the older one read differently, or that name one argument twice."""
    x, w = ops.zeros([2, 3, 4]), ops.ones([4])
    with pytest.raises(TypeError, match=r"^softmax: got axis=1 and dim=0; dim is torch's name for axis"):
        ops.softmax(x, 1, dim=0)
    with pytest.raises(TypeError, match=r"^log_softmax: got axis=-1 and dim=-1"):
        ops.log_softmax(x, axis=-1, dim=-1)
    with pytest.raises(ValueError, match=r"^layer_norm: normalized shape \(3,\) does not end input shape \(2, 3, 4\)"):
        ops.layer_norm(x, [3])
    with pytest.raises(ValueError, match=r"^rms_norm: normalized shape \(2, 3, 4, 1\) does not end input shape"):
        ops.rms_norm(x, (2, 3, 4, 1))
    with pytest.raises(ValueError, match=r"^layer_norm: weight of shape \(4,\) does not match the normalized shape "
                                         r"\(3, 4\)"):
        ops.layer_norm(x, [3, 4], w)
    with pytest.raises(ValueError, match=r"^layer_norm: bias of shape \(3,\) does not match the normalized shape "
                                         r"\(4,\)"):
        ops.layer_norm(x, 4, w, ops.ones([3]))
    with pytest.raises(ValueError, match=r"^layer_norm: normalized_shape must name at least one dimension, got \(\)"):
        ops.layer_norm(x, [])
    with pytest.raises(TypeError, match=r"^layer_norm: normalized_shape must be an int or a sequence of ints, got "
                                        r"\[4\.0\]"):
        ops.layer_norm(x, [4.0])
    with pytest.raises(TypeError, match=r"^rms_norm: normalized_shape must be an int or a sequence of ints, got 4\.0"):
        ops.rms_norm(x, 4.0)
    with pytest.raises(TypeError, match=r"^layer_norm: the second argument is a tensor \(the weight of the older order "
                                        r"layer_norm\(x, weight, \.\.\.\)\), which leaves no place for bias=a "
                                        r"tensor of shape \(4,\); write torch's order layer_norm\(x, "
                                        r"normalized_shape, weight, \.\.\.\)"):
        ops.layer_norm(x, w, w, bias=w)
    with pytest.raises(TypeError, match=r"^layer_norm: .*no place for bias=0\.001"):
        ops.layer_norm(x, w, w, 1e-3, eps=1e-4)
    with pytest.raises(TypeError, match=r"^rms_norm: .*no place for weight=a tensor of shape \(4,\)"):
        ops.rms_norm(x, w, w)
    image, c = ops.zeros([2, 4, 3, 3]), ops.ones([4])
    with pytest.raises(TypeError, match=r"^batch_norm: training must be a bool, got 0\.001 \(as in torch, eps comes "
                                        r"after training and momentum: pass eps=\.\.\.\)"):
        ops.batch_norm(image, c, c, c, c, 1e-3)
    with pytest.raises(ValueError, match=r"^batch_norm: training=True \(batch statistics\) is not supported"):
        ops.batch_norm(image, c, c, training=True)
    with pytest.raises(ValueError, match=r"^batch_norm: running_var of shape \(3,\) does not match the input's 4 "
                                         r"channels"):
        ops.batch_norm(image, c, ops.ones([3]))
    with pytest.raises(ValueError, match=r"^group_norm: bias of shape \(2,\) does not match the input's 4 channels"):
        ops.group_norm(image, 2, c, ops.ones([2]))
    with pytest.raises(ValueError, match=r"^max_pool2d: return_indices=True is not supported"):
        ops.max_pool2d(image, 2, return_indices=True)
    with pytest.raises(ValueError, match=r"^avg_pool2d: divisor_override must be a nonzero int, got 0"):
        ops.avg_pool2d(image, 2, divisor_override=0)


def test_convolutions_and_pools() -> None:
    x = ops.zeros([1, 4, 5, 5])
    with pytest.raises(ValueError, match=r"conv2d: given groups=1, weight of shape \(8, 3, 3, 3\) .*\(1, 4, 5, 5\)"):
        ops.conv2d(x, ops.zeros([8, 3, 3, 3]))
    with pytest.raises(ValueError, match=r"conv2d: given groups=2, weight of shape \(3, 2, 3, 3\)"):
        ops.conv2d(x, ops.zeros([3, 2, 3, 3]), groups=2)
    with pytest.raises(ValueError, match=r"conv2d: padded input size per channel \(5 x 5\) .*\(7 x 7\)"):
        ops.conv2d(x, ops.zeros([2, 4, 7, 7]))
    with pytest.raises(ValueError, match=r"conv2d: bias of shape \(3,\)"):
        ops.conv2d(x, ops.zeros([2, 4, 3, 3]), ops.zeros([3]))
    with pytest.raises(ValueError, match=r"conv2d: expected a 4-D input .*\(4, 5, 5\)"):
        ops.conv2d(ops.zeros([4, 5, 5]), ops.zeros([2, 4, 3, 3]))
    with pytest.raises(ValueError, match="conv2d: stride must be at least 1"):
        ops.conv2d(x, ops.zeros([2, 4, 3, 3]), stride=0)
    with pytest.raises(TypeError, match=r"conv2d: unsupported dtype 'int32' \(shape \(1, 4, 5, 5\)\)"):
        ops.conv2d(ops.zeros([1, 4, 5, 5], dtype="int32"), ops.zeros([2, 4, 3, 3], dtype="int32"))
    with pytest.raises(ValueError, match=r"conv_transpose2d: output_padding \(2, 2\) must be smaller"):
        ops.conv_transpose2d(x, ops.zeros([4, 2, 3, 3]), stride=2, output_padding=2)
    with pytest.raises(ValueError, match=r"conv_transpose2d: given groups=1, weight of shape \(3, 2, 3, 3\)"):
        ops.conv_transpose2d(x, ops.zeros([3, 2, 3, 3]))
    with pytest.raises(ValueError, match=r"max_pool2d: the window \(7 x 7\) is larger than the padded input"):
        ops.max_pool2d(x, 7)
    with pytest.raises(ValueError, match=r"avg_pool2d: padding \(2, 2\) should be at most half"):
        ops.avg_pool2d(x, 3, padding=2)
    with pytest.raises(ValueError, match=r"adaptive_avg_pool2d: expected a 3-D .*\(5, 5\)"):
        ops.adaptive_avg_pool2d(ops.zeros([5, 5]), 2)
    with pytest.raises(ValueError, match=r"^max_pool2d_blocked: expected a 5-D \(N, C/c, H, W, c\) input .*"
                                         r"\(1, 4, 5, 5\)"):
        max_pool2d_blocked(x, 3)
    blocked = ops.zeros([1, 2, 5, 5, 8])
    with pytest.raises(ValueError, match=r"^max_pool2d_blocked: kernel_size must be at least 1, got 0"):
        max_pool2d_blocked(blocked, 0)
    with pytest.raises(ValueError, match=r"^max_pool2d_blocked: kernel_size must be an int or a pair of ints"):
        max_pool2d_blocked(blocked, (3, 3, 3))
    with pytest.raises(ValueError, match=r"^max_pool2d_blocked: the window \(7 x 7\) is larger than the padded "
                                         r"input \(5 x 5\); input shape \(1, 2, 5, 5, 8\)"):
        max_pool2d_blocked(blocked, 7)
    with pytest.raises(ValueError, match=r"^max_pool2d_blocked: padding \(2, 2\) should be at most half"):
        max_pool2d_blocked(blocked, 3, padding=2)
    with pytest.raises(ValueError, match=r"^max_pool2d_blocked: only the batch dimension may be symbolic"):
        max_pool2d_blocked(ops.symbol(["n", "c", 5, 5, 8]), 3)


def test_attention() -> None:
    q = ops.zeros([2, 7, 8])
    with pytest.raises(ValueError, match=r"attention: .* \(2, 7, 8\) \(2, 9, 4\) \(2, 9, 4\)"):
        ops.attention(q, ops.zeros([2, 9, 4]), ops.zeros([2, 9, 4]))
    with pytest.raises(ValueError, match=r"attention: operands could not be broadcast .*\(2,\) \(3,\)"):
        ops.attention(q, ops.zeros([3, 9, 8]), ops.zeros([3, 9, 8]))
    with pytest.raises(TypeError, match="attention: unsupported dtype 'int32'"):
        ops.attention(q, ops.zeros([2, 9, 8]), ops.zeros([2, 9, 8], dtype="int32"))


def test_errors_compile_nothing() -> None:
    before = len(KERNELS)
    for bad in (lambda: ops.conv2d(ops.zeros([1, 4, 5, 5]), ops.zeros([8, 3, 3, 3])),
                lambda: ops.take(ops.zeros([3]), [3]),
                lambda: ops.zeros([2, 3]) + ops.zeros([4])):
        with pytest.raises((ValueError, IndexError)):
            bad()
    assert len(KERNELS) == before


def test_bfloat16_tensors_need_ml_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # as if it were not installed
    with pytest.raises(TypeError, match=r"bfloat16 tensors need the ml_dtypes package"):
        ops.zeros([2], dtype="bfloat16")

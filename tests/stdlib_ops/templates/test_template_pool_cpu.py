"""The CPU max-pooling template against numpy's `max` over the padded windows: a maximum is exact (no rounding, f16
values convert to f32 and back exactly), so the results must be equal; a window holding a NaN gives NaN, the padding
(-inf) never wins, -inf and +inf in the data included. Shapes are drawn by hypothesis with odd sizes, kernels,
strides, paddings, dilations and `ceil_mode`, a batch that is symbolic in every build, and each vector width the
machine has; the cases run in the checking mode (every element access bounds-checked). The blocked template
(`max_pool2d_blocked_cpu`, channels in blocks of 8, 16 or 32 as the last axis) is held to the same reference computed
on the NCHW tensor the blocked one stands for."""

from __future__ import annotations

from functools import cache

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from template_checks import to_blocks

import stdlib_ops as ops
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.fusion.contract import the_kernel
from stdlib_ops.operators.pool import max_pool2d_blocked
from stdlib_ops.runtime import KERNELS
from stdlib_ops.templates.cpu_lanes import VECTOR_LANES, machine_has_lanes, machine_lanes
from stdlib_ops.templates.kernels.pool_cpu import max_pool2d_blocked_cpu, max_pool2d_cpu
from stdlib_ops.templates.params import ScheduleError
from stdlib_ops.templates.registry import choose_schedule

pytestmark = pytest.mark.skipif(machine_lanes() is None, reason="the machine's C compiler has no vector FMA")

SMALL = st.sampled_from([1, 3, 17]) | st.integers(1, 9)


@cache
def built(**params: object) -> object:
    """The template's kernel for `params` with a symbolic batch, built once per process in the checking mode."""
    return max_pool2d_cpu("n", **params).build(check=True)


@cache
def built_blocked(**params: object) -> object:
    """The blocked template's kernel for `params` with a symbolic batch, built once per process in the checking
    mode."""
    return max_pool2d_blocked_cpu("n", **params).build(check=True)


def reference(x: np.ndarray, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple,
              out_size: tuple) -> np.ndarray:
    """numpy's `max` over each window of `x` padded with -inf (enough on the right for `ceil_mode`'s last one)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw), (oh, ow) = kernel, stride, padding, dilation, out_size
    right = [max(0, (o - 1) * s + d * (k - 1) + 1 - n - p) for o, s, d, k, n, p in
             zip((oh, ow), (sh, sw), (dh, dw), (kh, kw), x.shape[2:], (ph, pw))]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, right[0]), (pw, right[1])), constant_values=-np.inf)
    taps = [xp[:, :, ky * dh:ky * dh + sh * (oh - 1) + 1:sh, kx * dw:kx * dw + sw * (ow - 1) + 1:sw]
            for ky in range(kh) for kx in range(kw)]
    return np.max(np.stack(taps), axis=0)


def drawn_data(draw: st.DrawFn, shape: tuple, dtype: str) -> np.ndarray:
    """Uniform values with NaN, +-inf and signed zeros planted at drawn places."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.uniform(-4, 4, shape)
    for value in draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0]), max_size=4)):
        x.reshape(-1)[rng.integers(x.size)] = value
    return x.astype(dtype)


@st.composite
def windows(draw: st.DrawFn) -> tuple:
    """`(height, width, kernel, stride, padding, dilation, ceil_mode)` of a pooling whose window fits the padded
    plane: odd sizes, kernels up to 4, strides up to 3, paddings up to half the kernel, dilations up to 2."""
    kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, kernel[0] // 2)), draw(st.integers(0, kernel[1] // 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    height, width = draw(SMALL), draw(SMALL)
    assume(all(n + 2 * p >= d * (k - 1) + 1 for n, p, d, k in zip((height, width), padding, dilation, kernel)))
    return height, width, kernel, stride, padding, dilation, draw(st.booleans())


@settings(max_examples=example_count(25), deadline=None)
@given(st.data())
def test_max_pooling_on_drawn_shapes(draw: st.DataObject) -> None:
    height, width, kernel, stride, padding, dilation, ceil_mode = draw.draw(windows())
    channels = draw.draw(SMALL)
    dtype = draw.draw(st.sampled_from(["float32", "float32", "float16"]))
    lanes = draw.draw(st.sampled_from([lanes for lanes in VECTOR_LANES if machine_has_lanes(lanes)]))
    symbol = ops.max_pool2d(ops.symbol(["n", channels, height, width], dtype), kernel, stride, padding, dilation,
                            ceil_mode)
    out_size = tuple(symbol.shape[2:])
    module = built(channels=channels, height=height, width=width, out_size=out_size, kernel=kernel, stride=stride,
                   padding=padding, dilation=dilation, dtype=dtype, lanes=lanes)
    for n in (1, draw.draw(st.integers(2, 3))):
        x = drawn_data(draw.draw, (n, channels, height, width), dtype)
        out = np.full((n, channels, *out_size), 7.0, dtype)
        module(n, x, out)
        np.testing.assert_array_equal(out, reference(x, kernel, stride, padding, dilation, out_size).astype(dtype))


@settings(max_examples=example_count(20), deadline=None)
@given(st.data())
def test_blocked_max_pooling_on_drawn_shapes(draw: st.DataObject) -> None:
    height, width, kernel, stride, padding, dilation, ceil_mode = draw.draw(windows())
    blocks = draw.draw(st.integers(1, 3))
    block = draw.draw(st.sampled_from([8, 16, 32]))
    lanes = draw.draw(st.sampled_from([n for n in VECTOR_LANES if machine_has_lanes(n) and block % n == 0]))
    dtype = draw.draw(st.sampled_from(["float32", "float32", "float16", "bfloat16"]))
    symbol = max_pool2d_blocked(ops.symbol(["n", blocks, height, width, block], dtype), kernel, stride, padding,
                                dilation, ceil_mode)
    out_size = tuple(symbol.shape[2:4])
    module = built_blocked(blocks=blocks, height=height, width=width, block=block, out_size=out_size, kernel=kernel,
                           stride=stride, padding=padding, dilation=dilation, dtype=dtype, lanes=lanes)
    numpy_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    for n in (1, draw.draw(st.integers(2, 3))):
        x = drawn_data(draw.draw, (n, blocks * block, height, width), numpy_dtype)
        out = np.full((n, blocks, *out_size, block), 7.0, numpy_dtype)
        module(n, to_blocks(x, block), out)
        expected = reference(x, kernel, stride, padding, dilation, out_size).astype(numpy_dtype)
        np.testing.assert_array_equal(out, to_blocks(expected, block))


def test_resnet_pooling_at_the_default_width_with_nans_in_shared_rows_and_columns() -> None:
    """ResNet-18's pooling (3x3, stride 2, padding 1) at the default vector width on a smaller plane: a row or column
    of odd index is in two windows (its row maxima are kept for the second), so NaNs there reach both outputs."""
    shape, out_size = (2, 3, 14, 13), (7, 7)
    module = max_pool2d_cpu("n", *shape[1:], out_size, (3, 3), (2, 2), (1, 1)).build(check=True)
    x = np.random.default_rng(7).uniform(-4, 4, shape).astype("float32")
    x[0, 0, 3, 7] = x[0, 1, 5, 0] = x[1, 2, 13, 12] = x[1, 0, 0, 5] = np.nan
    x[1, 1, 7, 7], x[1, 1, 9, 3] = np.inf, -np.inf
    out = np.full((2, 3, *out_size), 7.0, "float32")
    module(2, x, out)
    expected = reference(x, (3, 3), (2, 2), (1, 1), (1, 1), out_size).astype("float32")
    np.testing.assert_array_equal(out, expected)
    assert np.isnan(out[0, 0, 1:3, 3:5]).all()  # input row 3 and column 7 are in two windows each


def test_the_registry_takes_nchw_inputs_and_leaves_3d_ones_to_the_rules() -> None:
    def name(t: ops.Tensor) -> str:
        return the_kernel(choose_schedule(t.producer.task, Target.of("cpu")).module).name

    assert name(ops.max_pool2d(ops.symbol(["n", 64, 112, 112]), 3, 2, 1)) == "max_pool2d_cpu"
    assert name(ops.max_pool2d(ops.symbol([64, 112, 112]), 3, 2, 1)) == "max_pool2d"
    assert name(ops.max_pool2d(ops.symbol([1, 2, 9, 9], "float64"), 3)) == "max_pool2d"


def test_eager_blocked_pooling_on_the_cpu_takes_the_blocked_template() -> None:
    # blocks of 32 channels take the machine's widest vectors; 6 is a multiple of no width: the rule-based scheduler
    x = np.random.default_rng(3).uniform(-4, 4, (2, 96, 13, 12)).astype("float32")
    x[1, 40, 5, 6] = np.nan
    expected = reference(x, (3, 3), (2, 2), (1, 1), (1, 1), (7, 6)).astype("float32")
    for block, template in ((32, "max_pool2d_blocked_cpu"), (6, "max_pool2d_blocked")):
        got = max_pool2d_blocked(ops.asarray(to_blocks(x, block)), 3, 2, 1).numpy()
        np.testing.assert_array_equal(got, to_blocks(expected, block))
        task = max_pool2d_blocked(ops.symbol([2, 96 // block, 13, 12, block]), 3, 2, 1).producer.task
        schedule = choose_schedule(task, Target.of("cpu"))
        assert the_kernel(schedule.module).name == template and schedule.key in KERNELS  # the eager call's kernel
    resnet = max_pool2d_blocked(ops.symbol(["n", 2, 112, 112, 32]), 3, 2, 1).producer.task
    assert the_kernel(choose_schedule(resnet, Target.of("cpu")).module).name == "max_pool2d_blocked_cpu"


def test_bad_parameters_are_refused() -> None:
    shape = {"channels": 2, "height": 5, "width": 5, "out_size": (2, 2), "kernel": (3, 3)}
    with pytest.raises(ScheduleError, match="dtype float64 is not supported"):
        max_pool2d_cpu(1, **shape, dtype="float64")
    with pytest.raises(ScheduleError, match="stride must be positive ints"):
        max_pool2d_cpu(1, **shape, stride=(0, 1))
    with pytest.raises(ScheduleError, match="padding must not be negative"):
        max_pool2d_cpu(1, **shape, padding=(-1, 0))
    blocked = {"blocks": 2, "height": 5, "width": 5, "block": 8, "out_size": (2, 2), "kernel": (3, 3)}
    with pytest.raises(ScheduleError, match="the block of 8 channels is not a multiple of 16 lanes"):
        max_pool2d_blocked_cpu(1, **blocked, lanes=16)
    with pytest.raises(ScheduleError, match="block must be positive ints"):
        max_pool2d_blocked_cpu(1, **{**blocked, "block": 0}, lanes=4)

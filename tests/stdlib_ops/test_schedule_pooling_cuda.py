"""Pooling on CUDA through the rule-based scheduler: a window of fewer terms than a warp's lanes (ResNet-18's 3x3
max pool, a 2x2 average) is a loop in the thread, consecutive threads on consecutive outputs, each window read
once and no shuffles; a larger one (the adaptive average over a 7x7 map) stays a warp per output, which reads it
once too. The max pool's values equal numpy's on an odd shape (test_ops_conv_pool covers the others)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import stdlib_ops as ops
from hidet_lang.ir.expr import Intrinsic
from hidet_lang.ir.functor import collect
from hidet_lang.target import Target
from stdlib_ops.fusion.contract import the_kernel
from stdlib_ops.schedule import auto_schedule
from stdlib_ops.schedule.work import input_reads
from stdlib_ops.task import Task

CUDA = Target.of("cuda")


def task_of(build: Callable[[ops.Tensor], ops.Tensor], shape: tuple[int, ...]) -> Task:
    """The task of the one operator `build` applies to a symbol of `shape`."""
    producer = build(ops.symbol(list(shape), "float32")).producer
    assert producer is not None
    return producer.task


def shuffles(task: Task) -> int:
    return sum(i.name.startswith("shfl") for i in collect(the_kernel(auto_schedule(task, CUDA)).body, Intrinsic))


# (builder, input shape, output shape, window terms): 256-multiple outputs, so the counter's bound is exact
WINDOWS = [
    (lambda x: ops.max_pool2d(x, 3, 2, 1), (2, 8, 32, 64), (2, 8, 16, 32), 9),
    (lambda x: ops.avg_pool2d(x, 2), (1, 4, 32, 64), (1, 4, 16, 32), 4),
]


@pytest.mark.parametrize("case", WINDOWS, ids=["max_pool_3x3_s2_p1", "avg_pool_2x2"])
def test_a_small_window_is_a_loop_in_the_thread_reading_it_once(case: tuple) -> None:
    build, shape, out_shape, terms = case
    task = task_of(build, shape)
    assert shuffles(task) == 0
    assert input_reads(auto_schedule(task, CUDA)) == int(np.prod(out_shape)) * terms


def test_the_adaptive_average_of_a_7x7_map_is_a_warp_per_output_reading_it_once() -> None:
    task = task_of(lambda x: ops.adaptive_avg_pool2d(x, 1), (2, 256, 7, 7))
    assert shuffles(task) > 0
    assert input_reads(auto_schedule(task, CUDA)) == 2 * 256 * 64  # 49 terms over 32 lanes: two rounds a lane


def max_pool_reference(x: np.ndarray) -> np.ndarray:
    """3x3 windows, stride 2, padding 1 (never the maximum): ResNet-18's stem pool."""
    n, c, h, w = x.shape
    padded = np.full((n, c, h + 2, w + 2), -np.inf, x.dtype)
    padded[:, :, 1:-1, 1:-1] = x
    oh, ow = (h - 1) // 2 + 1, (w - 1) // 2 + 1
    windows = [padded[:, :, dy:dy + 2 * oh:2, dx:dx + 2 * ow:2] for dy in range(3) for dx in range(3)]
    return np.max(np.stack(windows), axis=0)


def test_max_pool_in_the_thread_equals_numpy_on_an_odd_shape() -> None:
    x = np.random.default_rng(0).standard_normal((2, 3, 11, 13)).astype(np.float32)
    np.testing.assert_array_equal(ops.max_pool2d(ops.asarray(x, device="cuda"), 3, 2, 1).numpy(),
                                  max_pool_reference(x))

"""The rule-based schedules of tasks whose reductions several output elements share (a block per group on CUDA,
the shared axes' loops outermost on the CPU) equal float64 numpy on hypothesis-drawn odd shapes, built with the
IR verified and run in the emulator's checking mode: layer norm and RMS norm without parameters, var and std over
leading axes, group norm, log-softmax over a leading axis, and an argmax that a column shares."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdlib_ops as ops
from codegen.build import build_module
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.compute import arg_reduce, compute, tensor_input
from stdlib_ops.schedule import auto_schedule
from stdlib_ops.schedule.signature import kernel_signature
from stdlib_ops.task import Task

U = 2.0**-24  # f32's unit roundoff
SIZES = st.sampled_from([1, 2, 7, 33, 40])


def task_of(build: Callable[[ops.Tensor], ops.Tensor], shape: tuple[int, ...], name: str) -> Task:
    """The task named `name` among those `build` applies to a symbol of `shape`."""
    pending = [build(ops.symbol(list(shape), "float32"))]
    while pending:
        producer = pending.pop().producer
        if producer is not None and producer.task.name == name:
            return producer.task
        pending.extend(producer.inputs if producer is not None else [])
    raise LookupError(name)


def normalized(x: np.ndarray, axes: tuple[int, ...], center: bool, eps: float) -> np.ndarray:
    x = x.astype(np.float64)
    if center:
        return (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    return x / np.sqrt((x * x).mean(axes, keepdims=True) + eps)


def softmax(x: np.ndarray, axis: int, log: bool) -> np.ndarray:
    shifted = x.astype(np.float64) - x.max(axis, keepdims=True)
    log_total = np.log(np.exp(shifted).sum(axis, keepdims=True))
    return shifted - log_total if log else np.exp(shifted - log_total)


# name: builder, the input's rank, the axes its reductions run over, the float64 reference
CASES = {
    "layer_norm": (lambda x: ops.layer_norm(x), 2, (1,), lambda x: normalized(x, (1,), True, 1e-5)),
    "rms_norm": (lambda x: ops.rms_norm(x), 2, (1,), lambda x: normalized(x, (1,), False, 1e-6)),
    "var": (lambda x: ops.var(x, axis=0), 2, (0,), lambda x: x.astype(np.float64).var(0)),
    "std": (lambda x: ops.std(x, axis=(0, 2), ddof=1), 3, (0, 2), lambda x: x.astype(np.float64).std((0, 2), ddof=1)),
    "group_norm": (lambda x: ops.group_norm(x, 1), 3, (1, 2), lambda x: normalized(x, (1, 2), True, 1e-5)),
    "log_softmax": (lambda x: ops.log_softmax(x, axis=0), 3, (0,), lambda x: softmax(x, 0, log=True)),
}


@functools.cache
def built(case: str, target: str) -> tuple[object, Task]:
    """The rule-based kernel of `case` over symbolic sizes d0, d1, ... (group norm: 2 channels), and its task."""
    build, rank = CASES[case][:2]
    shape = tuple(2 if case == "group_norm" and k == 1 else f"d{k}" for k in range(rank))
    task = task_of(build, shape, case)
    return build_module(auto_schedule(task, Target.of(target)), target, check=True), task


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@pytest.mark.parametrize("case", sorted(CASES))
@settings(max_examples=example_count(3), deadline=None)
@given(data=st.data())
def test_shared_reductions_match_numpy(case: str, target: str, data: st.DataObject) -> None:
    _, rank, axes, reference = CASES[case]
    shape = tuple(2 if case == "group_norm" and k == 1 else data.draw(SIZES, label=f"d{k}") for k in range(rank))
    if case == "std" and shape[0] * shape[2] < 2:
        shape = (2, *shape[1:])  # ddof=1 needs two terms
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    x = np.random.default_rng(seed).uniform(-3, 3, shape).astype(np.float32)
    kernel, task = built(case, target)
    sizes = {f"d{k}": d for k, d in enumerate(shape)}
    size_params = kernel_signature(task.inputs, task.outputs).sizes
    expected = reference(x)
    if case == "group_norm":  # its task sees x as [batch, groups, rest] (one group)
        x, expected = x.reshape(shape[0], 1, -1), expected.reshape(shape[0], 1, -1)
    y = np.full(expected.shape, np.nan, np.float32)
    kernel(*[sizes[v.name] for v in size_params], x, y)
    terms = int(np.prod([shape[a] for a in axes]))
    # each f32 sum of `terms` values is off by about terms * 2^-24 of their magnitudes (3 here); normalized
    # outputs reach sqrt(terms), which the statistics' errors are scaled by; exp, log and rsqrt add a few ulps
    bound = 8 * (terms + 8) * U * (np.abs(expected) + 3 * np.sqrt(terms) + 1)
    assert np.all(np.abs(y - expected) <= bound), f"max error {np.abs(y - expected).max()}"


def shared_argmax_task() -> Task:
    """y[i, j] = x[i, j] - x[argmax over the column j, j]: one argmax a column, read by every element of it."""
    x = tensor_input("x", "float32", ["rows", "cols"])
    y = compute("y", ["rows", "cols"],
                lambda i, j: x[i, j] - x[arg_reduce("rows", lambda k: x[k, j], "max"), j])
    return Task("column_peak", (x,), (y,))


@functools.cache
def shared_argmax(target: str) -> object:
    return build_module(auto_schedule(shared_argmax_task(), Target.of(target)), target, check=True)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@settings(max_examples=example_count(3), deadline=None)
@given(rows=SIZES, cols=SIZES, seed=st.integers(0, 2**32 - 1))
def test_a_shared_argmax_is_found_once_per_group(target: str, rows: int, cols: int, seed: int) -> None:
    x = np.random.default_rng(seed).uniform(-3, 3, (rows, cols)).astype(np.float32)
    y = np.full_like(x, np.nan)
    shared_argmax(target)(rows, cols, x, y)
    np.testing.assert_array_equal(y, x - x.max(axis=0))  # a subtraction of two f32 values: exact to its rounding

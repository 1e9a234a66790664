"""Fused graphs equal the unfused computation: hypothesis draws chains of elementwise operators (constants,
broadcast constant tensors, relu, tanh, neg, sigmoid) before and after an anchor (matmul, a sum, softmax), and
the data and sizes (1, 7, 33); the optimized graph is one kernel and agrees with the same graph built unfused
(one kernel per operator) and with numpy. One graph per drawn chain serves every drawn size (symbolic 'm')."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdlib_ops as ops

SIZES = st.sampled_from([1, 7, 33])
QUARTERS = st.sampled_from([q / 4 for q in range(-8, 9)])
K, N = 7, 5  # the anchor's fixed sizes: x is ['m', K]


def elementwise() -> st.SearchStrategy[tuple]:
    return st.one_of(
        st.tuples(st.sampled_from(["add", "mul"]), QUARTERS),
        st.tuples(st.just("add_row"), st.integers(0, 2**16)),
        st.tuples(st.sampled_from(["relu", "tanh", "neg", "sigmoid"])),
    )


def chains() -> st.SearchStrategy[tuple]:
    return st.lists(elementwise(), min_size=0, max_size=3).map(tuple)


def apply_ops(chain: tuple, t: ops.Tensor) -> ops.Tensor:
    for step in chain:
        kind = step[0]
        if kind == "add":
            t = t + step[1]
        elif kind == "mul":
            t = t * step[1]
        elif kind == "add_row":
            t = t + ops.asarray(_row(step[1], t.shape[-1]))
        else:
            t = getattr(ops, kind)(t)
    return t


def apply_numpy(chain: tuple, v: np.ndarray) -> np.ndarray:
    for step in chain:
        kind = step[0]
        if kind == "add":
            v = v + np.float32(step[1])
        elif kind == "mul":
            v = v * np.float32(step[1])
        elif kind == "add_row":
            v = v + _row(step[1], v.shape[-1])
        elif kind == "relu":
            v = np.maximum(v, np.float32(0))
        elif kind == "neg":
            v = -v
        elif kind == "tanh":
            v = np.tanh(v)
        else:
            v = np.float32(1) / (np.float32(1) + np.exp(-v))
    return v.astype(np.float32)


def _row(seed: int, n: int) -> np.ndarray:
    return (np.random.default_rng(seed).integers(-8, 9, n) / 4).astype(np.float32)


W = (np.random.default_rng(1).integers(-8, 9, (K, N)) / 4).astype(np.float32)


def softmax_np(v: np.ndarray) -> np.ndarray:
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


ANCHORS: dict[str, tuple[Callable[[ops.Tensor], ops.Tensor], Callable[[np.ndarray], np.ndarray]]] = {
    "matmul": (lambda t: ops.matmul(t, ops.asarray(W)), lambda v: v @ W),
    "sum": (lambda t: ops.sum(t, axis=-1, keepdims=True), lambda v: v.sum(axis=-1, keepdims=True)),
    "softmax": (lambda t: ops.softmax(t, axis=-1), softmax_np),
}


def check_chain(anchor: str, target: str, before: tuple, after: tuple, data: st.DataObject) -> None:
    make, reference = ANCHORS[anchor]
    xs = ops.symbol(["m", K])
    graph = ops.trace_from(apply_ops(after, make(apply_ops(before, xs))), inputs=[xs])
    fused = ops.optimize(graph).build(target)
    unfused = graph.build(target)
    assert len(fused.kernels) == 1, fused.kernels
    assert len(unfused.kernels) == len(graph.nodes)
    for _ in range(3):
        m = data.draw(SIZES, label="m")
        x = np.array(data.draw(st.lists(QUARTERS, min_size=m * K, max_size=m * K)), np.float32).reshape(m, K)
        expected = apply_numpy(after, reference(apply_numpy(before, x)))
        got, plain = fused(x).numpy(), unfused(x).numpy()
        # quarter data keeps sums exact; tanh, sigmoid and exp come from the C (or CUDA) library and may differ
        # from numpy's in the last ulp or two, which a sum of K = 7 terms below 8 keeps below 1e-5 relative
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("anchor", list(ANCHORS))
@settings(max_examples=6, deadline=None)
@given(before=chains(), after=chains(), data=st.data())
def test_chains_around_an_anchor_cpu(anchor: str, before: tuple, after: tuple, data: st.DataObject) -> None:
    check_chain(anchor, "cpu", before, after, data)


@pytest.mark.parametrize("anchor", list(ANCHORS))
@settings(max_examples=2, deadline=None)
@given(before=chains(), after=chains(), data=st.data())
def test_chains_around_an_anchor_cuda(anchor: str, before: tuple, after: tuple, data: st.DataObject) -> None:
    check_chain(anchor, "cuda", before, after, data)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_relu_matmul_add_and_softmax_of_scaled_input_are_one_kernel_each(target: str) -> None:
    xs = ops.symbol(["m", K])
    b = ops.asarray(_row(3, N))
    first = ops.optimize(ops.trace_from(ops.relu(ops.matmul(xs, ops.asarray(W)) + b), [xs])).build(target)
    second = ops.optimize(ops.trace_from(ops.softmax(xs * 2 + 1), [xs])).build(target)
    assert first.kernels == ["matmul* + add + relu"]
    assert second.kernels == ["mul + add + softmax*"]
    x = _row(5, 33 * K).reshape(33, K)
    np.testing.assert_allclose(first(x).numpy(), np.maximum(x @ W + _row(3, N), 0), rtol=1e-6)
    np.testing.assert_allclose(second(x).numpy(), softmax_np(x * 2 + 1), rtol=1e-5, atol=1e-7)

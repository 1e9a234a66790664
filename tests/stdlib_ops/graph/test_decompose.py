"""Operators without a template on a target built as their decomposition: f64 attention on the CPU (the CPU template
takes f32 and f16) as matmul, softmax and matmul (causal too), checked against numpy; kept whole where a template
takes it (CUDA, and f16 on the CPU)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import stdlib_ops as ops
from hidet_lang.testing import example_count


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    scores = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True)) @ v


@settings(max_examples=example_count(5), deadline=None)
@given(data=st.data())
def test_attention_on_the_cpu_is_built_as_matmul_softmax_matmul(data: st.DataObject) -> None:
    heads, sq, sk, d = (data.draw(st.integers(1, n)) for n in (3, 9, 9, 8))
    causal = data.draw(st.booleans())
    if causal:
        sk = sq
    qs, ks, vs = (ops.symbol(shape, "float64") for shape in (["batch", heads, sq, d], ["batch", heads, sk, d], [sk, d]))
    graph = ops.optimize(ops.trace_from(ops.attention(qs, ks, vs, causal=causal), [qs, ks, vs]))
    compiled = graph.build("cpu")
    assert "attention" not in " ".join(compiled.kernels) and any("softmax" in k for k in compiled.kernels)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    q, k = rng.standard_normal((2, heads, sq, d)), rng.standard_normal((2, heads, sk, d))
    v = rng.standard_normal((sk, d))
    # scores: d-term f64 dot products; softmax: exp and a sum of sk terms; out: sk-term products of weights <= 1
    # with |v| <= ~4: a few ulps of sk * max|v| covers every rounding in order
    bound = 8 * (d + sk) * 2.0**-53 * (np.abs(v).max() + 1)
    np.testing.assert_allclose(compiled(q, k, v).numpy(), attention_reference(q, k, v, causal), rtol=0, atol=bound)


def test_attention_stays_whole_where_a_template_takes_it_or_precision_would_change() -> None:
    qs = ops.symbol([2, 4, 8])
    graph = ops.optimize(ops.trace_from(ops.attention(qs, qs, qs), [qs]))
    assert graph.build("cuda").kernels == ["attention"]
    half = ops.symbol([2, 4, 8], dtype="float16")
    assert ops.optimize(ops.trace_from(ops.attention(half, half, half), [half])).build("cpu").kernels == ["attention"]


def test_an_unpartitioned_graph_is_decomposed_too() -> None:
    qs = ops.symbol([3, 5], "float64")
    compiled = ops.trace_from(ops.attention(qs, qs, qs), [qs]).build("cpu")
    assert len(compiled.kernels) == 5  # transpose, matmul, mul, softmax, matmul: one kernel each
    q = np.random.default_rng(0).standard_normal((3, 5))
    np.testing.assert_allclose(compiled(q).numpy(), attention_reference(q, q, q, False), rtol=1e-12, atol=1e-14)

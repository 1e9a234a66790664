"""API.md §4 as written, on the CPU and on CUDA (a GPU or the emulator): eager operators, a traced graph with
matmul + add + relu fused into one kernel and softmax in another, its printout and DOT text."""

from __future__ import annotations

import numpy as np
import pytest

import stdlib_ops as ops


def softmax_reference(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_api_section_4_runs_as_written(target: str) -> None:
    x = np.random.randn(64, 512).astype(np.float32)
    w = np.random.randn(512, 256).astype(np.float32)
    y = ops.relu(ops.matmul(ops.asarray(x), ops.asarray(w)))
    np.testing.assert_allclose(y.numpy(), np.maximum(x @ w, 0), rtol=1e-4, atol=1e-3)

    xs = ops.symbol([64, 512], dtype='float32')
    b = ops.asarray(np.zeros(256, np.float32))
    out = ops.softmax(ops.relu(ops.matmul(xs, ops.asarray(w)) + b), axis=-1)
    graph = ops.trace_from(out, inputs=[xs])
    graph = ops.optimize(graph)
    compiled = graph.build(target=target)
    result = compiled(x)
    assert isinstance(result, ops.Tensor) and result.device == target and result.shape == (64, 256)
    # a sum of 512 products of normal values: f32 rounding of a few ulps of |x @ w| ~ 50, through exp
    np.testing.assert_allclose(result.numpy(), softmax_reference(np.maximum(x @ w, 0)), rtol=1e-4, atol=1e-6)
    assert len(compiled.kernels) == 2
    # on the CPU the constant weights are packed when the graph is built (`stdlib_ops.graph.pack_weights`)
    anchor = "matmul_packed*" if target == "cpu" else "matmul*"
    assert compiled.kernels == [f"{anchor} + add + relu", "softmax"]
    text = str(graph)
    assert "kernel 0: matmul* + add + relu" in text and "kernel 1: softmax" in text
    assert "%0 = matmul(%x0, const0)  [float32 (64, 256)]" in text


def test_printout_and_dot_before_and_after_optimize() -> None:
    xs = ops.symbol(["batch", 4])
    out = ops.sum(ops.exp(xs), axis=1)
    graph = ops.trace_from(out, inputs=[xs])
    assert str(graph).splitlines() == [
        "FlowGraph(%x0: float32 (batch, 4))",
        "  %0 = exp(%x0)  [float32 (batch, 4)]",
        "  %1 = sum(%0, axes=(1,), keepdims=False)  [float32 (batch,)]",
        "  return %1",
    ]
    dot = ops.optimize(graph).to_dot()
    assert dot.startswith("digraph FlowGraph {") and dot.rstrip().endswith("}")
    assert "subgraph cluster_0" in dot and "exp + sum*" in dot and "op0 -> op1;" in dot
    assert "cluster" not in graph.to_dot()


def test_trace_from_rejects_a_missing_input() -> None:
    xs, ys = ops.symbol([3]), ops.symbol([3])
    with pytest.raises(ValueError, match="not among the inputs"):
        ops.trace_from(xs + ys, inputs=[xs])
    with pytest.raises(ValueError, match="not a graph input"):
        ops.trace_from(xs + ys, inputs=[xs, xs + 1.0])


def test_named_inputs_name_the_printout_and_the_call_errors() -> None:
    ids, scale = ops.symbol(["batch", 4]), ops.symbol([4])
    graph = ops.trace_from(ids * scale, inputs=[ids, scale], names=["input_ids", "scale"])
    assert str(graph).splitlines()[0] == "FlowGraph(%input_ids: float32 (batch, 4), %scale: float32 (4,))"
    optimized = ops.optimize(graph)
    assert optimized.input_names == ["input_ids", "scale"]
    bound = graph.bind({scale: np.ones(4, np.float32)})
    assert bound.input_names == ["input_ids"]
    compiled = optimized.build("cpu")
    with pytest.raises(ValueError, match=r"%scale: float32 \(4,\)"):
        compiled(np.ones((2, 4), np.float32), np.ones(5, np.float32))
    with pytest.raises(ValueError, match="2 inputs need as many different names"):
        ops.trace_from(ids * scale, inputs=[ids, scale], names=["same", "same"])

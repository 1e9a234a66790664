"""`CompiledGraph.report()`: each kernel of a CUDA graph, named by the operators it computes, with the columns of
a CUDA module's report; a CPU graph is refused."""

from __future__ import annotations

import pytest

import stdlib_ops as ops


def test_each_fused_kernel_of_a_cuda_graph_is_reported() -> None:
    a, b = ops.symbol([1, 33, 40], dtype="float16"), ops.symbol([1, 40, 24], dtype="float16")
    x = ops.symbol([5, 7])
    graph = ops.optimize(ops.trace_from([ops.relu(ops.matmul(a, b)), ops.softmax(ops.exp(x), -1)], [a, b, x]))
    compiled = graph.build("cuda:sm_80")
    report = compiled.report()
    assert report.arch == "sm_80"
    assert [k.name for k in report] == compiled.titles and len(compiled.titles) == 2
    for kernel, module in zip(report, compiled.modules):
        own = module.report().kernels[0]
        assert (kernel.registers, kernel.static_smem, kernel.dynamic_smem, kernel.occupancy) == \
               (own.registers, own.static_smem, own.dynamic_smem, own.occupancy)
    text = str(report)
    assert all(title in text for title in compiled.titles) and "occupancy" in text.splitlines()[1]


def test_a_cpu_graph_is_refused() -> None:
    x = ops.symbol([5, 7])
    compiled = ops.optimize(ops.trace_from(ops.exp(x), [x])).build("cpu")
    with pytest.raises(TypeError, match="covers CUDA graphs"):
        compiled.report()

"""`CompiledGraph.report()`: each kernel of a CUDA graph, named by the operators it computes, with the columns of
a CUDA module's report, and with a profile the lower bound on each kernel's time; a CPU graph is refused, and so is
a profile that holds no launch of the graph's kernels."""

from __future__ import annotations

import numpy as np
import pytest

import hidet_lang as hidet
import stdlib_ops as ops
from hidet_lang.cuda.profile_bound import microseconds


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


def test_a_profile_adds_each_kernels_time_bound() -> None:
    """Two matmuls whose modules' kernels have the same name: each line has its own module's bound."""
    a, b, c = ops.symbol([8, 16]), ops.symbol([16, 16]), ops.symbol([16, 64])
    compiled = ops.optimize(ops.trace_from(ops.matmul(ops.matmul(a, b), c), [a, b, c])).build("cuda:sm_80")
    with hidet.cuda.profile() as p:
        compiled(np.ones((8, 16), np.float32), np.ones((16, 16), np.float32), np.ones((16, 64), np.float32))
    first, second = (p.kernels(module=m) for m in compiled.modules)
    assert len(first) == len(second) == 1 and first[0].name == second[0].name
    with pytest.raises(ValueError, match="name the module"):
        p.kernel(first[0].name)
    report = compiled.report(profile=p)
    bounds = [k.bound for k in report]
    assert bounds == [first[0].bound(), second[0].bound()]
    assert bounds[0] != bounds[1]  # the second's output has 4 times the columns: more blocks, sectors
    header, *lines = str(report).splitlines()[1:4]
    assert header.endswith("time >=  bound by")
    assert [line.endswith(f"{microseconds(b.seconds)}  {b.binding}") for line, b in zip(lines, bounds)] == [True] * 2
    assert "lower bound" in str(report) and "time >=" not in str(compiled.report())


def test_a_profile_without_the_graphs_launches_is_refused() -> None:
    x = ops.symbol([5, 7])
    compiled = ops.optimize(ops.trace_from(ops.exp(x), [x])).build("cuda:sm_80")
    with hidet.cuda.profile() as p:
        pass
    with pytest.raises(ValueError, match=r"no launch of the graph's kernels 'exp'"):
        compiled.report(profile=p)
    with pytest.raises(ValueError, match="no launch of kernel"):
        compiled.modules[0].report(p)

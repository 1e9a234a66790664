"""A template that breaks the fusion contract for an input: the producer is not fused into it (it stays a kernel
of its own), the compiled graph's printout says why, and the result is still right."""

from __future__ import annotations

import numpy as np

import hidet_lang as hidet
import stdlib_ops as ops
from hidet_lang import as_tensor_pointer, attrs, f32, i32
from hidet_lang.ir.func import IRModule
from stdlib_ops.operators.base import apply, as_tensors, dims
from stdlib_ops.task import Task

NAME = "graph_test_row_first"  # a task only this test defines and templates


def row_first(x: ops.Tensor) -> ops.Tensor:
    """y[i] = x[i, 0] (a one-term sum, so that the task anchors a group), scheduled by the viewing template below
    on the CPU."""
    (x,) = as_tensors(NAME, x)
    return apply(NAME, {}, [x], lambda xv: ops.compute(
        "out", dims(x.shape[:1]), lambda i: ops.reduce([1], lambda k: xv[i, k], "sum")))[0]


@ops.register_template(NAME, "cpu")
def viewing_template(task: Task) -> IRModule | None:
    with hidet.script_module() as module:

        @hidet.script
        def row_first_kernel(n: i32, x: f32[n, 8], y: f32[n]):  # noqa: F821
            attrs.func_kind = "public"
            p = as_tensor_pointer(x, f32, [n * 8])
            for i in range(n):
                y[i] = p[i * 8]

    return module.ir_module()


def test_a_contract_breaking_template_keeps_its_producer_apart() -> None:
    xs = ops.symbol(["n", 8])
    graph = ops.optimize(ops.trace_from(ops.relu(row_first(ops.tanh(xs))), [xs]))
    assert [g.title for g in graph.groups] == ["tanh + graph_test_row_first* + relu"]
    compiled = graph.build("cpu")
    assert compiled.kernels == ["tanh", "graph_test_row_first* + relu"]
    assert "note: tanh not fused into graph_test_row_first: kernel 'row_first_kernel' breaks the fusion contract" \
        in str(compiled)
    x = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    np.testing.assert_allclose(compiled(x).numpy(), np.maximum(np.tanh(x[:, 0]), 0), rtol=1e-6)

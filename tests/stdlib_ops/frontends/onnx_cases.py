"""What the ONNX import tests share: tiny models built with `onnx.helper`, run through `from_onnx` and through
onnxruntime on the same inputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime
from onnx import helper, numpy_helper

import stdlib_ops as ops

F32_EPS = float(np.finfo(np.float32).eps)


def make_model(nodes: Sequence[onnx.NodeProto], inputs: Mapping[str, np.ndarray],
               outputs: Sequence[str] = ("y",), initializers: Mapping[str, np.ndarray] | None = None,
               opset: int = 18, shapes: Mapping[str, Sequence[Any]] | None = None) -> onnx.ModelProto:
    """A model of `nodes` whose graph inputs have the arrays' dtypes and shapes (or `shapes[name]`, which may
    name symbolic dimensions); output types come from strict shape inference, which also checks the model."""
    shapes = shapes or {}
    graph = helper.make_graph(
        list(nodes), "test",
        [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), shapes.get(name, a.shape))
         for name, a in inputs.items()],
        [helper.make_empty_tensor_value_info(name) for name in outputs],
        initializer=[numpy_helper.from_array(a, name) for name, a in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def run_both(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(from_onnx's compiled graph on 'cpu', onnxruntime) on `inputs`: the outputs of each, as numpy arrays."""
    compiled = ops.optimize(ops.from_onnx(model)).build("cpu")
    got = compiled(*inputs.values())
    got = [got] if not isinstance(got, tuple) else list(got)
    want = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, dict(inputs))
    return [g.numpy() for g in got], want


def check(nodes: Sequence[onnx.NodeProto] | onnx.NodeProto, inputs: Mapping[str, np.ndarray],
          rtol: float = 0.0, atol: float = 0.0, outputs: Sequence[str] = ("y",),
          initializers: Mapping[str, np.ndarray] | None = None, opset: int = 18) -> None:
    """The model of `nodes` gives what onnxruntime gives, in dtype, shape and values (within rtol, atol)."""
    nodes = [nodes] if isinstance(nodes, onnx.NodeProto) else nodes
    got, want = run_both(make_model(nodes, inputs, outputs, initializers, opset), inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if rtol == atol == 0.0:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def floats(rng: np.random.Generator, shape: Sequence[int], lo: float = -4.0, hi: float = 4.0) -> np.ndarray:
    """float32 values uniform in [lo, hi)."""
    return rng.uniform(lo, hi, size=tuple(shape)).astype(np.float32)

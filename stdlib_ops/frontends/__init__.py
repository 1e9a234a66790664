"""Models in: `from_onnx` imports an ONNX model as a graph, and `torch_backend.hidet_lang_backend` is the
`torch.compile` backend (`torch.compile(model, backend="hidet_lang")`). torch and onnx are optional: each is
imported when its path is used."""

from __future__ import annotations

from typing import Any

from stdlib_ops.frontends.unsupported import UnsupportedOperationsError


def from_onnx(model: Any, **options: Any) -> Any:
    """A `FlowGraph` computing the ONNX `model` (an `onnx.ModelProto` or a path to a .onnx file); see
    `stdlib_ops.frontends.onnx_import.from_onnx`."""
    from stdlib_ops.frontends.onnx_import import from_onnx as import_model  # onnx (optional) loads on use

    return import_model(model, **options)


__all__ = ["UnsupportedOperationsError", "from_onnx"]

"""stdlib_ops: operators as tasks (compute definitions), scheduled by templates or the rule-based scheduler,
run eagerly on concrete tensors or recorded on symbolic ones (`import stdlib_ops as ops`); `tune` chooses the
templates' schedule parameters for this machine."""

from __future__ import annotations

from stdlib_ops.compute import arg_reduce, compute, reduce, tensor_input
from stdlib_ops.frontends import from_onnx
from stdlib_ops.graph import CompiledGraph, FlowGraph, load, optimize, trace_from
from stdlib_ops.operators import *  # noqa: F403 - the operator functions are the package's surface
from stdlib_ops.operators import __all__ as _operator_names
from stdlib_ops.task import InverseMap, Task
from stdlib_ops.templates.registry import register_template  # importing templates registers the library's
from stdlib_ops.tensor import Tensor, arange, asarray, empty, from_dlpack, full, ones, randn, symbol, zeros
from stdlib_ops.tuning import TuningResult, tune

__all__ = [
    *_operator_names, "InverseMap", "Task", "Tensor", "arange", "arg_reduce", "asarray", "compute", "empty",
    "from_dlpack", "full", "ones", "randn", "reduce", "register_template", "symbol", "tensor_input", "zeros",
    "CompiledGraph", "FlowGraph", "from_onnx", "load", "optimize", "trace_from", "TuningResult", "tune",
]

"""What every operator shares: `Operator` (a task bound to input tensors), `apply` (run eagerly or record),
numpy's broadcasting and axis rules, and error messages that name the operator and the shapes."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hidet_lang.ir.expr import Constant, Expr, Var
from hidet_lang.ir.types import int32
from stdlib_ops.compute import ComputeTensor, as_dim, tensor_input
from stdlib_ops.runtime import EAGER
from stdlib_ops.runtime.dispatch import output_specs
from stdlib_ops.task import InverseMap, Task
from stdlib_ops.tensor import Tensor, asarray, tensor_of_runtime_array


class Operator:
    """A task applied to input tensors; the producer of its output tensors in a traced graph."""

    __slots__ = ("task", "inputs", "outputs")

    def __init__(self, task: Task, inputs: list[Tensor]) -> None:
        self.task = task
        self.inputs = inputs
        self.outputs: list[Tensor] = []

    @property
    def name(self) -> str:
        """The operator's name (its task's)."""
        return self.task.name

    def __repr__(self) -> str:
        return f"Operator({self.task.key})"


Define = Callable[..., "ComputeTensor | Sequence[ComputeTensor]"]


def apply(name: str, attrs: dict[str, Any], inputs: Sequence[Tensor], define: Define,
          inverse: Callable[[list[Var], list[ComputeTensor]], dict[int, InverseMap]] | None = None) -> list[Tensor]:
    """The outputs of operator `name` on `inputs`: computed at once when every input is concrete and the outputs'
    sizes are known, else recorded (symbolic outputs whose producer is the new `Operator`). `define(*input_vars)`
    gives the output compute(s)."""
    device = inputs[0].device
    concrete = True
    for t in inputs:
        if t.device != device:
            devices = ", ".join(sorted({t.device for t in inputs}))
            raise ValueError(f"{name}: the inputs are on different devices ({devices})")
        concrete = concrete and t.storage is not None

    def make_task() -> Task:
        xs = [tensor_input(f"x{i}", t.dtype, t.shape) for i, t in enumerate(inputs)]
        outs = define(*xs)
        outs = [outs] if isinstance(outs, ComputeTensor) else list(outs)
        return Task(name, tuple(xs), tuple(outs), dict(attrs), inverse(xs, outs) if inverse else {})

    if concrete:
        outputs = EAGER.run((name, tuple(sorted(attrs.items())) if attrs else ()), inputs, make_task)
        if outputs is not None:
            return outputs
    return record(make_task(), inputs)


def record(task: Task, inputs: Sequence[Tensor]) -> list[Tensor]:
    """The symbolic outputs of `task` applied to `inputs`, produced by a new `Operator` (for a graph)."""
    device = inputs[0].device
    op = Operator(task, list(inputs))
    op.outputs = [Tensor(shape, dtype, device, producer=op, output_index=k)
                  for k, (shape, dtype) in enumerate(output_specs(task))]
    return op.outputs


def scalar_dtype(value: Any, other: str) -> str:
    """The dtype a Python scalar takes next to a tensor of dtype `other` (numpy's weak scalar rule)."""
    kind = np.dtype(other).kind if other != "bfloat16" else "f"
    if isinstance(value, bool):
        return other
    if isinstance(value, int):
        return other if kind in "iuf" else "int64"
    if isinstance(value, float):
        return other if kind == "f" else "float64"
    raise TypeError(f"cannot use a {type(value).__name__} ({value!r}) as a tensor operand")


def as_tensors(name: str, *values: Any) -> list[Tensor]:
    """The operands as tensors: the runtime's arrays (`hidet.randn`, `hidet.empty`, ...) are the tensors holding them,
    without a copy; Python scalars become 0-d tensors of the dtype numpy would give them; other array-likes are
    copied into tensors (where one operand is a tensor)."""
    if all(type(v) is Tensor for v in values):
        return list(values)
    values = tuple(tensor_of_runtime_array(v) for v in values)  # `hidet.randn` and the others' arrays are tensors
    like = next((v for v in values if isinstance(v, Tensor)), None)
    if like is None:
        raise TypeError(f"{name}: needs at least one tensor operand")
    out = []
    for v in values:
        if isinstance(v, Tensor):
            out.append(v)
        elif isinstance(v, (bool, int, float)):
            out.append(asarray(np.asarray(v, scalar_dtype(v, like.dtype)), device=like.device))
        else:
            out.append(asarray(v, device=like.device))
    return out


@functools.cache
def result_dtype(*dtypes: str) -> str:
    """numpy's result type of the dtypes (bfloat16 stays bfloat16 with itself)."""
    if all(d == "bfloat16" for d in dtypes):
        return "bfloat16"
    return np.result_type(*[np.float32 if d == "bfloat16" else d for d in dtypes]).name


def shape_str(shape: Sequence[Any]) -> str:
    """A shape as numpy prints it: (2, 3)."""
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def broadcast_shapes(name: str, *shapes: Sequence[Any]) -> tuple:
    """numpy's broadcast of `shapes` (string dimensions broadcast with 1 and with themselves)."""
    return _broadcast_shapes(name, *[tuple(s) for s in shapes])


@functools.cache
def _broadcast_shapes(name: str, *shapes: tuple) -> tuple:
    rank = max(len(s) for s in shapes)
    out: list[Any] = []
    for k in range(rank):
        dims = {s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ValueError(f"{name}: operands could not be broadcast together with shapes "
                             f"{' '.join(shape_str(s) for s in shapes)}")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_index(x: Var, out_axes: Sequence[Expr]) -> tuple[Expr, ...]:
    """The index of input `x` read for output index `out_axes` under broadcasting (size-1 dimensions read 0)."""
    shape = x.type.shape
    offset = len(out_axes) - len(shape)
    index = []
    for k, d in enumerate(shape):
        index.append(Constant(0, int32) if isinstance(d, int) and d == 1 else out_axes[offset + k])
    return tuple(index) or (Constant(0, int32),)


def normalize_axis(name: str, axis: int, ndim: int) -> int:
    """`axis` in [0, ndim), negative counting from the end; numpy's AxisError message otherwise."""
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(f"{name}: axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def normalize_axes(name: str, axis: Any, ndim: int) -> tuple[int, ...]:
    """The sorted distinct axes that `axis` (None: all, an int, or a sequence) names."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = tuple(sorted({normalize_axis(name, int(a), ndim) for a in axes}))
    if len(out) != len(axes):
        raise ValueError(f"{name}: repeated axis in {axis!r}")
    return out


def same_shape_inverse(xs: list[Var], outs: list[ComputeTensor]) -> dict[int, InverseMap]:
    """Inverse maps of an element-wise task: each input as large as the output maps index to the same index."""
    out = outs[0]
    maps = {}
    for i, x in enumerate(xs):
        if tuple(x.type.shape) == tuple(out.shape):
            axes = tuple(Var(f"j{k}", int32) for k in range(len(out.shape)))
            maps[i] = InverseMap(axes, axes)
    return maps


def dims(shape: Sequence[Any]) -> tuple:
    """A tensor shape as compute definitions hold it."""
    return tuple(as_dim(d) for d in shape)

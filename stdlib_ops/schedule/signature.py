"""The parameter list of a scheduled kernel, as the kernel contract fixes it.

One `i32` per distinct symbolic dimension (named like it, in order of first appearance across the inputs, then
the outputs), then the inputs, then the outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from hidet_lang.ir.expr import Expr, Var
from hidet_lang.ir.functor import collect
from hidet_lang.ir.types import TensorType
from stdlib_ops.compute.nodes import ComputeTensor


@dataclass(frozen=True)
class KernelSignature:
    """The size parameters, input parameters and output parameters of a task's kernel."""

    sizes: tuple[Var, ...]
    inputs: tuple[Var, ...]
    outputs: tuple[Var, ...]

    @property
    def params(self) -> tuple[Var, ...]:
        """Every parameter, in order."""
        return (*self.sizes, *self.inputs, *self.outputs)


def size_vars_of(shapes: list[tuple]) -> tuple[Var, ...]:
    """The distinct size variables used by `shapes`, in order of first appearance."""
    seen: dict[Var, None] = {}
    for shape in shapes:
        for d in shape:
            if isinstance(d, Expr):
                for v in collect(d, Var):
                    seen.setdefault(v)
    return tuple(seen)


def storage_shape(shape: tuple) -> tuple:
    """The shape a kernel parameter declares for a tensor of `shape`: a scalar (rank 0) is stored as `[1]`."""
    return tuple(shape) if len(shape) else (1,)


def kernel_signature(inputs: tuple[Var, ...], outputs: tuple[ComputeTensor, ...]) -> KernelSignature:
    """The signature of a kernel computing `outputs` from `inputs` (a rank-0 output is declared with shape [1])."""
    shapes = [i.type.shape for i in inputs] + [tuple(o.shape) for o in outputs]
    out_params = tuple(Var(o.name, TensorType(o.dtype, storage_shape(o.shape))) for o in outputs)
    return KernelSignature(size_vars_of(shapes), inputs, out_params)

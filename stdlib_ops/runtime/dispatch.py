"""Eager dispatch: an operator on concrete tensors runs its task's compiled kernel at once.

The kernel is found by a cheap key (operator name, attributes, input shapes and dtypes, device) before any
task is built, so a repeated call costs a dictionary lookup, the output allocation and the kernel call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from codegen import arrays
from hidet_lang.ir.expr import Expr, Var
from stdlib_ops.runtime.kernels import KERNELS, KernelCache, target_of
from stdlib_ops.task import Task
from stdlib_ops.tensor import Tensor

OutSpec = tuple[tuple[Any, ...], str]


def output_specs(task: Task) -> list[OutSpec]:
    """The (shape, dtype) of each output of `task`; symbolic dimensions as strings."""
    return [(tuple(_dim(d) for d in out.shape), out.dtype.numpy_name) for out in task.outputs]


def _dim(d: Any) -> Any:
    if isinstance(d, Var):
        return d.name
    if isinstance(d, Expr):
        return str(d)
    return int(d)


def kernel_argument(t: Tensor) -> Any:
    """The array a kernel receives for `t` (a scalar is passed as a one-element array)."""
    if t.shape:
        return t.storage
    return t.storage.reshape((1,))


class EagerDispatcher:
    """Runs operators on concrete tensors, remembering the compiled kernel of each call signature."""

    def __init__(self, kernels: KernelCache) -> None:
        self._kernels = kernels
        self._calls: dict[tuple, tuple[Any, list[OutSpec]]] = {}

    def run(self, key: tuple, inputs: Sequence[Tensor], make_task: Callable[[], Task]) -> list[Tensor]:
        """The outputs of the operator `key` names (its name and attributes) on concrete `inputs`."""
        device = inputs[0].device
        call_key = (key, device, *[(t.shape, t.dtype) for t in inputs])
        entry = self._calls.get(call_key)
        if entry is None:
            task = make_task()
            task.check_target(target_of(device))
            specs = output_specs(task)
            empty = all(0 in shape for shape, _ in specs)  # nothing to compute: no kernel is built or launched
            entry = self._calls[call_key] = (None if empty else self._kernels.get(task, target_of(device)), specs)
        compiled, specs = entry
        outs = [Tensor(shape, dtype, device, arrays.empty(shape, dtype, device)) for shape, dtype in specs]
        if compiled is not None:
            compiled(*[kernel_argument(t) for t in inputs], *[kernel_argument(t) for t in outs])
        return outs


EAGER = EagerDispatcher(KERNELS)

"""Eager dispatch: an operator on concrete tensors runs its task's compiled kernel at once.

The kernel is compiled once in the process's one kernel cache (`KERNELS`, by schedule key, which graphs share).
In front of it, a call signature (operator name, attributes, input shapes and dtypes, device) is remembered with
its prepared call (`EagerDispatcher._calls`, a `ChoiceMemo`), before any task is built, so a repeated call costs a
dictionary lookup, the output allocation and the kernel call. The memo is emptied when a schedule choice may have
changed (a tuning run recorded a winner, a template was registered, an option was set), so the next call chooses
again and takes the new schedule (or finds the same kernel in `KERNELS`). On the
CPU the kernel's C function is called directly with the addresses of the tensors' data (each tensor's found once),
since the key already guarantees what the checked caller would check; storage it cannot take as it is goes
through the checked caller, which explains the problem or converts the argument.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from codegen.runtime import array_address, empty
from hidet_lang.target import Target
from stdlib_ops.compute import shape_entry
from stdlib_ops.runtime.kernels import KERNELS, KernelCache
from stdlib_ops.task import Task
from stdlib_ops.templates.choice_memo import ChoiceMemo
from stdlib_ops.tensor import Tensor

OutSpec = tuple[tuple[Any, ...], str]


def output_specs(task: Task) -> list[OutSpec]:
    """The (shape, dtype) of each output of `task`; symbolic dimensions as strings."""
    return [(tuple(shape_entry(d) for d in out.shape), out.dtype.numpy_name) for out in task.outputs]


def kernel_argument(t: Tensor) -> Any:
    """The array a kernel receives for `t` (a scalar is passed as a one-element array)."""
    if t.shape:
        return t.storage
    return t.storage.reshape((1,))


def data_address(t: Tensor) -> int:
    """The address of the data of a 'cpu' tensor, as a kernel's C function takes it (found once per tensor);
    TypeError or ValueError for storage that cannot be passed as it is (see `array_address`)."""
    if t.address is None:
        t.address = array_address(t.storage)
    return t.address


@dataclass(frozen=True)
class EagerCall:
    """What a call signature runs: the compiled `kernel` (None: no element to compute, or sizes not known yet), its
    C function taking addresses (`direct`, where it has one) and the (shape, dtype) of each output."""

    kernel: Any
    direct: Callable[..., None] | None
    outputs: list[OutSpec]
    symbolic: bool = False  # an output has a symbolic size: nothing to run before a graph binds it

    def launch(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Run the kernel on `inputs`, writing `outputs`."""
        if self.direct is not None:
            try:
                addresses = [data_address(t) for t in inputs] + [data_address(t) for t in outputs]
            except (TypeError, ValueError):
                pass  # the checked call below says what is wrong with the storage, or takes it
            else:
                self.direct(*addresses)
                return
        if self.kernel is not None:
            self.kernel(*[kernel_argument(t) for t in inputs], *[kernel_argument(t) for t in outputs])


class EagerDispatcher:
    """Runs operators on concrete tensors, remembering the prepared call of each call signature (a memo in front of
    the kernel cache `kernels`)."""

    def __init__(self, kernels: KernelCache) -> None:
        self._kernels = kernels
        self._calls: ChoiceMemo[tuple, EagerCall] = ChoiceMemo()

    def run(self, key: tuple, inputs: Sequence[Tensor], make_task: Callable[[], Task]) -> list[Tensor] | None:
        """The outputs of the operator `key` names (its name and attributes) on concrete `inputs`; None when an
        output has a symbolic size (e.g. a constant broadcast to ('batch', 3)): such an operator is recorded for
        a graph instead."""
        device = inputs[0].device
        call_key = (key, device, *[(t.shape, t.dtype) for t in inputs])
        call = self._calls.get(call_key, lambda: self._prepare(make_task(), device))
        if call.symbolic:
            return None
        outs = [Tensor(shape, dtype, device, empty(shape, dtype, device)) for shape, dtype in call.outputs]
        call.launch(inputs, outs)
        return outs

    def _prepare(self, task: Task, device: str) -> EagerCall:
        """The call of `task` on `device`: its kernel built (or found in the cache) unless it has nothing to
        compute."""
        target = Target.for_device(device)
        specs = output_specs(task)
        if any(isinstance(d, str) for shape, _ in specs for d in shape):
            return EagerCall(None, None, specs, symbolic=True)
        if all(0 in shape for shape, _ in specs):  # nothing to compute: no kernel is built or launched
            return EagerCall(None, None, specs)
        kernel = self._kernels.get(task, target)
        return EagerCall(kernel, kernel.direct_function(), specs)


EAGER = EagerDispatcher(KERNELS)

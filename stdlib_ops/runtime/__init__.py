"""Running tasks: the compiled-kernel cache and eager dispatch (see `kernels` and `dispatch`)."""

from __future__ import annotations

from stdlib_ops.runtime.dispatch import EAGER, EagerDispatcher
from stdlib_ops.runtime.kernels import KERNELS, KernelCache

__all__ = ["EAGER", "KERNELS", "EagerDispatcher", "KernelCache"]

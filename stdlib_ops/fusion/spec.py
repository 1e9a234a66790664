"""What to inject into a scheduled kernel: prologues on its inputs and epilogues on its outputs.

A description speaks only of kernel parameters (`Var`s of tensor type, made by whoever describes the fusion) and
of functions from index expressions to IR: it needs no knowledge of the kernel it will be injected into. Size
parameters (symbolic dimensions) are the `i32` variables that appear in the new tensors' shapes; they are matched
to the kernel's own size parameters by name, so a description may make its own `Var('n', i32)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hidet_lang.ir.expr import Expr, Var
from hidet_lang.ir.types import TensorType

Indices = tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Store:
    """One element store an epilogue makes: `tensor[indices] = value` (`tensor` one of the epilogue's outputs)."""

    tensor: Var
    indices: Sequence[Expr]
    value: Expr


@dataclass(frozen=True, slots=True)
class Prologue:
    """Replaces every element read of one anchor input.

    `inputs` are the new tensor parameters the prologue reads (any shapes); `value(indices)` is the IR value of the
    anchor input at `indices` (the kernel's index expressions, one per dimension), reading only `inputs`, size
    parameters and the indices. The value is converted to the anchor input's data type when it has another.
    """

    inputs: tuple[Var, ...]
    value: Callable[[Indices], Expr]

    def __post_init__(self) -> None:
        _require_tensors(self.inputs, "a prologue's inputs")


@dataclass(frozen=True, slots=True)
class Epilogue:
    """Replaces every element store to one anchor output.

    `outputs` are the new output tensor parameters, `inputs` the extra tensors the epilogue reads (a bias, say);
    `stores(indices, value)` lists the stores to make for a store of `value` (already converted to the anchor
    output's data type) at `indices` of the anchor output; each store writes one of `outputs`.
    """

    outputs: tuple[Var, ...]
    stores: Callable[[Indices, Expr], Sequence[Store]]
    inputs: tuple[Var, ...] = ()

    def __post_init__(self) -> None:
        _require_tensors(self.outputs, "an epilogue's outputs")
        _require_tensors(self.inputs, "an epilogue's inputs")


def _require_tensors(params: tuple[Var, ...], what: str) -> None:
    for p in params:
        if not (isinstance(p, Var) and isinstance(p.type, TensorType)):
            raise TypeError(f"{what} must be tensor variables (Var of a TensorType), got {p!r}")

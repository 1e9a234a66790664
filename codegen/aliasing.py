"""The no-alias contract of `attrs.no_alias`: which tensor parameters a function writes, and the call's check.

A no-alias function's tensor parameters are C `restrict` pointers (`__restrict__` in CUDA), which promises the
compiler that memory written through one of them is reached through no other. The promise is the caller's, so
every call from Python checks it before any code runs: a written tensor argument whose bytes overlap those of
another tensor argument raises ValueError naming both (passing one array twice, even to two read-only
parameters, is allowed: `restrict` says nothing about memory that is only read).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hidet_lang.ir import expr as E
from hidet_lang.ir.func import Function
from hidet_lang.ir.functor import collect
from hidet_lang.ir.types import PointerType, TensorType


def written_array_params(func: Function) -> frozenset[E.Var]:
    """The tensor and pointer parameters of `func` that it may write: every one used otherwise than as the base of
    an element read (a store, an address taken, an argument of a call or an intrinsic, a pointer made into a
    tensor)."""
    occurrences: dict[E.Var, int] = {}
    for v in collect(func.body, E.Var):
        occurrences[v] = occurrences.get(v, 0) + 1
    reads: dict[E.Var, int] = {}
    for element in collect(func.body, E.TensorElement):
        if isinstance(element.base, E.Var):
            reads[element.base] = reads.get(element.base, 0) + 1
    for address in collect(func.body, E.Address):
        if isinstance(address.expr, E.TensorElement) and isinstance(address.expr.base, E.Var):
            reads[address.expr.base] -= 1
    return frozenset(p for p in func.params if isinstance(p.type, (TensorType, PointerType))
                     and occurrences.get(p, 0) != reads.get(p, 0))


def host_or_device_address(argument: int | np.ndarray) -> int:
    """The address of a checked tensor argument of a GPU call: a device pointer as it is, a numpy array's data (a
    host address: with the CUDA driver's unified addressing, host and device ranges never overlap)."""
    return argument if isinstance(argument, int) else argument.ctypes.data


def check_no_overlap(func: str, names: Sequence[str], written: Sequence[bool],
                     spans: Sequence[tuple[int, int]]) -> None:
    """Raise ValueError when the byte range `spans[i]` (start, size) of a written tensor argument overlaps that of
    another tensor argument (`names[i]` its parameter's name)."""
    for i, (start, size) in enumerate(spans):
        if not written[i] or size == 0:
            continue
        for j, (other, other_size) in enumerate(spans):
            if j != i and other_size and start < other + other_size and other < start + size:
                raise ValueError(
                    f"{func}(): arguments '{names[i]}' and '{names[j]}' share memory, and '{func}' writes "
                    f"'{names[i]}' and declares attrs.no_alias (its tensors must not overlap); pass separate "
                    f"arrays (e.g. a copy), or drop attrs.no_alias to allow in-place calls")

"""Which tensor parameters a function writes (`written_array_params`: a read-only array may be passed for the
others), and the call's check of the no-alias contract of `attrs.no_alias`.

A no-alias function's tensor parameters are C `restrict` pointers (`__restrict__` in CUDA), which promises the
compiler that memory written through one of them is reached through no other. The promise is the caller's, so
every call from Python checks it before any code runs: a written tensor argument whose bytes overlap those of
another tensor argument raises ValueError naming both (passing one array twice, even to two read-only
parameters, is allowed: `restrict` says nothing about memory that is only read).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from hidet_lang.ir import expr as E
from hidet_lang.ir.func import Function
from hidet_lang.ir.functor import collect
from hidet_lang.ir.stmt import AsmStmt
from hidet_lang.ir.types import PointerType, TensorType


def written_array_params(func: Function, functions: Mapping[str, Function] | None = None) -> frozenset[E.Var]:
    """The tensor and pointer parameters of `func` that it may write: every one used otherwise than as the base of
    an element read, or as a whole argument of a call of one of `functions` (by name: the module's) for a parameter
    that the called function never writes, found the same way. A store, an address taken, an output of inline PTX,
    an argument of any other call or of an intrinsic, a pointer made into a tensor or held by another variable:
    each may write. The others it only reads."""
    return _written(func, functions or {}, frozenset(), {})


def _written(func: Function, functions: Mapping[str, Function], calling: frozenset[str],
             found: dict[str, frozenset[E.Var]]) -> frozenset[E.Var]:
    """`written_array_params` of `func` called from the functions `calling` (a call back into one of them counts
    as writing its arguments), with the results `found` so far."""
    if func.name not in found:
        occurrences = Counter(collect(func.body, E.Var))
        reads = Counter(e.base for e in collect(func.body, E.TensorElement) if isinstance(e.base, E.Var))
        reads.subtract(_elements_not_read(func))
        reads.update(_arguments_only_read(func, functions, calling | {func.name}, found))
        found[func.name] = frozenset(p for p in func.params if isinstance(p.type, (TensorType, PointerType))
                                     and occurrences[p] != reads[p])
    return found[func.name]


def _elements_not_read(func: Function) -> list[E.Var]:
    """The variables of the elements of `func` that are not element reads: those whose address is taken and the
    outputs of inline PTX."""
    places = [a.expr for a in collect(func.body, E.Address)]
    places += [out for asm in collect(func.body, AsmStmt) for out in asm.outputs]
    return [e.base for e in places if isinstance(e, E.TensorElement) and isinstance(e.base, E.Var)]


def _arguments_only_read(func: Function, functions: Mapping[str, Function], calling: frozenset[str],
                         found: dict[str, frozenset[E.Var]]) -> list[E.Var]:
    """The variables that `func` passes whole to a parameter the called function never writes (a function of
    `functions` outside `calling`), once for each such argument."""
    only_read = []
    for call in collect(func.body, E.Call):
        callee = functions.get(call.func_name)
        if callee is None or callee.name in calling or len(callee.params) != len(call.args):
            continue
        written = _written(callee, functions, calling, found)
        only_read += [arg for arg, param in zip(call.args, callee.params)
                      if isinstance(arg, E.Var) and param not in written]
    return only_read


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

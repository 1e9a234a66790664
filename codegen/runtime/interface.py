"""What calling a compiled module takes, apart from its library: `ModuleInterface`.

A `CompiledModule` calls its host-callable functions through callers generated from their signatures; which
tensor parameters a function may write (`aliasing.written_array_params`) and whether its host code can fail an
assertion or print are found in its lowered bodies. The interface keeps just that, so that a module built before
(`codegen.module_records`) is called again without its lowered IR (an interface pickles).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from codegen.runtime.aliasing import written_array_params
from hidet_lang.ir.expr import Intrinsic, Var
from hidet_lang.ir.func import DEVICE_KINDS, HOST_CALLABLE_KINDS, Function, IRModule
from hidet_lang.ir.functor import collect
from hidet_lang.ir.stmt import AssertStmt, SeqStmt


@dataclass(frozen=True)
class ModuleInterface:
    """The host-callable functions of a lowered module (`signatures`: each with an empty body), their C names, the
    tensor parameters each may write, and whether the module's host code has assertions or prints."""

    signatures: tuple[Function, ...]
    c_names: Mapping[str, str]
    written: Mapping[str, frozenset[Var]]
    has_assert: bool
    has_printf: bool

    @staticmethod
    def of(lowered: IRModule, c_names: Mapping[str, str]) -> ModuleInterface:
        """The interface of the lowered module `lowered`, whose functions the generated code names `c_names`."""
        by_name = {f.name: f for f in lowered.functions}
        callable_functions = [f for f in lowered.functions if f.attrs.kind in HOST_CALLABLE_KINDS]
        return ModuleInterface(
            signatures=tuple(dataclasses.replace(f, body=SeqStmt(())) for f in callable_functions),
            c_names={f.name: c_names[f.name] for f in callable_functions},
            written={f.name: written_array_params(f, by_name) for f in callable_functions},
            has_assert=any(collect(f.body, AssertStmt) for f in lowered.functions if f.attrs.kind not in DEVICE_KINDS),
            has_printf=any(i.name == "printf" for i in collect(lowered, Intrinsic)),
        )

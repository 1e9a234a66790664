"""`build_module`: IR module -> lowered IR -> source -> shared library -> `CompiledModule`."""

from __future__ import annotations

import dataclasses

from codegen import cpu_features
from codegen.c_emitter import CEmitter
from codegen.cache import build_and_load
from codegen.compiler import DEFAULT_C_FLAGS
from codegen.errors import CCompilationError, CompilerNotFoundError
from codegen.module import CompiledModule, bounds_checks
from hidet_lang.ir.func import IRModule
from hidet_lang.passes.pipeline import lower
from hidet_lang.passes.target import Target, TargetKind, implied_target_kind
from hidet_lang.passes.vector_rules import uses_vector_types
from hidet_lang.version import __version__


def build_module(module: IRModule, target: str | None = None, *, check: bool = False) -> CompiledModule:
    """Compile `module` for `target` ('cpu', 'cuda' or 'cuda:sm_XY'; inferred from the function kinds when None).

    `check` also verifies the IR after every lowering step and builds the checking mode: bounds-checked
    accesses on the CPU (an IndexError after the call), the emulator's checks for CUDA modules. A CPU build of a
    module with vector types asks the machine's C compiler which instruction-set extensions it enables
    (`codegen.cpu_features`), for the lowering to refuse a vector type that needs a missing one; where the compiler
    cannot be asked, nothing is refused (a library in the cache needs no compiler, and a compilation reports it)."""
    resolved = Target.parse(target, module, emulated=_runs_on_emulator(target, module))
    if resolved.kind == TargetKind.CPU and uses_vector_types(module):
        try:
            features = cpu_features.machine_cpu_features()
        except (CCompilationError, CompilerNotFoundError):
            features = None
        resolved = dataclasses.replace(resolved, cpu_features=features)
    lowered = lower(module, resolved, verify_ir=check)
    if resolved.kind == TargetKind.CUDA:
        from codegen.cuda_build import build_cuda_module

        return build_cuda_module(lowered, resolved.arch, check=check)
    emitter = CEmitter(check=check)
    source = emitter.emit_module(lowered)
    lib = build_and_load(source, language="c", flags=DEFAULT_C_FLAGS, version=__version__)
    return CompiledModule(lowered, lib, str(resolved), emitter.function_names, sources={"c": source},
                          after_call=[bounds_checks(lib)] if check else [])


def _runs_on_emulator(target: str | None, module: IRModule) -> bool:
    """Whether a CUDA build of `module` would run on the CUDA emulator (asked only for CUDA targets)."""
    if not (target or implied_target_kind(module)).startswith(TargetKind.CUDA):
        return False
    from codegen.cuda_backend import backend

    return backend() == "emulator"

"""`build_module`: IR module -> lowered IR -> source -> shared library -> `CompiledModule`."""

from __future__ import annotations

import dataclasses

from codegen import cpu_features, vector_math
from codegen.c_emitter import CEmitter
from codegen.cache import build_and_load
from codegen.compiler import DEFAULT_C_FLAGS, find_c_compiler
from codegen.errors import CCompilationError, CompilerNotFoundError
from codegen.module import CompiledModule, bounds_checks
from hidet_lang.ir.func import IRModule
from hidet_lang.passes.pipeline import lower
from hidet_lang.passes.target import Target, TargetKind, implied_target_kind
from hidet_lang.passes.vector_rules import uses_vector_types
from hidet_lang.version import __version__


def build_module(module: IRModule, target: str | None = None, *, check: bool = False,
                 fast_math: bool = False) -> CompiledModule:
    """Compile `module` for `target` ('cpu', 'cuda' or 'cuda:sm_XY'; inferred from the function kinds when None).

    `check` also verifies the IR after every lowering step and builds the checking mode: bounds-checked
    accesses on the CPU (an IndexError after the call), the emulator's checks for CUDA modules. `fast_math`
    builds every function as `attrs.fast_math = True` does, and CUDA kernels for a GPU with NVRTC's
    `--use_fast_math` (flush-to-zero and approximate division and square root too). A CPU build of a
    module with vector types asks the machine's C compiler which instruction-set extensions it enables
    (`codegen.cpu_features`), for the lowering to refuse a vector type that needs a missing one; where the compiler
    cannot be asked, nothing is refused (a library in the cache needs no compiler, and a compilation reports it)."""
    if fast_math:
        module = IRModule(tuple(dataclasses.replace(f, attrs=dataclasses.replace(f.attrs, fast_math=True))
                                for f in module.functions))
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

        return build_cuda_module(lowered, resolved.arch, check=check, fast_math=fast_math)
    emitter = CEmitter(check=check, vector_math=_vector_math(lowered))
    source = emitter.emit_module(lowered)
    flags = (*DEFAULT_C_FLAGS, *(vector_math.LINK_FLAGS if emitter.vector_math_used else ()))
    lib = build_and_load(source, language="c", flags=flags, version=__version__)
    return CompiledModule(lowered, lib, str(resolved), emitter.function_names, sources={"c": source},
                          after_call=[bounds_checks(lib)] if check else [])


def _vector_math(module: IRModule) -> frozenset[str]:
    """The math functions with vector versions, asked of the C compiler only for a module with fast-math functions
    (where it cannot be asked, none: the functions are then called one element at a time)."""
    if not any(f.attrs.fast_math for f in module.functions):
        return frozenset()
    try:
        return vector_math.vector_math_functions(find_c_compiler("c"))
    except CompilerNotFoundError:
        return frozenset()


def _runs_on_emulator(target: str | None, module: IRModule) -> bool:
    """Whether a CUDA build of `module` would run on the CUDA emulator (asked only for CUDA targets)."""
    if not (target or implied_target_kind(module)).startswith(TargetKind.CUDA):
        return False
    from codegen.cuda_backend import backend

    return backend() == "emulator"

"""`build_module`: IR module -> lowered IR -> source -> shared library -> `CompiledModule`."""

from __future__ import annotations

import dataclasses

from codegen.backends import backend_for
from codegen.module_records import find_record, module_record_key, remember
from codegen.runtime.module import CompiledModule
from codegen.toolchain.code_identity import project_code_identity
from codegen.toolchain.openmp import load_gcc_runtime
from hidet_lang.ir.func import IRModule
from hidet_lang.passes.pipeline import lower, lowering_is_observed
from hidet_lang.target import Target, TargetKind


def build_module(module: IRModule, target: Target | str | None = None, *, check: bool = False,
                 fast_math: bool = False) -> CompiledModule:
    """Compile `module` for `target` (a `Target`, or 'cpu', 'cuda' or 'cuda:<arch>' such as 'cuda:sm_90a';
    inferred from the function kinds when None) through the target's backend (`codegen.backends`).

    `check` also verifies the IR after every lowering step and builds the checking mode: bounds-checked
    accesses on the CPU (an IndexError after the call), the emulator's checks for CUDA modules. `fast_math`
    builds every function as `attrs.fast_math = True` does, and CUDA kernels for a GPU with NVRTC's
    `--use_fast_math` (flush-to-zero and approximate division and square root too). A CPU build of a
    module with vector types asks the machine's C compiler which instruction-set extensions it enables
    (`toolchain.cpu_features`), for the lowering to refuse a vector type that needs a missing one; where the compiler
    cannot be asked, nothing is refused (a library in the cache needs no compiler, and a compilation reports it).
    A CUDA build for any architecture runs on the emulator where there is no GPU.

    A module built before (in this process or another) whose backend records its builds (the CPU's) is loaded from
    its record (`codegen.module_records`) without being lowered, emitted or compiled, unless the environment asks
    to verify or dump every lowering (`HIDET_LANG_VERIFY_IR`, `HIDET_LANG_DUMP_IR`)."""
    if fast_math:
        module = IRModule(tuple(dataclasses.replace(f, attrs=dataclasses.replace(f.attrs, fast_math=True))
                                for f in module.functions))
    parsed = Target.parse(target, module)
    backend = backend_for(parsed)
    machine = None if lowering_is_observed() else backend.machine(parsed)
    key = None if machine is None else module_record_key(module, parsed, (f"{check=}", f"{fast_math=}"), machine)
    record = None if key is None else find_record(key)
    if record is not None:
        loaded = backend.load(record, module, parsed, check=check)
        if loaded is not None:
            return loaded
    resolved = backend.resolve(parsed, module)
    lowered = lower(module, resolved, verify_ir=check)
    built = backend.build(lowered, resolved, check=check, fast_math=fast_math)
    if key is not None:
        remember(key, backend.record(built))
    return built


def prepare_builds() -> None:
    """Read, once a process, what builds are keyed by before the first build asks: in a source checkout, the
    fingerprint of the project's code (`toolchain.code_identity`: the sizes and times of its files), and the machine
    a CPU module is built for (its C compiler and CPU: `CpuBackend.machine`); and load GCC's OpenMP runtime, which
    the CPU's parallel loops link (`toolchain.openmp.load_gcc_runtime`). The first `script_module()` of a process
    calls it as it loads the code generator; a build without one does this as it needs it."""
    project_code_identity()
    cpu = Target(TargetKind.CPU)
    backend_for(cpu).machine(cpu)
    load_gcc_runtime()

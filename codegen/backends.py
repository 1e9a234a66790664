"""One backend per kind of target: how a module is prepared for it and built into a `CompiledModule`.

`build_module` parses the target, asks `backend_for(target)` to complete it with what only the machine knows (the
CPU's instruction-set extensions for a module with vector types; whether CUDA code runs on a GPU or the emulator),
lowers the module for it, and hands the lowered module to the backend's `build`. A new kind of target is a new
`Backend` registered in `BACKENDS`; the lowering and the callers stay as they are.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod

from codegen.emit.c_emitter import CEmitter
from codegen.runtime.cuda_backend import backend
from codegen.runtime.module import CompiledModule, bounds_checks
from codegen.toolchain import cpu_features, vector_math
from codegen.toolchain.cache import build_and_load
from codegen.toolchain.compiler import DEFAULT_C_FLAGS, find_c_compiler
from codegen.toolchain.errors import CCompilationError, CompilerNotFoundError
from codegen.toolchain.nvrtc import default_arch
from hidet_lang.ir.func import IRModule
from hidet_lang.passes.vector_rules import uses_vector_types
from hidet_lang.target import Target, TargetKind
from hidet_lang.version import __version__


class Backend(ABC):
    """What building for one kind of target takes."""

    @abstractmethod
    def resolve(self, target: Target, module: IRModule) -> Target:
        """`target` completed with what the machine says for building `module`."""

    @abstractmethod
    def build(self, lowered: IRModule, target: Target, *, check: bool, fast_math: bool) -> CompiledModule:
        """The compiled module of `lowered` (the module lowered for `target`); `check` builds the checking mode,
        `fast_math` the approximate math of `build_module(fast_math=True)`."""


class CpuBackend(Backend):
    """C compiled by the system C compiler, loaded with ctypes."""

    def resolve(self, target: Target, module: IRModule) -> Target:
        """A module with vector types learns the instruction-set extensions the C compiler enables (None where the
        compiler cannot be asked: nothing is refused then, and a compilation reports the problem)."""
        if not uses_vector_types(module):
            return target
        try:
            features = cpu_features.machine_cpu_features()
        except (CCompilationError, CompilerNotFoundError):
            features = None
        return dataclasses.replace(target, cpu_features=features)

    def build(self, lowered: IRModule, target: Target, *, check: bool, fast_math: bool) -> CompiledModule:
        emitter = CEmitter(check=check, vector_math=_vector_math(lowered))
        source = emitter.emit_module(lowered)
        flags = (*DEFAULT_C_FLAGS, *(vector_math.LINK_FLAGS if emitter.vector_math_used else ()))
        lib = build_and_load(source, language="c", flags=flags, version=__version__)
        return CompiledModule(lowered, lib, str(target), emitter.function_names, sources={"c": source},
                              after_call=[bounds_checks(lib)] if check else [])


class CudaBackend(Backend):
    """CUDA C compiled by NVRTC and launched on a GPU, or compiled by the C++ compiler for the CUDA emulator."""

    def resolve(self, target: Target, module: IRModule) -> Target:
        """The target marked `emulated` where CUDA modules run on the emulator (`runtime.cuda_backend`), with the
        GPU's architecture (else `nvrtc.FALLBACK_ARCH`) where it names none, so that the lowering checks the
        intrinsics against the architecture the module is built for."""
        return dataclasses.replace(target, arch=target.arch or default_arch(), emulated=backend() == "emulator")

    def build(self, lowered: IRModule, target: Target, *, check: bool, fast_math: bool) -> CompiledModule:
        from codegen.cuda_build import build_cuda_module  # the CUDA code generator loads with the first CUDA build

        return build_cuda_module(lowered, target.arch, check=check, fast_math=fast_math)


BACKENDS: dict[TargetKind, Backend] = {TargetKind.CPU: CpuBackend(), TargetKind.CUDA: CudaBackend()}


def backend_for(target: Target) -> Backend:
    """The backend that builds for `target`."""
    return BACKENDS[target.kind]


def _vector_math(module: IRModule) -> frozenset[str]:
    """The math functions with vector versions, asked of the C compiler only for a module with fast-math functions
    (where it cannot be asked, none: the functions are then called one element at a time)."""
    if not any(f.attrs.fast_math for f in module.functions):
        return frozenset()
    try:
        return vector_math.vector_math_functions(find_c_compiler("c"))
    except CompilerNotFoundError:
        return frozenset()

"""One backend per kind of target: how a module is prepared for it and built into a `CompiledModule`.

`build_module` parses the target, asks `backend_for(target)` to complete it with what only the machine knows (the
CPU's instruction-set extensions for a module with vector types; whether CUDA code runs on a GPU or the emulator:
`resolve_target`), lowers the module for it, and hands the lowered module, with the completed target, to the
backend's `build`; the compiled module keeps that target. A new kind of target is a new `Backend` registered in
`BACKENDS`; the lowering and the callers stay as they are.
"""

from __future__ import annotations

import dataclasses
import marshal
import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from codegen.emit.c_emitter import CEmitter
from codegen.runtime.cuda_backend import uses_gpu
from codegen.runtime.interface import ModuleInterface
from codegen.runtime.module import CompiledModule, bounds_checks
from codegen.toolchain import cpu_features, vector_math
from codegen.toolchain.cache import build_and_load, load_library, recorded_library
from codegen.toolchain.cache_keys import host_cpu
from codegen.toolchain.compiler import DEFAULT_C_FLAGS, find_c_compiler
from codegen.toolchain.errors import CCompilationError, CompilerNotFoundError
from codegen.toolchain.nvrtc import default_arch
from codegen.toolchain.source_files import SourceFiles
from hidet_lang.ir.func import IRModule
from hidet_lang.passes.pipeline import lower
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

    def machine(self, target: Target) -> str | None:
        """What besides a module's IR decides what this backend builds for `target` on this machine (part of the
        key of the module's record: `codegen.module_records`); None where modules are not recorded."""
        return None

    def record(self, built: CompiledModule) -> dict[str, Any]:
        """What `load` needs to give `built` again in another process (plain data and IR, which the record pickles)."""
        raise NotImplementedError(f"{type(self).__name__} records no module")

    def load(self, record: dict[str, Any], module: IRModule, target: Target, *, check: bool) -> CompiledModule | None:
        """The module `record` describes (`module` built for `target`, in checking mode when `check`), or None where
        what it names is gone from the cache or does not load (the module is then built again)."""
        return None


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
        emitter = CEmitter(check=check, vector_math=_vector_math(lowered), own_math=True)
        source, files = emitter.emit_module(lowered), emitter.files  # the source names the files by tokens
        flags = (*DEFAULT_C_FLAGS, *(vector_math.LINK_FLAGS if emitter.vector_math_used else ()))
        with files.in_effect():  # a compiler's diagnostics name the user's files
            lib = build_and_load(source, language="c", flags=flags, version=__version__)
        interface = ModuleInterface.of(lowered, emitter.function_names)
        return CompiledModule(interface, lib, target, lowered=lambda: lowered, sources={"c": source}, files=files,
                              after_call=[bounds_checks(lib, files)] if check else [])

    def machine(self, target: Target) -> str | None:
        """The C compiler (its identity: the executable's path, size and time), the CPU (the libraries are built
        for `-march=native`, and a module with vector types is checked against the CPU's extensions) and the
        Python implementation (a record holds pickled and marshalled code); None without a C compiler."""
        try:
            return f"{find_c_compiler('c').identity}\x1f{host_cpu()}\x1f{sys.implementation.cache_tag}"
        except CompilerNotFoundError:
            return None

    def record(self, built: CompiledModule) -> dict[str, Any]:
        """The key of the library's cache entry, the module's interface, its callers' code (marshalled), the
        paths of the files its source names by tokens (`codegen.toolchain.source_files`) and the target as `resolve`
        completed it (the record's key holds the module, the target and the machine that decide it)."""
        return {"library": Path(built.library_path).parent.name, "interface": built.interface,
                "callers": {source: marshal.dumps(code) for source, code in built.callers.items()},
                "files": built.files.paths, "target": built.target}

    def load(self, record: dict[str, Any], module: IRModule, target: Target, *, check: bool) -> CompiledModule | None:
        """The recorded library, loaded, for `target` completed as the build completed it (the record's); its `ir`
        lowers `module` again on first use."""
        try:
            found = recorded_library(record["library"])
            if found is None:
                return None
            path, source = found
            lib = load_library(path)
            callers = {text: marshal.loads(code) for text, code in record["callers"].items()}
            interface = record["interface"]
            files = SourceFiles(record["files"])
            resolved = record["target"]
        except (OSError, ValueError, KeyError, TypeError, EOFError):
            return None
        return CompiledModule(interface, lib, resolved, sources={"c": source}, callers=callers, files=files,
                              lowered=lambda: lower(module, resolved, verify_ir=check),
                              after_call=[bounds_checks(lib, files)] if check else [])


def resolve_target(target: Target) -> Target:
    """`target` completed with where its code runs in this process: a CUDA target with the GPU's architecture
    (else `nvrtc.FALLBACK_ARCH`) where it names none, and marked `emulated` where CUDA modules run on the emulator
    (`runtime.cuda_backend`); any other target as it is. What a compiled module or graph keeps as its target."""
    if not target.is_cuda:
        return target
    return dataclasses.replace(target, arch=target.arch or default_arch(), emulated=not uses_gpu())


def with_device_arch(target: Target) -> Target:
    """`target` with the GPU's architecture (`nvrtc.default_arch`: 'sm_90a' on an H200) where it is CUDA, names no
    architecture and CUDA modules run on a GPU, which is what a build for it compiles for; `target` itself
    otherwise. Choosing a kernel for the resolved target takes the templates the GPU runs fastest (an sm_90a one on
    a Hopper GPU); on the emulator a target without an architecture keeps none, so that its choices stay the
    portable ones."""
    if target.arch is not None:
        return target
    resolved = resolve_target(target)
    return target if resolved.emulated else resolved


class CudaBackend(Backend):
    """CUDA C compiled by NVRTC and launched on a GPU, or compiled by the C++ compiler for the CUDA emulator."""

    def resolve(self, target: Target, module: IRModule) -> Target:
        """`resolve_target(target)`: marked `emulated` where CUDA modules run on the emulator, with an architecture,
        so that the lowering checks the intrinsics against the architecture the module is built for."""
        return resolve_target(target)

    def build(self, lowered: IRModule, target: Target, *, check: bool, fast_math: bool) -> CompiledModule:
        from codegen.cuda_build import build_cuda_module  # the CUDA code generator loads with the first CUDA build

        return build_cuda_module(lowered, target, check=check, fast_math=fast_math)


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

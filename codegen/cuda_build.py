"""Building a CUDA module: CUDA C and host C from the IR, then a GPU (cubin + host library) or the emulator.

On a GPU, the kernels are compiled by NVRTC to a cubin for the chosen architecture and loaded with the driver;
the host functions and kernel launchers are C built by the system compiler, bound to the driver's launch entry
point. On the emulator, the same CUDA source, the host code and the project's emulation header form one C++
translation unit built by the system C++ compiler and linked with the emulator's runtime object (compiled once per
compiler and flags: `codegen.toolchain.emulator_runtime`); after each call, `codegen.runtime.emulator_memory` decides
which emulator libraries keep their workers. Either way the cubin is available as `module.cubin`.

All of a module's sources name the user's files by the tokens of one table (`codegen.toolchain.source_files`), which
the compiled module keeps: the launch errors, assertion failures and checks it reports name the files' paths.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import re

from codegen.emit.cuda_emitter import emit_cuda
from codegen.emit.kernel_plan import ModulePlan, plan_module
from codegen.emit.profile_sites import ProfileSites
from codegen.runtime import cuda_driver, emulator_memory, profiling, streams
from codegen.runtime.interface import ModuleInterface
from codegen.runtime.module import AfterCall, CompiledModule, bounds_checks
from codegen.toolchain.cache import build_and_load, build_cubin, build_library
from codegen.toolchain.compiler import DEFAULT_C_FLAGS, SEMANTICS_FLAGS, map_c_line_to_dsl
from codegen.toolchain.elf import STT_FUNC, read_symbols
from codegen.toolchain.headers import INCLUDE_DIR, cuda_limit_flags
from codegen.toolchain.nvrtc import normalize_arch
from codegen.toolchain.source_files import SourceFiles
from hidet_lang.ir.func import DEVICE_KINDS, IRModule
from hidet_lang.ir.functor import collect
from hidet_lang.ir.stmt import AssertStmt
from hidet_lang.target import Target
from hidet_lang.version import __version__

CHECK_ENV_VAR = "HIDET_LANG_EMU_CHECK"
VERIFY_ENV_VAR = "HIDET_LANG_VERIFY_CUBINS"  # e.g. "sm_80,sm_90": compile every CUDA module for these too
LAUNCH_STATUS_SYMBOL = "hidet_lang_launch_status"
HOST_FLAGS = (*DEFAULT_C_FLAGS, *cuda_limit_flags())
"""The flags of a CUDA module's host library for a GPU."""
EMULATOR_FLAGS = ("-O2", "-march=native", "-fopenmp", *SEMANTICS_FLAGS, "-std=c++17", "-DHIDET_LANG_EMULATOR",
                  *cuda_limit_flags(),
                  # a frame larger than a page touches the stack's guard (emulator_runtime.cpp), never skips it
                  "-fstack-clash-protection",
                  # `__shared__` arrays are thread-local; the descriptor dialect makes their accesses cheaper
                  *(("-mtls-dialect=gnu2",) if platform.machine() in ("x86_64", "AMD64") else ()))
"""The flags of a CUDA module's emulator library (its device and host sources, one C++ translation unit)."""

PROFILE_FLAGS = ("-DHL_EMU_PROFILE",)
"""What the emulator's profile build adds to `EMULATOR_FLAGS` (its runtime object is compiled with them too)."""

FAST_MATH_OPTIONS = ("--use_fast_math",)
"""NVRTC's options of a module built with `fast_math=True`: approximate math functions, division and square root,
fused multiply-adds, and single-precision denormals flushed to zero."""


def build_cuda_module(module: IRModule, target: Target, check: bool = False,
                      fast_math: bool = False) -> CompiledModule:
    """Compile a CUDA module lowered for `target` (completed by `backends.resolve_target`: it names the
    architecture, and `target.emulated` says whether the module runs on the emulator or a GPU); `check` (or
    `HIDET_LANG_EMU_CHECK=1`) builds the emulator's checking mode; `fast_math` compiles the kernels with
    `FAST_MATH_OPTIONS` for a GPU (the emulator computes as it would without)."""
    if not target.is_cuda or target.arch is None:
        raise ValueError(f"build_cuda_module: a CUDA target with an architecture is needed, got '{target}'")
    arch = target.arch
    plan = plan_module(module)
    files = SourceFiles()  # the user's files, numbered by the GPU's sources, then the emulator's
    device_source, host_source = emit_cuda(plan, files=files)
    options = FAST_MATH_OPTIONS if fast_math else ()

    def cubin() -> bytes:
        with files.in_effect():  # NVRTC's diagnostics name the user's files
            return build_cubin(device_source, arch=arch, include_dirs=[str(INCLUDE_DIR)], options=options,
                               version=__version__)

    sources = {"cuda": device_source, "host": host_source}
    interface = ModuleInterface.of(module, dict(plan.host_names))
    with files.in_effect():
        verify_cubins(plan, device_source, host_source, os.environ.get(VERIFY_ENV_VAR, ""))
    if not target.emulated:
        with files.in_effect():
            lib = build_and_load(host_source, language="c", flags=host_library_flags(device_source),
                                 version=__version__)
        cu_module = _bind_gpu(plan, lib, cubin())
        checks = [_launch_checks(lib, host_source, files), _gpu_assert_checks(module, cu_module)]
        return CompiledModule(interface, lib, target, lowered=lambda: module, sources=sources, cubin=cubin,
                              files=files, after_call=[c for c in checks if c is not None])
    check = check or os.environ.get(CHECK_ENV_VAR, "") not in ("", "0")
    lib, combined = build_emulator(plan, check, target, files)
    checks = [functools.partial(emulator_memory.launched, lib), _launch_checks(lib, combined, files),
              _emulator_assert_checks(module, lib), bounds_checks(lib, files) if check else None]

    def profile_build(compiled: CompiledModule) -> CompiledModule:
        """The profile build of the module `compiled`: its calls add their counts to the open profiles."""
        sites = ProfileSites()
        profiled_lib, profiled_source = build_emulator(plan, False, target, files, profile=sites)
        hooks = [functools.partial(emulator_memory.launched, profiled_lib),
                 profiling.counts_reader(profiled_lib, sites, arch, compiled),
                 _launch_checks(profiled_lib, profiled_source, files), _emulator_assert_checks(module, profiled_lib)]
        return CompiledModule(interface, profiled_lib, target, lowered=lambda: module, sources=sources, cubin=cubin,
                              files=files, after_call=[c for c in hooks if c is not None])

    return CompiledModule(interface, lib, target, lowered=lambda: module, sources=sources, cubin=cubin,
                          files=files, after_call=[c for c in checks if c is not None], profile_build=profile_build)


def host_library_flags(device_source: str) -> tuple[str, ...]:
    """The flags of the GPU host library that launches the kernels of `device_source`: the library is bound to the
    kernels it launches (`_bind_gpu`), so each device source has a library of its own. The check of
    `verify_cubins` builds the same library, which a later GPU build of the module then finds in the cache."""
    return (*HOST_FLAGS, f"-DHIDET_LANG_KERNELS={hashlib.sha256(device_source.encode()).hexdigest()[:16]}")


def build_emulator(plan: ModulePlan, check: bool, target: Target, files: SourceFiles | None = None,
                   profile: ProfileSites | None = None) -> tuple[ctypes.CDLL, str]:
    """The emulator's library for a planned CUDA module (in checking mode when `check`; its profile build,
    compiled with `PROFILE_FLAGS` too, with `profile`, which numbers its sites; launches limited to what the
    architecture of `target` allows), and its C++ source: the kernels, the host functions and one exported
    `launch_<kernel>` per kernel, the user's files named by the tokens of `files` (the module's table, numbered
    further; a new one when None)."""
    files = SourceFiles() if files is None else files
    emu_device, emu_host = emit_cuda(plan, emulator=True, check=check, smem_limit=target.shared_memory_per_block,
                                     files=files, profile=profile)
    combined = emu_device + "\n" + emu_host
    flags = EMULATOR_FLAGS if profile is None else (*EMULATOR_FLAGS, *PROFILE_FLAGS)
    with files.in_effect():
        lib = build_and_load(combined, language="c++", flags=flags, version=__version__, emulator_runtime=True)
    return lib, combined


def verify_cubins(plan: ModulePlan, device_source: str, host_source: str, archs: str) -> None:
    """Compile `device_source` with NVRTC for each architecture in the comma-separated `archs` and check that
    each cubin is an ELF image holding every kernel as a function symbol (RuntimeError otherwise); compile the
    GPU host code too, so that both halves of the GPU build are known to compile where no GPU runs them."""
    if not archs.strip():
        return
    build_library(host_source, language="c", flags=host_library_flags(device_source), version=__version__)
    kernels = set(plan.kernel_symbols)
    for arch in filter(None, (a.strip() for a in archs.split(","))):
        cubin = build_cubin(device_source, arch=normalize_arch(arch), include_dirs=[str(INCLUDE_DIR)],
                            version=__version__)
        functions = {s.name for s in read_symbols(cubin) if s.type == STT_FUNC}
        missing = kernels - functions
        if missing:
            raise RuntimeError(f"the {arch} cubin lacks kernel symbol(s) {', '.join(sorted(missing))}")


def _bind_gpu(plan: ModulePlan, lib: ctypes.CDLL, cubin: bytes) -> object:
    """Load the cubin, hand the kernels, their static shared memory, the device's shared memory a block, the
    driver's entry points (launches, kernel attributes, tensor-map encoding) and the runtime's current stream to
    the host library (once a library: a later build of the same sources reuses the binding); the loaded CUDA
    module."""
    bound = getattr(lib, "_hidet_lang_bound", None)
    if bound is None:
        cu_module = cuda_driver.load_module(cubin)
        functions = [cuda_driver.get_function(cu_module, s) for s in plan.kernel_symbols]
        handles = (ctypes.c_void_p * max(len(functions), 1))(*functions)
        static_smem = (ctypes.c_longlong * max(len(functions), 1))(*map(cuda_driver.static_shared_bytes, functions))
        launch, set_attribute, encode_tensor_map = cuda_driver.launch_entry_points()
        lib.hidet_lang_bind_gpu.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_longlong]
        lib.hidet_lang_bind_gpu.restype = None
        lib.hidet_lang_bind_gpu(launch, set_attribute, ctypes.cast(handles, ctypes.c_void_p),
                                ctypes.cast(static_smem, ctypes.c_void_p), cuda_driver.shared_memory_per_block())
        lib.hidet_lang_bind_tensor_maps.argtypes = [ctypes.c_void_p]
        lib.hidet_lang_bind_tensor_maps.restype = None
        lib.hidet_lang_bind_tensor_maps(encode_tensor_map)
        lib.hidet_lang_bind_stream.argtypes = [ctypes.c_void_p]
        lib.hidet_lang_bind_stream(streams.current_stream_entry_point())  # launches go to the current stream
        bound = lib._hidet_lang_bound = (cu_module, handles)  # the kernels live as long as the library
    return bound[0]


def _launch_checks(lib: ctypes.CDLL, source: str, files: SourceFiles) -> AfterCall:
    """Raise the first launch failure of a call (a bad configuration, a driver or emulator error), naming the DSL
    lines in the user's files of `files`."""
    status = getattr(lib, LAUNCH_STATUS_SYMBOL)
    status.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int)]
    status.restype = ctypes.c_int

    def after() -> None:
        message, code = ctypes.c_char_p(), ctypes.c_int()
        if status(ctypes.byref(message), ctypes.byref(code)):
            text = (message.value or b"kernel launch failed").decode()
            if code.value > 0:
                text += f" [{cuda_driver.error_name(code.value)}]"
            raise RuntimeError(_with_dsl_lines(text, source, files))

    return after


def _with_dsl_lines(text: str, source: str, files: SourceFiles) -> str:
    """Replace each `generated line N` in an emulator message by the DSL location it came from, and each file's
    token by its path."""
    def replace(match: re.Match[str]) -> str:
        location = map_c_line_to_dsl(source, int(match.group(1)), files)
        return f"{location[0]}:{location[1]}" if location else match.group(0)

    return re.sub(r"generated line (\d+)", replace, files.resolve(text))


def _device_asserts(module: IRModule) -> dict[int, AssertStmt]:
    """The assertions of a module's CUDA functions, by DSL line (what the device records when one fails)."""
    asserts = [s for f in module.functions if f.attrs.kind in DEVICE_KINDS for s in collect(f.body, AssertStmt)]
    return {s.span.line: s for s in asserts if s.span is not None}


def _assertion_error(line: int, by_line: dict[int, AssertStmt]) -> AssertionError:
    stmt = by_line.get(line)
    where = f"{stmt.span.file}:{line}: " if stmt is not None and stmt.span is not None else f"line {line}: "
    return AssertionError(where + (stmt.message if stmt is not None else "device assertion failed"))


def _emulator_assert_checks(module: IRModule, lib: ctypes.CDLL) -> AfterCall | None:
    """Raise AssertionError for a device assertion that failed on the emulator."""
    by_line = _device_asserts(module)
    if not by_line:
        return None
    take = lib.hl_emu_take_assert_line
    take.restype = ctypes.c_int

    def after() -> None:
        line = take()
        if line:
            raise _assertion_error(line, by_line)

    return after


def _gpu_assert_checks(module: IRModule, cu_module: object) -> AfterCall | None:
    """Raise AssertionError for a device assertion that failed on the GPU (read from `hl_assert_line`)."""
    by_line = _device_asserts(module)
    if not by_line:
        return None
    import numpy as np

    address, _ = cuda_driver.get_global(cu_module, "hl_assert_line")
    cell = np.zeros(1, np.int32)

    def after() -> None:
        cuda_driver.copy_to_host(cell, address)
        if cell[0]:
            line = int(cell[0])
            cell[0] = 0
            cuda_driver.copy_to_device(address, cell)
            raise _assertion_error(line, by_line)

    return after

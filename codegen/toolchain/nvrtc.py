"""In-process CUDA C -> cubin compilation with NVRTC (`cuda.bindings.nvrtc`); no `nvcc` anywhere.

Nothing from CUDA is imported when this module is: `cuda.bindings.nvrtc`, `cuda.bindings.driver` and
`cuda.pathfinder` are imported inside the functions that need them, so importing `hidet_lang` never requires the
CUDA packages. When they are missing, `CudaToolkitMissingError` names the command that installs them.

Headers: `cuda_fp16.h` / `cuda_bf16.h` (and the rest of the CUDA runtime headers) come from the
`nvidia-cuda-runtime` wheel, located with `cuda.pathfinder.find_nvidia_header_directory("cudart")`; callers add
their own header directories with `include_dirs`.

NVRTC's diagnostics (`<name>(<line>): error: ...`) in the generated source are mapped back to DSL lines through
the `// <file.py>:<line>` markers the code generator writes, with `codegen.toolchain.compiler.format_diagnostics`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from hidet_lang.cuda_limits import arch_number, normalize_arch

from .compiler import Diagnostic, format_diagnostics
from .errors import CUDA_INSTALL_COMMAND, CudaToolkitMissingError, NVRTCCompilationError

__all__ = [
    "BASE_OPTIONS",
    "FALLBACK_ARCH",
    "CudaToolkitMissingError",
    "NVRTCCompilationError",
    "compile_cubin",
    "compile_options",
    "compile_ptx",
    "cuda_include_dir",
    "default_arch",
    "device_arch",
    "normalize_arch",
    "nvrtc_version",
    "supported_archs",
    "toolkit_identity",
]

BASE_OPTIONS: tuple[str, ...] = ("-std=c++17",)
"""Options of every compilation, after `--gpu-architecture`. No fast math: kernels keep IEEE semantics."""

FALLBACK_ARCH = "sm_80"
"""The architecture `default_arch` returns when there is no GPU (or no driver)."""


# ----------------------------------------------------------------------------------------------------
# Architectures


_supported: list[str] | None = None


def supported_archs() -> list[str]:
    """Return the real architectures this NVRTC can compile for, e.g. `["sm_75", "sm_80", ..., "sm_120"]`."""
    global _supported
    if _supported is None:
        nvrtc = _nvrtc()
        numbers = _check(nvrtc, nvrtc.nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs")
        _supported = [f"sm_{number}" for number in numbers]
    return list(_supported)


def _require_supported(arch: str) -> None:
    """Raise ValueError when this NVRTC cannot compile for the normalized architecture `arch`."""
    supported = supported_archs()
    if f"sm_{arch_number(arch)}" not in supported:
        major, minor = nvrtc_version()
        raise ValueError(
            f"CUDA architecture {arch!r} is not supported by NVRTC {major}.{minor}; supported: {', '.join(supported)}"
        )


_default: str | None = None


def default_arch() -> str:
    """Return the architecture of GPU 0 (`device_arch`: "sm_90a" on an H100 or H200) when a CUDA driver and a
    device are present, else `FALLBACK_ARCH` ("sm_80"). Memoized; never raises."""
    global _default
    if _default is None:
        _default = _gpu_arch() or FALLBACK_ARCH
    return _default


def _gpu_arch() -> str | None:
    """The compute capability of device 0 through the driver API, or None on any failure (no driver, no GPU)."""
    try:
        import importlib

        driver = importlib.import_module("cuda.bindings.driver")
        success = driver.CUresult.CUDA_SUCCESS
        (result,) = driver.cuInit(0)
        if result != success:
            return None
        result, device = driver.cuDeviceGet(0)
        if result != success:
            return None
        capability = []
        for attribute in ("MAJOR", "MINOR"):
            which = getattr(driver.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_{attribute}")
            result, value = driver.cuDeviceGetAttribute(which, device)
            if result != success:
                return None
            capability.append(int(value))
    except Exception:  # any failure of the driver stack means "no GPU"
        return None
    return device_arch(*capability)


def device_arch(major: int, minor: int) -> str:
    """The architecture a build for a device of compute capability `major.minor` targets: the one with its
    architecture-specific features (`sm_90a` for 9.0: Hopper's wgmma and TMA; the `a` variants from 9.0 on), which
    runs on that device, and the plain one before 9.0, which has no such variant."""
    return f"sm_{major}{minor}{'a' if major >= 9 else ''}"


# ----------------------------------------------------------------------------------------------------
# The toolkit: NVRTC, its version, the runtime headers


def _import(module_name: str, package: str) -> Any:
    """Import `module_name`, turning an ImportError into `CudaToolkitMissingError` naming `package`."""
    import importlib

    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise CudaToolkitMissingError(
            f"compiling CUDA C needs {module_name} (package {package}), which could not be imported ({exc}); "
            f"install the CUDA packages with `{CUDA_INSTALL_COMMAND}`"
        ) from exc


_version: tuple[int, int] | None = None


def _nvrtc() -> Any:
    """Return the `cuda.bindings.nvrtc` module, after checking (once) that the NVRTC library loads."""
    global _version
    nvrtc = _import("cuda.bindings.nvrtc", "cuda-python")
    if _version is None:
        try:
            returned = nvrtc.nvrtcVersion()
        except Exception as exc:  # the bindings raise several kinds when libnvrtc is missing
            raise CudaToolkitMissingError(
                f"the NVRTC library could not be loaded (package nvidia-cuda-nvrtc): {exc}; "
                f"install the CUDA packages with `{CUDA_INSTALL_COMMAND}`"
            ) from exc
        major, minor = _check(nvrtc, returned, "nvrtcVersion")
        _version = (int(major), int(minor))
    return nvrtc


def nvrtc_version() -> tuple[int, int]:
    """Return NVRTC's (major, minor) version, e.g. (13, 0). Raises `CudaToolkitMissingError` without NVRTC."""
    _nvrtc()
    assert _version is not None
    return _version


_include_dir: str | None = None


def cuda_include_dir() -> str:
    """Return the directory holding `cuda_fp16.h` / `cuda_bf16.h`, found (once) with `cuda.pathfinder`.

    `find_nvidia_header_directory("cudart")` looks in the `nvidia-cuda-runtime` wheel first, then conda, then
    `CUDA_PATH` / `CUDA_HOME` and system locations. Raises `CudaToolkitMissingError` when none has the headers.
    """
    global _include_dir
    if _include_dir is None:
        pathfinder = _import("cuda.pathfinder", "cuda-pathfinder, installed with cuda-python")
        try:
            found = pathfinder.find_nvidia_header_directory("cudart")
        except Exception as exc:  # an old cuda.pathfinder without "cudart" raises RuntimeError
            raise CudaToolkitMissingError(
                f"cuda.pathfinder could not look for the CUDA runtime headers ({exc}); "
                f"install the CUDA packages with `{CUDA_INSTALL_COMMAND}`"
            ) from exc
        if not found or not os.path.isfile(os.path.join(found, "cuda_fp16.h")):
            raise CudaToolkitMissingError(
                "the CUDA runtime headers (cuda_fp16.h, cuda_bf16.h; package nvidia-cuda-runtime) were not found; "
                f"install the CUDA packages with `{CUDA_INSTALL_COMMAND}`"
            )
        _include_dir = os.path.abspath(found)
    return _include_dir


_identity: str | None = None


def toolkit_identity() -> str:
    """Return a fingerprint of the compiling toolkit for cache keys: the NVRTC version, the path, size and
    modification time of the loaded libnvrtc, and the path and file stats of the runtime header directory."""
    global _identity
    if _identity is None:
        major, minor = nvrtc_version()
        _identity = ";".join([f"nvrtc={major}.{minor}", f"lib={_nvrtc_library()}", f"headers={_headers_stamp()}"])
    return _identity


def _nvrtc_library() -> str:
    """`path:size:mtime` of the libnvrtc that `cuda.bindings` loaded, or "unknown" when it cannot be told."""
    try:
        pathfinder = _import("cuda.pathfinder", "cuda-pathfinder")
        path = pathfinder.load_nvidia_dynamic_lib("nvrtc").abs_path
        st = os.stat(path)
    except Exception:  # only a finer cache key is lost
        return "unknown"
    return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"


def _headers_stamp() -> str:
    """The runtime header directory and a sha256 over the name, size and mtime of each file directly in it."""
    import hashlib

    directory = cuda_include_dir()
    digest = hashlib.sha256()
    with os.scandir(directory) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.is_file():
                st = entry.stat()
                digest.update(f"{entry.name}\x1f{st.st_size}\x1f{st.st_mtime_ns}\n".encode())
    return f"{directory}:{digest.hexdigest()[:16]}"


# ----------------------------------------------------------------------------------------------------
# Compiling


def compile_options(arch: str, include_dirs: Sequence[str] = (), options: Sequence[str] = ()) -> tuple[str, ...]:
    """Return the NVRTC options `compile_cubin` uses: the architecture, `BASE_OPTIONS`, one `--include-path`
    per directory of `include_dirs` then the runtime header directory, then the caller's `options`."""
    includes = [*(os.path.abspath(d) for d in include_dirs), cuda_include_dir()]
    return (
        f"--gpu-architecture={normalize_arch(arch)}",
        *BASE_OPTIONS,
        *(f"--include-path={d}" for d in includes),
        *options,
    )


def compile_cubin(
    source: str,
    arch: str = FALLBACK_ARCH,
    *,
    name: str = "module.cu",
    include_dirs: Sequence[str] = (),
    options: Sequence[str] = (),
) -> bytes:
    """Compile the CUDA C `source` with NVRTC to a cubin (an ELF image) for the real architecture `arch`.

    `arch` is "sm_80", "sm_90a", "90", ... (ValueError for other spellings or an architecture this NVRTC does
    not support). `name` is the program's file name in diagnostics; `include_dirs` are searched for headers
    before the CUDA runtime headers; `options` are extra NVRTC options. Raises `NVRTCCompilationError` (NVRTC's
    errors mapped to DSL lines) and `CudaToolkitMissingError` (the CUDA packages are missing).
    """
    arch = normalize_arch(arch)
    return _compile(source, arch, name, compile_options(arch, include_dirs, options), "CUBIN")


def compile_ptx(
    source: str,
    arch: str = FALLBACK_ARCH,
    *,
    name: str = "module.cu",
    include_dirs: Sequence[str] = (),
    options: Sequence[str] = (),
) -> str:
    """Compile the CUDA C `source` with NVRTC to PTX for the virtual architecture of `arch` (`compute_90a` for
    "sm_90a"), with the options `compile_cubin` takes for `arch` (so the PTX is the cubin's); raises as it does."""
    arch = normalize_arch(arch)
    real, *rest = compile_options(arch, include_dirs, options)
    virtual = real.replace("=sm_", "=compute_")
    return _compile(source, arch, name, (virtual, *rest), "PTX").rstrip(b"\0").decode("utf-8", "replace")


def _compile(source: str, arch: str, name: str, options: tuple[str, ...], output: str) -> bytes:
    """NVRTC's `output` ('CUBIN' or 'PTX') of `source` compiled for `arch` with `options`."""
    nvrtc = _nvrtc()
    _require_supported(arch)
    program = _check(
        nvrtc, nvrtc.nvrtcCreateProgram(source.encode("utf-8"), name.encode("utf-8"), 0, [], []), "nvrtcCreateProgram"
    )
    try:
        result = _compile_program(nvrtc, program, source, name, options, output)
    except BaseException:
        nvrtc.nvrtcDestroyProgram(program)  # best effort: the error in flight is the one to report
        raise
    _check(nvrtc, nvrtc.nvrtcDestroyProgram(program), "nvrtcDestroyProgram")
    return result


def _compile_program(nvrtc: Any, program: Any, source: str, name: str, options: tuple[str, ...],
                     output: str = "CUBIN") -> bytes:
    """Compile the created `program` and return its `output` ('CUBIN' or 'PTX'); raise `NVRTCCompilationError`
    with the mapped log."""
    encoded = [option.encode("utf-8") for option in options]
    (result,) = nvrtc.nvrtcCompileProgram(program, len(encoded), encoded)
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        log = _program_log(nvrtc, program)
        raise _compilation_error(source, name, options, log, _result_name(result))
    size = _check(nvrtc, getattr(nvrtc, f"nvrtcGet{output}Size")(program), f"nvrtcGet{output}Size")
    buffer = bytearray(size)
    _check(nvrtc, getattr(nvrtc, f"nvrtcGet{output}")(program, buffer), f"nvrtcGet{output}")
    return bytes(buffer)


def _program_log(nvrtc: Any, program: Any) -> str:
    """NVRTC's log of `program` as text (without the terminating NUL)."""
    size = _check(nvrtc, nvrtc.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
    buffer = bytearray(max(int(size), 1))
    _check(nvrtc, nvrtc.nvrtcGetProgramLog(program, buffer), "nvrtcGetProgramLog")
    return bytes(buffer).rstrip(b"\0").decode("utf-8", "replace")


def _check(nvrtc: Any, returned: tuple[Any, ...], call: str) -> Any:
    """Check the result code heading an NVRTC call's return tuple; return the single value after it (or the
    tuple of values). A failure raises `NVRTCCompilationError` naming the call and the result."""
    result, *values = returned
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        name = _result_name(result)
        raise NVRTCCompilationError(f"NVRTC call {call} failed: {name}", result=name)
    return values[0] if len(values) == 1 else tuple(values)


def _result_name(result: Any) -> str:
    """The name of an `nvrtcResult`, e.g. "NVRTC_ERROR_COMPILATION"."""
    return getattr(result, "name", str(result))


# A `<file>(<line>): [catastrophic ]error: message` diagnostic of an NVRTC log.
_DIAGNOSTIC_RE = re.compile(
    r"^(?P<file>[^\n]*?)\((?P<line>\d+)\):\s*(?:catastrophic\s+|fatal\s+)?error(?:\s*#[\w-]+)?:\s*(?P<msg>.*)$",
    re.MULTILINE,
)


def _diagnostics(log: str, name: str) -> list[Diagnostic]:
    """Parse the diagnostics of an NVRTC log."""
    return [
        Diagnostic(file=m["file"], line=int(m["line"]), message=m["msg"].strip(), in_generated=m["file"] == name)
        for m in _DIAGNOSTIC_RE.finditer(log)
    ]


def _compilation_error(
    source: str, name: str, options: tuple[str, ...], log: str, result: str
) -> NVRTCCompilationError:
    """Build the `NVRTCCompilationError` of a failed compilation, with the log's errors mapped to DSL lines."""
    body, first = format_diagnostics(
        source, _diagnostics(log, name), log, generated_label="generated CUDA", output_attribute="log"
    )
    arch = next((o.split("=", 1)[1] for o in options if o.startswith("--gpu-architecture=")), "?")
    return NVRTCCompilationError(
        f"NVRTC compilation failed ({result}) for {name} ({arch}):\n{body}",
        log=log,
        dsl_file=first[0] if first else None,
        dsl_line=first[1] if first else None,
        result=result,
        options=options,
        name=name,
    )

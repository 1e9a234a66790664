"""What ptxas says about each kernel it compiles (`--ptxas-options=-v`): its stack frame and the bytes its spill
stores and loads move, which the cubin does not record.

NVRTC compiles the source once more with ptxas' verbose option and the compilation's log holds, per function:

    ptxas info    : Compiling entry function 'matmul' for 'sm_80'
    ptxas info    : Function properties for matmul
    ptxas         .     896 bytes stack frame, 940 bytes spill stores, 1980 bytes spill loads
    ptxas info    : Used 64 registers, used 0 barriers, 896 bytes cumulative stack size, 364 bytes cmem[0]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from . import nvrtc

__all__ = ["PTXAS_VERBOSE", "FunctionProperties", "parse_ptxas_log", "ptxas_log"]

PTXAS_VERBOSE = "--ptxas-options=-v"
"""The NVRTC option that makes ptxas report each function's resources in the log."""

_PROPERTIES_RE = re.compile(
    r"Function properties for (?P<name>\S+)\s*\n\s*ptxas\s+\.\s+(?P<frame>\d+) bytes stack frame, "
    r"(?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill loads")


@dataclass(frozen=True)
class FunctionProperties:
    """ptxas' account of one function: its stack frame and the bytes of its spill stores and loads (static: the
    sizes of the spilling instructions in its code, each counted once)."""

    frame_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int


def parse_ptxas_log(log: str) -> dict[str, FunctionProperties]:
    """Each function's properties in ptxas' verbose `log`, by function name (kernels and the device functions
    ptxas kept as calls)."""
    return {m["name"]: FunctionProperties(frame_bytes=int(m["frame"]), spill_store_bytes=int(m["stores"]),
                                          spill_load_bytes=int(m["loads"]))
            for m in _PROPERTIES_RE.finditer(log)}


def ptxas_log(source: str, arch: str, *, include_dirs: Sequence[str] = (), options: Sequence[str] = ()) -> str:
    """Compile the CUDA C `source` for `arch` as `nvrtc.compile_cubin` does (same headers and `options`) with
    ptxas' verbose option, and return the compilation's log. Raises what `compile_cubin` raises."""
    arch = nvrtc.normalize_arch(arch)
    module = nvrtc._nvrtc()
    nvrtc._require_supported(arch)
    all_options = nvrtc.compile_options(arch, include_dirs, (*options, PTXAS_VERBOSE))
    program = nvrtc._check(module, module.nvrtcCreateProgram(source.encode("utf-8"), b"module.cu", 0, [], []),
                           "nvrtcCreateProgram")
    try:
        nvrtc._compile_program(module, program, source, "module.cu", all_options)
        return nvrtc._program_log(module, program)
    finally:
        module.nvrtcDestroyProgram(program)

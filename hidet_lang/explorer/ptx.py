"""NVRTC's PTX of a CUDA module's device source: the same source, headers and options as its cubin, compiled for
the virtual architecture of the cubin's real one (sm_90a -> compute_90a)."""

from __future__ import annotations

from codegen.toolchain import nvrtc
from codegen.toolchain.headers import INCLUDE_DIR


def compile_ptx(source: str, arch: str) -> str:
    """The PTX NVRTC makes of the CUDA C `source` for `arch` ('sm_XY', its virtual 'compute_XY' twin).

    Raises what `nvrtc.compile_cubin` raises for a source that does not compile."""
    real = nvrtc.normalize_arch(arch)
    options = [option.replace(f"={real}", f"={real.replace('sm_', 'compute_')}")
               for option in nvrtc.compile_options(real, [str(INCLUDE_DIR)])]
    encoded = [option.encode() for option in options]
    bindings = nvrtc._nvrtc()
    program = nvrtc._check(bindings, bindings.nvrtcCreateProgram(source.encode(), b"module.cu", 0, [], []),
                           "nvrtcCreateProgram")
    try:
        (result,) = bindings.nvrtcCompileProgram(program, len(encoded), encoded)
        if result != bindings.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"NVRTC could not compile the module to PTX:\n{nvrtc._program_log(bindings, program)}")
        size = nvrtc._check(bindings, bindings.nvrtcGetPTXSize(program), "nvrtcGetPTXSize")
        buffer = bytearray(size)
        nvrtc._check(bindings, bindings.nvrtcGetPTX(program, buffer), "nvrtcGetPTX")
        return bytes(buffer).rstrip(b"\0").decode("utf-8", "replace")
    finally:
        bindings.nvrtcDestroyProgram(program)

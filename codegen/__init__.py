"""Code generation: IR -> C / CUDA C source -> shared library or cubin -> callable, in three parts and a seam.

- `emit`: IR to source (C for the CPU; CUDA C for a GPU and for the CUDA emulator);
- `toolchain`: source to binaries (the C and C++ compilers, NVRTC) and the compilation cache;
- `runtime`: the compiled module, its argument checks, arrays on each device, the GPU driver and the emulator's
  memory.

`build.build_module` drives a build through the backend of the target's kind (`backends`; `cuda_build` for
CUDA). The names below are the package's public face; each loads its module on first use.
"""

from hidet_lang.lazy import homes_of, lazy_attributes

_HOMES = {
    **homes_of("codegen.build", "build_module"),
    **homes_of("codegen.backends", "Backend", "backend_for", "resolve_target", "with_device_arch"),
    **homes_of("codegen.runtime.module", "CompiledModule"),
    **homes_of("codegen.toolchain.cache", "PortableEntry"),
    **homes_of("codegen.runtime.arrays", "asarray", "empty", "randn", "zeros"),
    **homes_of("codegen.toolchain.errors", "CCompilationError", "CompilerNotFoundError", "CudaToolkitMissingError",
               "NVRTCCompilationError"),
}
__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy_attributes(__name__, _HOMES)

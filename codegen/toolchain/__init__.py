"""Toolchain: source text to binaries, and the compilation cache. `compiler` finds and runs the system C and C++
compilers, `nvrtc` compiles CUDA C to cubins in-process; `cache` (with `cache_keys` and `cache_entries`) keeps what
they made on disk, keyed by the source, the compiler and the flags, and in memory (`code_identity`: the fingerprint
of the project's own code in module records' keys; `source_files`: the table of the user's files that generated
sources name by number, so that no key holds a path); `precompiled_headers` are the headers the emulator's sources
parse once, and `emulator_runtime` the CUDA emulator's runtime object, compiled once and linked into every emulator
library; `headers` locates the project's headers; `cpu_features` and `vector_math` ask the C compiler what the
machine offers; `vectorization_report` reads its remarks; `elf` reads the symbols and sections of a binary;
`cubin_report` reports what a cubin's kernels use (`cubin_info` reads the cubin, `ptxas_log` ptxas' account of
spills, `occupancy` the theoretical occupancy, `sass` the disassembled opcodes); `openmp` makes the OpenMP runtime
the libraries load wait passively; `errors` are the toolchain's exceptions."""

from hidet_lang.lazy import homes_of, lazy_attributes

_HOMES = {
    **homes_of("codegen.toolchain.cache", "CompilationCache", "PortableEntry", "cache_dir", "install_entry"),
    **homes_of("codegen.toolchain.compiler", "CompilerInfo", "find_c_compiler"),
    **homes_of("codegen.toolchain.cpu_features", "machine_cpu_features"),
    **homes_of("codegen.toolchain.nvrtc", "compile_cubin", "default_arch", "supported_archs"),
    **homes_of("codegen.toolchain.errors", "CCompilationError", "CompilerNotFoundError", "CudaToolkitMissingError",
               "NVRTCCompilationError"),
    **homes_of("codegen.toolchain.vectorization_report", "VectorizationReport"),
    **homes_of("codegen.toolchain.cubin_report", "CubinReport"),
}
__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy_attributes(__name__, _HOMES)

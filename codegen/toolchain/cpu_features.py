"""Which x86 instruction-set extensions the C compiler enables for the CPU target: `machine_cpu_features`.

The vector types of CPU functions each need one (`hidet_lang.passes.vector_rules`). What counts is what the code
will be compiled for, so the compiler is asked, with the project's own target flags (`-march=native` of
`DEFAULT_C_FLAGS`): `cc -march=native -dM -E -x c - < /dev/null` lists the predefined macros, and `__SSE__`,
`__AVX__`, `__FMA__`, `__AVX512F__`, `__AVX512BF16__` say which extensions are on. The answer is cached per
compiler and flags.
`build_module` puts it in the target (`Target.cpu_features`); tests replace `machine_cpu_features` to see both
the accepted and the refused path on any machine.
"""

from __future__ import annotations

import functools
import subprocess

from codegen.toolchain.compiler import DEFAULT_C_FLAGS, CompilerInfo, find_c_compiler, run_compiler
from codegen.toolchain.errors import CCompilationError

FEATURE_MACROS = {"__SSE__": "sse", "__AVX__": "avx", "__FMA__": "fma", "__AVX512F__": "avx512f",
                  "__AVX512BF16__": "avx512bf16"}
"""The compiler's predefined macro for each extension, and the name `Target.cpu_features` gives it."""


def machine_cpu_features() -> frozenset[str]:
    """The extensions (`FEATURE_MACROS` names) the system C compiler enables with the CPU target's flags."""
    return compiler_cpu_features(find_c_compiler("c"), tuple(f for f in DEFAULT_C_FLAGS if f.startswith("-m")))


@functools.cache
def compiler_cpu_features(compiler: CompilerInfo, target_flags: tuple[str, ...]) -> frozenset[str]:
    """The extensions `compiler` enables with `target_flags` (e.g. `('-march=native',)`), from its predefined
    macros; a `CCompilationError` when it cannot preprocess an empty file."""
    command = (*compiler.command, *target_flags, "-dM", "-E", "-x", "c", "-")
    try:
        status, output = run_compiler(command)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CCompilationError(f"could not ask the C compiler for its target's features: {exc}",
                                command=command) from None
    if status != 0:
        raise CCompilationError(f"the C compiler could not list its predefined macros (exit status {status}):\n"
                                f"{output.strip()}", compiler_output=output, command=command)
    defined = {line.split()[1] for line in output.splitlines() if line.startswith("#define ")}
    return frozenset(name for macro, name in FEATURE_MACROS.items() if macro in defined)

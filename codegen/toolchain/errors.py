"""Exceptions raised while turning generated source into a loadable binary.

All are `RuntimeError`s: they describe the environment (no compiler, no CUDA packages) or the generated code (a
compiler diagnostic), not a misuse of the Python API.
"""

from __future__ import annotations


class CompilerNotFoundError(RuntimeError):
    """No usable C / C++ compiler: neither the environment variable (`CC` / `CXX`) nor the usual names."""


class CCompilationError(RuntimeError):
    """The C / C++ compiler rejected generated code (or did not finish in time).

    The message maps each compiler diagnostic back to the DSL line that produced the offending code, through
    the `// file.py:line` markers the code generator writes.

    Attributes:
        compiler_output: the compiler's complete stdout + stderr.
        dsl_file: the user's file of the first mapped diagnostic, or None when none could be mapped.
        dsl_line: the line in `dsl_file` of the first mapped diagnostic, or None.
        command: the compiler command line that failed.
        source_path: the generated source file the compiler was given.
    """

    def __init__(
        self,
        message: str,
        *,
        compiler_output: str = "",
        dsl_file: str | None = None,
        dsl_line: int | None = None,
        command: tuple[str, ...] = (),
        source_path: str | None = None,
    ) -> None:
        super().__init__(message)
        self.compiler_output = compiler_output
        self.dsl_file = dsl_file
        self.dsl_line = dsl_line
        self.command = command
        self.source_path = source_path


CUDA_INSTALL_COMMAND = "pip install cuda-python nvidia-cuda-nvrtc nvidia-cuda-runtime"
"""The command that installs everything `codegen.toolchain.nvrtc` needs (named in `CudaToolkitMissingError`)."""


class CudaToolkitMissingError(RuntimeError):
    """The CUDA Python packages needed to compile CUDA C (NVRTC, its bindings, the runtime headers) are missing.

    The message says what could not be found and names the command that installs it (`CUDA_INSTALL_COMMAND`).
    """


class NVRTCCompilationError(RuntimeError):
    """NVRTC rejected generated CUDA C (or one of its calls failed while compiling it).

    The message maps each `error` diagnostic of NVRTC's log back to the DSL line that produced the offending
    code, through the `// file.py:line` markers the code generator writes (as `CCompilationError` does).

    Attributes:
        log: NVRTC's complete program log (empty when the failure came before compiling).
        dsl_file: the user's file of the first mapped diagnostic, or None when none could be mapped.
        dsl_line: the line in `dsl_file` of the first mapped diagnostic, or None.
        result: the name of the failing NVRTC result code, e.g. "NVRTC_ERROR_COMPILATION".
        options: the NVRTC options of the compilation.
        name: the program name the source was given (the file name in NVRTC's diagnostics).
    """

    def __init__(
        self,
        message: str,
        *,
        log: str = "",
        dsl_file: str | None = None,
        dsl_line: int | None = None,
        result: str = "",
        options: tuple[str, ...] = (),
        name: str = "",
    ) -> None:
        super().__init__(message)
        self.log = log
        self.dsl_file = dsl_file
        self.dsl_line = dsl_line
        self.result = result
        self.options = options
        self.name = name

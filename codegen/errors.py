"""Exceptions raised while turning generated source into a loadable binary.

Both are `RuntimeError`s: they describe the environment (no compiler) or the generated code (a compiler
diagnostic), not a misuse of the Python API.
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

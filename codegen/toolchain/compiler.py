"""The C / C++ compiler driver: find the system compiler, build a shared library, map errors to DSL lines.

The code generator writes a marker comment `// <file N>:<line>` before the code of each DSL statement (on a line
of its own, or at the end of a statement line), `<file N>` the token of the user's file in the module's table
(`source_files`; a marker may also name a file itself, `// k.py:3`). When the compiler rejects the generated code,
each diagnostic at C line L is attributed to the nearest marker at or above L, and `CCompilationError` shows the
user's file (the token's path in the table in effect: `source_files.SourceFiles.in_effect`), line and source text
next to the offending C line. `format_diagnostics` does that mapping and formatting for any compiler whose
diagnostics have been parsed into `Diagnostic`s (NVRTC's, in `nvrtc`).

`subprocess` and `shlex` are imported when a compiler is actually searched for or run.
"""

from __future__ import annotations

import linecache
import os
import re
import stat
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import CCompilationError, CompilerNotFoundError
from .source_files import SourceFiles, files_in_effect

__all__ = [
    "DEFAULT_C_FLAGS",
    "COMPILE_TIMEOUT_S",
    "CompilerInfo",
    "Diagnostic",
    "CompilerNotFoundError",
    "CCompilationError",
    "find_c_compiler",
    "format_diagnostics",
    "compile_shared_library",
    "compiler_version",
    "map_c_line_to_dsl",
    "marker_at",
    "marker_table",
    "run_compiler",
    "source_suffix",
]

SEMANTICS_FLAGS: tuple[str, ...] = ("-fwrapv", "-ffp-contract=off")
"""The DSL's arithmetic, which C leaves to the compiler otherwise: signed integers wrap around, and `a * b + c` is
rounded twice (never contracted into a fused multiply-add), as the IR evaluator computes it."""

DEFAULT_C_FLAGS: tuple[str, ...] = ("-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", *SEMANTICS_FLAGS,
                                    "-fexcess-precision=standard")
"""Flags for the CPU target (added after `-shared -fPIC`); `_Float16` arithmetic rounds after every operation. GCC
vectorizes for 256-bit registers on the AVX-512 cores it knows unless told otherwise; the loops it vectorizes here
(epilogues such as GELU's, packing, element-wise kernels) are the kernels' own, so they take the 512-bit ones
(BERT-base, batch 1, in turns: 111/109 -> 104/105 ms; ResNet-18 15.9/16.3 -> 15.4/15.5; a machine without AVX-512
is unaffected)."""

COMPILE_TIMEOUT_S: float = 300.0
"""Wall-clock limit for one compiler invocation, in seconds."""

MAX_REPORTED_ERRORS = 10
"""At most this many `error:` diagnostics are spelled out in a `CCompilationError` message."""

# language -> (environment variable, names searched on PATH in order, generated source suffix)
_LANGUAGES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "c": ("CC", ("cc", "gcc", "clang"), ".c"),
    "c++": ("CXX", ("c++", "g++", "clang++"), ".cpp"),
}


@dataclass(frozen=True)
class CompilerInfo:
    """A compiler command line and a cheap fingerprint of the executable behind it.

    `identity` is the full command plus the resolved path, size and modification time of every executable
    in the command (a wrapper such as `ccache gcc` fingerprints both); it goes into every cache key.
    """

    command: tuple[str, ...]
    identity: str


def _language_entry(language: str) -> tuple[str, tuple[str, ...], str]:
    """Return the (env var, candidate names, source suffix) entry of `language`, or raise ValueError."""
    try:
        return _LANGUAGES[language]
    except KeyError:
        raise ValueError(f"unsupported language {language!r}; expected one of {sorted(_LANGUAGES)}") from None


def source_suffix(language: str) -> str:
    """Return the file suffix of generated source in `language` (`.c` for "c", `.cpp` for "c++")."""
    return _language_entry(language)[2]


_found: dict[tuple[str, str | None, str | None], CompilerInfo] = {}


def find_c_compiler(language: str = "c") -> CompilerInfo:
    """Find the compiler for `language` ("c" or "c++"): `$CC` / `$CXX`, else the first usual name on PATH.

    The result is memoized per (language, environment variable, PATH), so repeated calls cost a dict lookup.
    Raises `CompilerNotFoundError` (with advice on setting `CC` / `CXX`) when nothing usable is found.
    """
    env_var, _names, _suffix = _language_entry(language)
    env_value = os.environ.get(env_var) or None
    memo_key = (language, env_value, os.environ.get("PATH"))
    info = _found.get(memo_key)
    if info is None:
        info = _search_compiler(language, env_value)
        _found[memo_key] = info
    return info


def _search_compiler(language: str, env_value: str | None) -> CompilerInfo:
    """Resolve the compiler command for `language` without the memo (see `find_c_compiler`)."""
    env_var, names, _suffix = _language_entry(language)
    example = "/usr/bin/gcc" if language == "c" else "/usr/bin/g++"
    if env_value is not None:
        import shlex

        command = tuple(shlex.split(env_value))
        found = _which(command[0]) if command else None
        if found is None:
            raise CompilerNotFoundError(
                f"the {language} compiler named by {env_var}={env_value!r} was not found "
                f"(looked for {command[0] if command else '<empty>'!r} as a path and on PATH); "
                f"set {env_var} to an installed compiler, e.g. `export {env_var}={example}`"
            )
        return _make_info((found[0], *command[1:]))
    for name in names:
        found = _which(name)
        if found is not None:
            return _make_info((found[0],))
    raise CompilerNotFoundError(
        f"no {language} compiler found: looked for {', '.join(names)} on PATH and {env_var} is not set; "
        f"install one (e.g. gcc) or set {env_var}, e.g. `export {env_var}={example}`"
    )


def _which(name: str) -> tuple[str, os.stat_result] | None:
    """Locate the executable `name` (a path, or a name searched on PATH); return its path and `os.stat`.

    Like `shutil.which`, with one `stat` per PATH entry, whose result is reused for the identity.
    """
    if os.sep in name:
        candidates = [name]
    else:
        directories = os.environ.get("PATH", os.defpath).split(os.pathsep)
        candidates = [os.path.join(directory or os.curdir, name) for directory in directories]
    for path in candidates:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and os.access(path, os.X_OK):
            return path, st
    return None


def _make_info(command: tuple[str, ...]) -> CompilerInfo:
    """Build a `CompilerInfo` for `command`, fingerprinting each word that names an executable.

    The fingerprint of an executable is its resolved real path, size and modification time: a few `stat`
    calls, no subprocess.
    """
    parts = ["cmd=" + "\x1f".join(command)]
    for word in command:
        found = None if word.startswith("-") else _which(word)
        if found is not None:
            path, st = found
            parts.append(f"exe={os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}")
    return CompilerInfo(command=command, identity=";".join(parts))


_versions: dict[CompilerInfo, str] = {}


def compiler_version(info: CompilerInfo) -> str:
    """Return the first line of `<compiler> --version` (run once per compiler; for cache metadata only)."""
    version = _versions.get(info)
    if version is None:
        import subprocess

        try:
            done = subprocess.run(
                [*info.command, "--version"], capture_output=True, text=True, timeout=30, check=False
            )
            lines = (done.stdout or done.stderr).strip().splitlines()
            version = lines[0] if lines else "unknown"
        except (OSError, subprocess.SubprocessError) as exc:
            version = f"unknown ({exc})"
        _versions[info] = version
    return version


def gcc_major_version(info: CompilerInfo) -> int | None:
    """The major version of GCC when `info` is GCC (under any name: `cc`, `gcc-12`), else None."""
    first_line = compiler_version(info)
    gcc = re.search(r"\s(\d+)\.\d+\.\d+\s*$", first_line)  # "gcc (Debian 12.2.0-14) 12.2.0"
    return int(gcc.group(1)) if gcc is not None and "clang" not in first_line.lower() else None


def workaround_flags(info: CompilerInfo) -> tuple[str, ...]:
    """Flags that keep a compiler's known miscompilations out of generated code.

    GCC 12 (12.2 seen) drops the float rounding of `(double)(float)x` when its SLP vectorizer pairs two such
    conversions, at -O2 and -O3 (tests/codegen/test_fuzz_findings.py has the program); its SLP pass is turned off.
    GCC 12 and 13 (13.3 seen) also vectorize a select between loads at a non-power-of-two number of consecutive
    addresses (`c[k] ? x[k] : y[k]` for k in 0..2, or an inner loop of 3 it unrolled) with one mask for the whole
    group, so that most selects take the wrong operand; their loop if-conversion, which makes such loads masked, is
    turned off (loops with conditional loads are then left scalar).
    """
    per_version = {12: ("-fno-tree-slp-vectorize", "-fno-tree-loop-if-convert"), 13: ("-fno-tree-loop-if-convert",)}
    return per_version.get(gcc_major_version(info), ())


def compile_shared_library(
    source: str,
    output: Path,
    *,
    compiler: CompilerInfo,
    flags: Sequence[str],
    language: str = "c",
    link_objects: Sequence[str | os.PathLike[str]] = (),
) -> str:
    """Compile `source` into the shared library `output`, linking `link_objects` (object files or static archives:
    the emulator's runtime) with it; return what the compiler printed (its warnings, and the remarks that flags
    such as `-fopt-info-vec` ask for).

    The source is written next to the output (`output.with_suffix(".c")` or `".cpp"`), then compiled with
    `-shared -fPIC` plus `flags` (see `DEFAULT_C_FLAGS`). Raises `CCompilationError` with diagnostics mapped
    back to DSL lines when the compiler fails or runs longer than `COMPILE_TIMEOUT_S`, and
    `CompilerNotFoundError` when the compiler cannot be started.
    """
    import subprocess

    output = Path(output)
    source_path = output.with_suffix(source_suffix(language))
    output.parent.mkdir(parents=True, exist_ok=True)
    source_path.write_text(source, encoding="utf-8")
    command = (*compiler.command, "-shared", "-fPIC", *flags, *workaround_flags(compiler), "-o", str(output),
               str(source_path), *map(os.fspath, link_objects), "-lm")
    try:
        returncode, output = run_compiler(command)
    except subprocess.TimeoutExpired as exc:
        raise CCompilationError(
            f"the {language} compiler did not finish within {COMPILE_TIMEOUT_S:g} s compiling {source_path}",
            compiler_output=exc.output or "",
            command=command,
            source_path=str(source_path),
        ) from None
    except OSError as exc:
        raise CompilerNotFoundError(f"could not run the {language} compiler {command[0]!r}: {exc}") from None
    if returncode != 0:
        raise _compilation_error(source, str(source_path), command, output, returncode, language)
    return output


def run_compiler(command: tuple[str, ...]) -> tuple[int, str]:
    """Run `command` in its own process group with stderr merged into stdout; return (status, output).

    On timeout the whole group (the driver and the cc1 / ld it started) is killed, and `TimeoutExpired`
    carries the output so far.
    """
    import signal
    import subprocess

    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        start_new_session=True,
    ) as process:
        try:
            output, _ = process.communicate(timeout=COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                process.kill()
            output, _ = process.communicate()
            exc.output = output
            raise
    return process.returncode, output


# ----------------------------------------------------------------------------------------------------
# Mapping diagnostics back to DSL lines


# A `// <file>:<line>` marker at the end of a C line. A marker on a line of its own may name any file; one after
# code must name a Python source (`*.py`, `*.pyw`, `*.ipy`) or a pseudo-file such as `<string>` or a file's token
# `<file 0>` (`source_files`), so ordinary comments do not match.
_MARKER_RE = re.compile(
    r"^\s*//\s*(?P<own>\S(?:.*\S)?):(?P<own_line>\d+)\s*$"
    r"|//\s*(?P<file>\S.*?\.(?:py|pyw|ipy)|<[^<>]+>):(?P<line>\d+)\s*$"
)


def marker_table(source: str, files: SourceFiles | None = None) -> tuple[list[int], list[tuple[str, int]]]:
    """Return the C line numbers (ascending) carrying a marker and the (file, line) of each marker, a file's token
    replaced by its path in `files` (by default the table in effect: `source_files.files_in_effect`)."""
    files = files_in_effect() if files is None else files
    c_lines: list[int] = []
    targets: list[tuple[str, int]] = []
    for number, text in enumerate(source.splitlines(), start=1):
        if "//" not in text:
            continue
        match = _MARKER_RE.search(text)
        if match is not None:
            c_lines.append(number)
            if match["own"] is not None:
                targets.append((files.path(match["own"]), int(match["own_line"])))
            else:
                targets.append((files.path(match["file"]), int(match["line"])))
    return c_lines, targets


def marker_at(table: tuple[list[int], list[tuple[str, int]]], c_line: int) -> tuple[str, int] | None:
    """Return the target of the nearest marker at or above `c_line` in a `marker_table`, or None."""
    c_lines, targets = table
    index = bisect_right(c_lines, c_line) - 1
    return targets[index] if index >= 0 else None


def map_c_line_to_dsl(source: str, c_line: int, files: SourceFiles | None = None) -> tuple[str, int] | None:
    """Map 1-based line `c_line` of generated `source` to the (DSL file, DSL line) of the nearest marker at
    or above it (its file named as `marker_table` names it, through `files`); None when no marker precedes it."""
    return marker_at(marker_table(source, files), c_line)


# A GCC / Clang `file:line[:col]: [fatal ]error: message` diagnostic.
_DIAG_RE = re.compile(
    r"^(?P<file>[^\n]*?):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?:fatal\s+)?error:\s*(?P<msg>.*)$", re.MULTILINE
)


def _same_file(reported: str, source_path: str) -> bool:
    """Whether a path in a diagnostic names the generated source file."""
    if reported == source_path:
        return True
    try:
        return os.path.samefile(reported, source_path)
    except OSError:
        return os.path.basename(reported) == os.path.basename(source_path)


@dataclass(frozen=True)
class Diagnostic:
    """One `error` diagnostic of a compiler, as parsed from its output.

    `file` and `line` are where the compiler reported it; `in_generated` says whether `file` is the generated
    source (only such lines are mapped back to DSL lines through the markers).
    """

    file: str
    line: int
    message: str
    in_generated: bool


def format_diagnostics(
    source: str,
    diagnostics: Sequence[Diagnostic],
    output: str,
    *,
    generated_label: str = "generated C",
    output_attribute: str = "compiler_output",
) -> tuple[str, tuple[str, int] | None]:
    """Describe compiler `diagnostics` of generated `source` in terms of the DSL lines that produced them.

    Each of the first `MAX_REPORTED_ERRORS` diagnostics becomes a block: `dsl_file:line: error: message` (or the
    compiler's own location when no marker maps it), the DSL source line (through `linecache`) and the offending
    line of `source` labelled `generated_label`. Without diagnostics the last 40 lines of the compiler's `output`
    are shown instead; `output_attribute` names the exception attribute that holds all of it. The user's files
    are named by their paths in the table in effect (`source_files.SourceFiles.in_effect`), in the body too.
    Returns the message body and the (DSL file, DSL line) of the first mapped diagnostic, or None.
    """
    files = files_in_effect()
    table = marker_table(source, files)
    source_lines = source.splitlines()
    blocks: list[str] = []
    first: tuple[str, int] | None = None
    for diagnostic in diagnostics[:MAX_REPORTED_ERRORS]:
        target = marker_at(table, diagnostic.line) if diagnostic.in_generated else None
        first = first or target
        blocks.append(_diagnostic_block(diagnostic, target, source_lines, generated_label))
    if blocks:
        body = "\n".join(blocks)
        if len(diagnostics) > MAX_REPORTED_ERRORS:
            body += f"\n({len(diagnostics) - MAX_REPORTED_ERRORS} more errors; see .{output_attribute})"
    else:
        tail = output.strip().splitlines()[-40:]
        body = "\n".join(tail) if tail else "(the compiler printed nothing)"
    return files.resolve(body), first


def _diagnostic_block(
    diagnostic: Diagnostic, target: tuple[str, int] | None, source_lines: list[str], generated_label: str
) -> str:
    """The lines describing one diagnostic: its (DSL) location and message, the DSL text, the generated line."""
    c_line = diagnostic.line
    if target is None:
        lines = [f"{diagnostic.file}:{c_line}: error: {diagnostic.message}"]
    else:
        dsl_file, dsl_line = target
        lines = [f"{dsl_file}:{dsl_line}: error: {diagnostic.message}"]
        dsl_text = linecache.getline(dsl_file, dsl_line).strip()
        if dsl_text:
            lines.append(f"    {dsl_text}")
    if diagnostic.in_generated and 1 <= c_line <= len(source_lines):
        lines.append(f"    {generated_label} (line {c_line}): {source_lines[c_line - 1].strip()}")
    return "\n".join(lines)


def _compilation_error(
    source: str, source_path: str, command: tuple[str, ...], output: str, returncode: int, language: str = "c"
) -> CCompilationError:
    """Build the `CCompilationError` for a failed compiler run, mapping `error:` diagnostics to DSL lines."""
    diagnostics = [
        Diagnostic(
            file=match["file"],
            line=int(match["line"]),
            message=match["msg"].strip(),
            in_generated=_same_file(match["file"], source_path),
        )
        for match in _DIAG_RE.finditer(output)
    ]
    body, first = format_diagnostics(source, diagnostics, output)
    header = (
        f"{'C' if language == 'c' else 'C++'} compilation failed (exit status {returncode}) for {source_path}"
    )
    return CCompilationError(
        f"{header}:\n{body}",
        compiler_output=output,
        dsl_file=first[0] if first else None,
        dsl_line=first[1] if first else None,
        command=command,
        source_path=source_path,
    )

"""NVRTC's PTX of a CUDA module's device source: the same source, headers and options as its cubin, compiled for
the virtual architecture of the cubin's real one (sm_90a -> compute_90a), with line information, so that each PTX
line is linked to the DSL line its CUDA C came from."""

from __future__ import annotations

import re

from codegen.toolchain import nvrtc
from codegen.toolchain.headers import INCLUDE_DIR

LINE_INFO = "--generate-line-info"  # `.loc` directives: the line of the source each instruction came from
SOURCE_NAME = "module.cu"
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', re.MULTILINE)
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)(?:.*inlined_at\s+(\d+)\s+(\d+))?")


def compile_ptx(source: str, arch: str) -> str:
    """The PTX NVRTC makes of a module's CUDA C `source` for `arch` ('sm_XY', its virtual 'compute_XY' twin), with
    the module's headers and line information; raises what `nvrtc.compile_ptx` raises."""
    return nvrtc.compile_ptx(source, arch, name=SOURCE_NAME, include_dirs=[str(INCLUDE_DIR)], options=[LINE_INFO])


def ptx_dsl_lines(ptx: str, source_lines: list[int | None]) -> list[int | None]:
    """For each line of `ptx`, the DSL line of the CUDA C its last `.loc` names (`source_lines`: the DSL line of
    each line of the CUDA C); code inlined from a function takes the line it was inlined at, code from a header
    keeps the line before it; None outside functions."""
    own = {int(m[1]) for m in _FILE.finditer(ptx) if m[2].endswith(SOURCE_NAME)}
    lines: list[int | None] = []
    current: int | None = None
    for text in ptx.splitlines():
        loc = _LOC.match(text)
        file, line = (loc[3], loc[4]) if loc and loc[3] else (loc[1], loc[2]) if loc else (None, None)
        if file is not None and int(file) in own and 0 < int(line) <= len(source_lines):
            current = source_lines[int(line) - 1] or current
        lines.append(current)
        if text.startswith("}"):
            current = None
    return lines

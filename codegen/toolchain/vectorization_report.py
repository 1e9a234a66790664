"""The vectorization report of a CPU module (`CompiledModule.report()`): for each loop of the generated C, at the
user's DSL line, whether the C compiler vectorized it (and how wide), or why not, whether it was versioned for
possible aliasing, and whether it runs in parallel (OpenMP).

The generated C is compiled once more, in a temporary directory, the way the CPU build compiles it
(`compiler.compile_shared_library`: the compiler, flags, workarounds and the project's include directories)
plus the compiler's optimization remarks:
GCC's `-fopt-info-vec-all-internals` (its messages come in groups, one per loop, each opened by `Analyzing loop at
file:L`) or Clang's `-Rpass*=loop-vectorize` (a verdict at the loop's line, after the analysis remarks that say
why, at the statement they blame).

The loops are found in the C text: the emitter writes `for (...) {` / `while (...) {` on one line and the closing
`}` alone at the same indentation; `#pragma omp parallel for` precedes a parallel loop (`collapse(n)` makes the n
loops below it parallel). A compiler message names a loop by its `for` line, or (an OpenMP loop GCC outlines into
a function of its own, a loop whose header it has rewritten) by a statement of its body; then it goes to the
innermost loop around that statement that no message names by its own line. The `// <file N>:line` markers
(`codegen.toolchain.compiler`) map each loop, and a reason's statement, to the DSL line, the file named by its path
in the module's table (`codegen.toolchain.source_files`).
"""

from __future__ import annotations

import linecache
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from .cache import PROJECT_INCLUDE_DIRS
from .compiler import (
    DEFAULT_C_FLAGS,
    compile_shared_library,
    compiler_version,
    find_c_compiler,
    marker_at,
    marker_table,
)
from .source_files import SourceFiles

__all__ = [
    "LoopReport",
    "VectorizationReport",
    "vectorization_report",
    "LoopVerdict",
    "parse_gcc_remarks",
    "parse_clang_remarks",
    "plain_reason",
    "CLoop",
    "find_loops",
    "assign_verdicts",
    "report_loops",
]

GCC_REMARK_FLAGS: tuple[str, ...] = ("-fopt-info-vec-all-internals",)
"""GCC: every vectorizer message, grouped by loop (the top-level verdicts and the analysis behind them)."""

CLANG_REMARK_FLAGS: tuple[str, ...] = (
    "-Rpass=loop-vectorize", "-Rpass-missed=loop-vectorize", "-Rpass-analysis=loop-vectorize",
)
"""Clang: the loop vectorizer's remarks (vectorized, missed, and the analysis saying why)."""

NOT_ANALYZED = "the compiler did not analyze it (unrolled completely or removed before vectorization)"
"""The reason of a loop the compiler says nothing about."""


@dataclass(frozen=True)
class LoopReport:
    """One loop of the generated C: its DSL `file`, `line` and `source` text, its own `c_line`, whether it runs in
    `parallel` (OpenMP), whether it was `vectorized` (with `vector_bytes` and, where its element type is clear,
    `lanes`), whether it was `versioned_for_alias` (a run-time check of overlapping arrays picks the vector or the
    scalar copy), and the `reason` it was not vectorized (plain words; None when it was)."""

    file: str
    line: int
    source: str
    c_line: int
    parallel: bool
    vectorized: bool
    vector_bytes: int | None = None
    lanes: int | None = None
    versioned_for_alias: bool = False
    reason: str | None = None

    @property
    def location(self) -> str:
        """`file.py:line`, with the file's base name."""
        return f"{os.path.basename(self.file)}:{self.line}"

    @property
    def verdict(self) -> str:
        """What happened to the loop, in words: `parallel (OpenMP); vectorized, 64-byte vectors (16 lanes)`."""
        parts = ["parallel (OpenMP)"] if self.parallel else []
        if self.vectorized:
            width = [f"{self.vector_bytes}-byte vectors"] if self.vector_bytes else []
            if self.lanes:
                width.append(f"({self.lanes} lanes)" if width else f"{self.lanes} lanes")
            parts.append(", ".join(["vectorized", " ".join(width)]) if width else "vectorized")
            if self.versioned_for_alias:
                parts.append("versioned for possible aliasing")
        else:
            parts.append(f"not vectorized: {self.reason}")
        return "; ".join(parts)

    def __str__(self) -> str:
        return f"{self.location}  {self.source}  {self.verdict}"


@dataclass(frozen=True)
class VectorizationReport:
    """The loops of a module's generated C in source order (`loops`), and the `compiler` that judged them;
    `str()` is a table, one line per loop: DSL location, DSL source, verdict."""

    loops: tuple[LoopReport, ...]
    compiler: str

    def __iter__(self) -> Iterator[LoopReport]:
        return iter(self.loops)

    def __len__(self) -> int:
        return len(self.loops)

    def __str__(self) -> str:
        if not self.loops:
            return "(no loops)"
        where = max(len(loop.location) for loop in self.loops)
        text = max(len(loop.source) for loop in self.loops)
        return "\n".join(f"{loop.location:<{where}}  {loop.source:<{text}}  {loop.verdict}" for loop in self.loops)


# ----------------------------------------------------------------------------------------------------
# Compiling with remarks


def vectorization_report(source: str, files: SourceFiles | None = None) -> VectorizationReport:
    """Compile the generated C `source` of a CPU module as its build did, with the compiler's vectorization
    remarks, and report each loop (see the module docstring) at the DSL line of its file in `files`, the module's
    table of the files its source names (`codegen.toolchain.source_files`). Raises `CompilerNotFoundError` without
    a compiler and `CCompilationError` when the compiler rejects the source or does not finish in time."""
    files = SourceFiles() if files is None else files
    compiler = find_c_compiler("c")
    version = compiler_version(compiler)
    clang = "clang" in version.lower()
    includes = tuple(f"-I{os.path.abspath(d)}" for d in PROJECT_INCLUDE_DIRS)
    remarks = CLANG_REMARK_FLAGS if clang else GCC_REMARK_FLAGS
    with tempfile.TemporaryDirectory(prefix="hidet_lang_report_") as directory, files.in_effect():
        library = Path(directory) / "module.so"  # the build's compilation, its source beside it as module.c
        output = compile_shared_library(source, library, compiler=compiler,
                                        flags=(*DEFAULT_C_FLAGS, *includes, *remarks))
        source_path = library.with_suffix(".c")
    parse = parse_clang_remarks if clang else parse_gcc_remarks
    return VectorizationReport(loops=report_loops(source, parse(output, str(source_path)), files), compiler=version)


# ----------------------------------------------------------------------------------------------------
# What the compiler said about each loop


@dataclass
class LoopVerdict:
    """What the compiler said about the loop it names at C line `c_line` (its `for` line or a statement inside):
    `vectorized` (True, False, or None: no verdict), the vector width, alias versioning, the raw `reason` (with
    the C line `reason_line` of the statement it names), and, from GCC's analysis, its messages (`details`, with
    their C lines) and the scalar types of its vector types (`element_types`)."""

    c_line: int
    vectorized: bool | None = None
    vector_bytes: int | None = None
    lanes: int | None = None
    versioned_for_alias: bool = False
    reason: str | None = None
    reason_line: int | None = None
    details: list[tuple[str, int]] = field(default_factory=list)
    element_types: set[str] = field(default_factory=set)


_GCC_GROUP_RE = re.compile(r"^Analyzing loop at (?P<file>.+):(?P<line>\d+)\s*$")
_GCC_MESSAGE_RE = re.compile(
    r"^(?P<file>.+?):(?P<line>\d+):(?:\d+:)? (?P<kind>optimized|missed|note): (?P<indent> *)(?P<msg>.*?)\s*$"
)
_GCC_VECTORIZED_RE = re.compile(r"loop vectorized using (?:(?P<bytes>\d+) byte|variable length) vectors")
_GCC_VECTYPE_RE = re.compile(r"vectype: vector\(\d+\) (?P<type>[\w ]+)$")

_GCC_TYPE_BYTES = {
    "_Float16": 2, "float": 4, "double": 8, "signed char": 1, "unsigned char": 1, "char": 1, "short int": 2,
    "short unsigned int": 2, "int": 4, "unsigned int": 4, "long int": 8, "long unsigned int": 8,
    "long long int": 8, "long long unsigned int": 8,
}
"""Bytes of the scalar types GCC names in its vectypes, for the lanes of a vectorized loop of one element type."""


def parse_gcc_remarks(output: str, source_path: str) -> list[LoopVerdict]:
    """Parse GCC's `-fopt-info-vec-all-internals` `output` for `source_path` into one verdict per loop group.

    A group runs from `Analyzing loop at file:L` to the next one or to GCC's `vectorized N loops in function`.
    `optimized: loop vectorized using B byte vectors` (the widest, when an epilogue is vectorized too) and
    `loop versioned for vectorization because of possible aliasing` make a vectorized verdict; `missed: couldn't
    vectorize loop` a missed one, whose reason is the next top-level `missed:` message (GCC's messages of the
    analysis are indented further). GCC's final reason `no vectype for stmt` comes from its last attempt, with no
    vector mode at all; the dependence or access that stopped the other attempts is the better reason then."""
    verdicts: list[LoopVerdict] = []
    current: LoopVerdict | None = None
    awaiting_reason = False
    for text in output.splitlines():
        group = _GCC_GROUP_RE.match(text)
        if group is not None:
            current = LoopVerdict(int(group["line"])) if _same_path(group["file"], source_path) else None
            awaiting_reason = False
            if current is not None:
                verdicts.append(current)
            continue
        message = _GCC_MESSAGE_RE.match(text)
        if current is None or message is None or not _same_path(message["file"], source_path):
            continue
        kind, msg, top = message["kind"], message["msg"], not message["indent"]
        if kind == "note" and re.match(r"vectorized \d+ loops? in function", msg):
            current = None
            continue
        vectype = _GCC_VECTYPE_RE.search(msg) if kind == "note" else None
        if vectype is not None:
            current.element_types.add(vectype["type"].strip())
        vectorized = _GCC_VECTORIZED_RE.search(msg) if kind == "optimized" else None
        if vectorized is not None:
            current.vectorized = True
            if vectorized["bytes"]:
                current.vector_bytes = max(current.vector_bytes or 0, int(vectorized["bytes"]))
        elif kind == "optimized" and "versioned for vectorization because of possible aliasing" in msg:
            current.versioned_for_alias = True
        elif kind == "missed" and top and msg.startswith("couldn't vectorize loop"):
            current.vectorized = False if current.vectorized is None else current.vectorized
            awaiting_reason = True
        elif kind == "missed" and top and awaiting_reason:
            current.reason, current.reason_line = msg, int(message["line"])
            awaiting_reason = False
        elif kind == "missed" and not top:
            current.details.append((msg, int(message["line"])))
    for verdict in verdicts:
        _gcc_finish(verdict)
    return verdicts


def _gcc_finish(verdict: LoopVerdict) -> None:
    """Set the lanes of a vectorized loop of one element type; prefer a telling analysis message to GCC's final
    `no vectype for stmt`."""
    types = verdict.element_types
    if verdict.vector_bytes and len(types) == 1 and next(iter(types)) in _GCC_TYPE_BYTES:
        verdict.lanes = verdict.vector_bytes // _GCC_TYPE_BYTES[next(iter(types))]
    if verdict.reason is not None and "no vectype" in verdict.reason:
        for clue in ("not affine", "gather/scatter", "dependence"):
            telling = next((d for d in verdict.details if clue in d[0]), None)
            if telling is not None:
                verdict.reason, verdict.reason_line = telling
                break


_CLANG_REMARK_RE = re.compile(
    r"^(?P<file>.+?):(?P<line>\d+):(?:\d+:)? remark: (?P<msg>.*?)\s*(?:\[-R[\w=-]+\])?\s*$"
)
_CLANG_VECTORIZED_RE = re.compile(r"vectorized loop \(vectorization width: (?P<width>\d+)")


def parse_clang_remarks(output: str, source_path: str) -> list[LoopVerdict]:
    """Parse Clang's `-Rpass*=loop-vectorize` remarks in `output` for `source_path`: one verdict per loop named.

    `vectorized loop (vectorization width: W, interleaved count: N)` at a loop's line is vectorized with W lanes;
    `loop not vectorized` there is missed, for the reason of the analysis remarks before it (`loop not vectorized:
    <reason>`, the cost model's), which name the loop or the statement that stopped it; `interleaved loop` is
    interleaved only. An analysis remark that no verdict follows is a missed verdict at its own line."""
    verdicts: dict[int, LoopVerdict] = {}
    pending: list[tuple[str, int]] = []  # analysis remarks (reason, line) awaiting their loop's verdict
    for text in output.splitlines():
        remark = _CLANG_REMARK_RE.match(text)
        if remark is None or not _same_path(remark["file"], source_path):
            continue
        line, msg = int(remark["line"]), remark["msg"]
        vectorized = _CLANG_VECTORIZED_RE.search(msg)
        if vectorized is not None:
            verdict = verdicts.setdefault(line, LoopVerdict(line))
            verdict.vectorized, verdict.lanes = True, int(vectorized["width"])
            pending.clear()
        elif msg == "loop not vectorized" or msg.startswith("interleaved loop"):
            verdict = verdicts.setdefault(line, LoopVerdict(line))
            verdict.vectorized = bool(verdict.vectorized)
            reasons = pending or ([(msg, line)] if msg.startswith("interleaved") else [])
            if reasons and verdict.reason is None:
                verdict.reason, verdict.reason_line = reasons[0]
            pending.clear()
        elif msg.startswith("loop not vectorized:") or "cost-model" in msg:
            pending.append((msg.removeprefix("loop not vectorized:").strip(), line))
    for reason, line in pending:
        verdict = verdicts.setdefault(line, LoopVerdict(line, vectorized=False))
        verdict.reason, verdict.reason_line = verdict.reason or reason, verdict.reason_line or line
    return list(verdicts.values())


def _same_path(reported: str, source_path: str) -> bool:
    """Whether a path in a compiler message names the compiled source (not an included header)."""
    return reported == source_path or os.path.basename(reported) == os.path.basename(source_path)


# ----------------------------------------------------------------------------------------------------
# Plain words


_REASONS: tuple[tuple[str, str], ...] = (
    ("control flow in loop", "a conditional in the loop body"),
    ("loop control flow is not understood", "control flow it cannot follow (a break, a conditional exit)"),
    ("two or more consecutive inner loops", "it holds several loops"),
    ("multiple nested loops", "it holds nested loops"),
    ("unsupported use in stmt", "a reduction it may not reorder (attrs.fast_math allows it)"),
    ("reorder floating-point", "a reduction it may not reorder (attrs.fast_math allows it)"),
    ("latch block not empty", "code between the exit test and the next iteration (latch block not empty)"),
    ("number of iterations cannot be computed", "an iteration count it cannot compute before the loop"),
    ("number of loop iterations", "an iteration count it cannot compute before the loop"),
    ("dependence", "a possible dependence between iterations"),
    ("unsafe dependent memory operations", "a possible dependence between iterations"),
    ("not affine", "an address that is not a fixed step per iteration (an indirect or possibly wrapping index)"),
    ("gather/scatter", "an address that is not a fixed step per iteration (an indirect or possibly wrapping index)"),
    ("not enough data-refs", "an access pattern too complicated to vectorize"),
    ("complicated access pattern", "an access pattern too complicated to vectorize"),
    ("function calls or data references that cannot be analyzed", "a call or a memory access it cannot analyze"),
    ("call instruction cannot be vectorized", "a call with no vector version"),
    ("no vectype", "no vector type for one of its statements"),
    ("unsupported data-type", "an element type with no vector instructions"),
    ("relevant stmt not supported", "an operation with no vector instruction"),
    ("instruction cannot be vectorized", "an operation with no vector instruction"),
    ("value used after loop", "a value used after the loop"),
    ("could not be identified as reduction", "a value used after the loop that is not a reduction"),
    ("not profitable", "not worthwhile by the compiler's cost model"),
    ("not beneficial", "not worthwhile by the compiler's cost model"),
    ("iteration count smaller than", "too few iterations"),
    ("iteration count too small", "too few iterations"),
    ("unsupported loop form", "a loop shape it cannot vectorize (a break, several exits)"),
    ("multiple exits", "a loop shape it cannot vectorize (a break, several exits)"),
    ("interleaved loop", "interleaved, not vectorized (not worthwhile by the compiler's cost model)"),
)
"""(what the compiler's message contains, the plain words for it), first match wins."""

_LOOP_LEVEL_REASONS: tuple[str, ...] = (
    "consecutive inner loops", "multiple nested loops", "number of iterations", "number of loop iterations",
    "latch block", "not profitable", "not beneficial", "iteration count", "loop form", "multiple exits",
    "interleaved loop", "control flow is not understood",
)
"""Reasons about the loop as a whole: the line the compiler names them at (maybe a statement inside) is not told."""

_CALL_RE = re.compile(r"statement clobbers memory:.*?(?:=\s*)?(?P<name>[A-Za-z_][\w.]*)\s*\(")
_SSA_RE = re.compile(r"\s\S*\b\w*_\d+\b.*$")


def plain_reason(message: str) -> str:
    """The compiler's reason `message` for not vectorizing a loop, in plain words: a small table of the common ones,
    else its own text with the GIMPLE statement or SSA names (`_37`, `e_55`) cut off."""
    call = _CALL_RE.search(message)
    if call is not None:
        return f"a call with no vector version ({call['name']})"
    if "statement clobbers memory" in message:
        return "a call with no vector version"
    for clue, words in _REASONS:
        if clue in message:
            return words
    text = message.removeprefix("not vectorized").lstrip(":, ")
    return _SSA_RE.sub("", text).rstrip(" :,.;") or message


# ----------------------------------------------------------------------------------------------------
# The loops of the C text, and the report


@dataclass(frozen=True)
class CLoop:
    """A loop of the generated C: the lines of its header, of the first pragma before it (the header's line when
    none) and of its closing brace, and whether it is parallel."""

    c_line: int
    first_line: int
    end_line: int
    parallel: bool

    def contains(self, c_line: int) -> bool:
        """Whether C line `c_line` is in the loop (its pragmas, header, body or closing brace)."""
        return self.first_line <= c_line <= self.end_line


_LOOP_RE = re.compile(r"^(?P<indent>\s*)(?:for|while) \(.*\{\s*$")
_COLLAPSE_RE = re.compile(r"collapse\((?P<n>\d+)\)")


def find_loops(source: str) -> list[CLoop]:
    """The `for` and `while` loops of the generated C `source`, in source order (see the module docstring)."""
    lines = source.splitlines()
    loops: list[CLoop] = []
    collapsed = 0  # loops still to come of a `collapse(n)` parallel loop
    for index, text in enumerate(lines):
        header = _LOOP_RE.match(text)
        if header is None:
            continue
        indent = header["indent"]
        end = next((j for j in range(index + 1, len(lines)) if lines[j] == f"{indent}}}"), len(lines) - 1)
        first = index
        while first > 0 and lines[first - 1].lstrip().startswith("#pragma"):
            first -= 1
        pragma = " ".join(line.strip() for line in lines[first:index])
        parallel = "#pragma omp parallel for" in pragma
        if parallel:
            collapse = _COLLAPSE_RE.search(pragma)
            collapsed = int(collapse["n"]) - 1 if collapse else 0
        elif collapsed and text.lstrip().startswith("for"):
            parallel, collapsed = True, collapsed - 1
        loops.append(CLoop(index + 1, first + 1, end + 1, parallel))
    return loops


def assign_verdicts(loops: list[CLoop], verdicts: list[LoopVerdict]) -> dict[int, list[LoopVerdict]]:
    """The verdicts of each loop (by its C line): a verdict at a loop's header or pragma line is that loop's; one at
    a line inside goes to the innermost loop around it that no verdict names by its own lines."""
    by_line = {line: loop for loop in loops for line in range(loop.first_line, loop.c_line + 1)}
    named = {by_line[v.c_line].c_line for v in verdicts if v.c_line in by_line}
    assigned: dict[int, list[LoopVerdict]] = {}
    for verdict in verdicts:
        loop = by_line.get(verdict.c_line)
        if loop is None:
            around = [lp for lp in loops if lp.contains(verdict.c_line) and lp.c_line not in named]
            loop = max(around, key=lambda lp: lp.c_line, default=None)
        if loop is not None and _about_inner_loops(verdict) and not _holds_a_loop(loop, loops):
            # an outlined OpenMP loop named by its first statement, itself a loop: the verdict is the outer one's
            loop = max((lp for lp in loops if lp is not loop and lp.contains(loop.c_line)),
                       key=lambda lp: lp.c_line, default=loop)
        if loop is not None:
            assigned.setdefault(loop.c_line, []).append(verdict)
    return assigned


def _about_inner_loops(verdict: LoopVerdict) -> bool:
    """Whether the verdict's reason is that the loop holds other loops."""
    return verdict.reason is not None and ("nested loops" in verdict.reason or "inner loops" in verdict.reason)


def _holds_a_loop(loop: CLoop, loops: list[CLoop]) -> bool:
    """Whether another of `loops` lies inside `loop`."""
    return any(other is not loop and loop.contains(other.c_line) for other in loops)


def report_loops(source: str, verdicts: list[LoopVerdict], files: SourceFiles | None = None) -> tuple[LoopReport, ...]:
    """One `LoopReport` per loop of the generated C `source`, from the compiler's `verdicts`; the files of its
    markers named by their paths in `files` (see `compiler.marker_table`)."""
    table = marker_table(source, files)
    loops = find_loops(source)
    assigned = assign_verdicts(loops, verdicts)
    reports = []
    for loop in loops:
        file, line = marker_at(table, loop.c_line) or ("<generated C>", loop.c_line)
        base = LoopReport(file=file, line=line, source=linecache.getline(file, line).strip(), c_line=loop.c_line,
                          parallel=loop.parallel, vectorized=False)
        reports.append(_merge(base, loop, assigned.get(loop.c_line, []), table))
    return tuple(reports)


def _merge(base: LoopReport, loop: CLoop, verdicts: list[LoopVerdict],
           table: tuple[list[int], list[tuple[str, int]]]) -> LoopReport:
    """`base` with the compiler's `verdicts` on `loop` (vectorized by any of them: the widest; else the first
    reason given), the reason in plain words and, when it is about a statement of another DSL line inside the
    loop, that line."""
    done = [v for v in verdicts if v.vectorized]
    if done:
        widest = max(done, key=lambda v: v.vector_bytes or 0)
        return replace(base, vectorized=True, vector_bytes=widest.vector_bytes, lanes=widest.lanes,
                       versioned_for_alias=any(v.versioned_for_alias for v in done))
    given = next((v for v in verdicts if v.reason), None)
    if given is None:
        reason = "no reason given" if verdicts else NOT_ANALYZED
        return replace(base, reason=reason)
    reason = plain_reason(given.reason or "")
    of_a_statement = not any(clue in given.reason for clue in _LOOP_LEVEL_REASONS)
    inside = of_a_statement and given.reason_line is not None and loop.contains(given.reason_line)
    where = marker_at(table, given.reason_line) if inside else None
    if where is not None and where != (base.file, base.line):
        reason += f" at line {where[1]}" if where[0] == base.file else f" at {os.path.basename(where[0])}:{where[1]}"
    return replace(base, reason=reason)

"""The user's files in generated source: named by tokens, so that the source does not depend on where they lie.

Generated C, CUDA C and C++ name each of the user's files by a token, `<file N>` (N counts a module's files in the
order its sources first name them), wherever the file would be named: the `// <file N>:<line>` markers, assertion
messages, the places its checks and its launchers report. The same program in two directories (a fresh clone, a
copied project) then gives the same source, hence the same compilation-cache key, and compiles once.

A module keeps its table (`SourceFiles`: token -> path) on the Python side. Every text of the compiled library that
comes back to the user (an assertion's or a check's message, a launch error, a compiler diagnostic mapped to the DSL
line, the vectorization report, the source shown by `CompiledModule.source`) has its tokens replaced by the real
paths through `SourceFiles.resolve`, the one place that does it. Compiler diagnostics are formatted deep in the
toolchain (the cache compiles, then `compiler.format_diagnostics` maps them), so a build puts its module's table in
effect around its compilations (`SourceFiles.in_effect`), and the formatting reads it (`files_in_effect`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["FILE_TOKEN_RE", "SourceFiles", "files_in_effect"]

FILE_TOKEN_RE = re.compile(r"<file (\d+)>")
"""A file's token in generated source (a pseudo-file name, as `<string>` is: `compiler._MARKER_RE` reads it)."""


class SourceFiles:
    """The files a module's generated sources name, each by its token `<file N>`, numbered in the order `token` is
    first asked for them (the emitters ask as they print, so the same IR gives the same numbers whatever the paths).
    """

    def __init__(self, paths: Iterable[str] = ()) -> None:
        self._paths: list[str] = []
        self._numbers: dict[str, int] = {}
        for path in paths:
            self.token(path)

    @property
    def paths(self) -> tuple[str, ...]:
        """The files, by number (what a module's record keeps: `SourceFiles(paths)` gives the table again)."""
        return tuple(self._paths)

    def token(self, path: str) -> str:
        """The token that names `path` in generated source, numbering it on first use."""
        number = self._numbers.get(path)
        if number is None:
            number = self._numbers[path] = len(self._paths)
            self._paths.append(path)
        return f"<file {number}>"

    def where(self, path: str, line: int) -> str:
        """`<file N>:line`: a DSL location as generated source writes it."""
        return f"{self.token(path)}:{line}"

    def path(self, name: str) -> str:
        """The file a name read from generated source stands for: the path of a token of this table, else `name`."""
        match = FILE_TOKEN_RE.fullmatch(name)
        if match is None or int(match[1]) >= len(self._paths):
            return name
        return self._paths[int(match[1])]

    def resolve(self, text: str) -> str:
        """`text` (a message, a diagnostic, a report, generated source) with each token of this table replaced by
        the path it stands for."""
        if "<file " not in text:
            return text
        return FILE_TOKEN_RE.sub(lambda match: self.path(match[0]), text)

    @contextmanager
    def in_effect(self) -> Iterator[SourceFiles]:
        """While in this context, compiler diagnostics name the files of this table (`files_in_effect`)."""
        reset = _in_effect.set(self)
        try:
            yield self
        finally:
            _in_effect.reset(reset)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SourceFiles) and self._paths == other._paths

    def __repr__(self) -> str:
        return f"SourceFiles({self._paths!r})"


_in_effect: ContextVar[SourceFiles | None] = ContextVar("hidet_lang_source_files", default=None)


def files_in_effect() -> SourceFiles:
    """The table of the module being built (`SourceFiles.in_effect`); an empty one, which resolves nothing, outside
    a build."""
    found = _in_effect.get()
    return SourceFiles() if found is None else found

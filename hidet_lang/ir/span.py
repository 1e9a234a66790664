"""Source positions: every IR node remembers the user's file, line and column it came from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Span:
    """A position in the user's Python source (1-based line, 0-based column as in `ast`)."""

    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"

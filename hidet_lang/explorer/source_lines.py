"""The DSL line each line of generated C or CUDA C came from, read from the `// file:line` markers the code
generators write before what a DSL line became."""

from __future__ import annotations

import re


def dsl_lines(source: str, filename: str) -> list[int | None]:
    """For each line of `source`, the line of `filename` it came from (the last marker naming that file above it,
    within the same function), or None."""
    marker = re.compile(r"^\s*//\s*(?:\S*/)?" + re.escape(filename) + r":(\d+)\s*$")
    lines: list[int | None] = []
    current: int | None = None
    for text in source.splitlines():
        match = marker.match(text)
        if match:
            current = int(match[1])
        elif text.startswith("}") or not text.strip():
            lines.append(current if text.startswith("}") else None)
            current = None if text.startswith("}") else current
            continue
        lines.append(current)
    return lines

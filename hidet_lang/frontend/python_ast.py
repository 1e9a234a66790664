"""Parsing Python source into `ast` trees, one thread at a time.

CPython 3.11 keeps the recursion depth of its AST constructors in state shared by the interpreter's threads, so two
threads parsing at once can corrupt it and fail with `SystemError: AST constructor recursion depth mismatch`
(seen when a tuning run's workers build script modules in threads). Every parse of the frontend goes through
`parse_python`, which takes a lock.
"""

from __future__ import annotations

import ast
import threading

_PARSING = threading.Lock()


def parse_python(source: str, mode: str = "exec") -> ast.AST:
    """`ast.parse(source, mode=mode)`, one thread at a time."""
    with _PARSING:
        return ast.parse(source, mode=mode)

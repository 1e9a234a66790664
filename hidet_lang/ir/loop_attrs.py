"""The `attrs` strings of `grid(...)` and `repeat(...)`: how each loop of the nest runs, one token per dimension.

A token is `.` (a plain loop), `u` (unrolled as the compiler sees fit), `uN` (unrolled by a factor of N), `u+`
(unrolled completely), `p` (parallel: OpenMP on the CPU) or `pN` (parallel on N threads); Hidet Script's grammar.
`'p2u+.'` is three dimensions. `parse_loop_attrs` turns a string into one `LoopAttr` per dimension. Like the task
mappings that take these strings (`hidet_lang.ir.mapping`), the module is plain Python: it imports nothing of the
project.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FULL_UNROLL = -1
"""The factor of a loop unrolled completely (`u+`)."""

_TOKEN = re.compile(r"\.|u\+|u\d+|u|p\d+|p")
_KINDS = {".": "", "u": "unroll", "p": "parallel"}  # the values of `hidet_lang.ir.stmt.LoopKind`


@dataclass(frozen=True)
class LoopAttr:
    """How one loop runs: its `kind` (a value of `LoopKind`: '' plain, 'unroll', 'parallel') and `factor` (see
    `ForStmt.factor`)."""

    kind: str
    factor: int = 0


def parse_loop_attrs(spec: str, ndim: int, where: str, kinds: str = ".up") -> tuple[LoopAttr, ...]:
    """The `ndim` loop attributes `spec` spells; ValueError naming `where` for a string that is not one token per
    dimension of the kinds in `kinds` ('.', 'u', 'p'), or a factor below 1."""
    tokens = _TOKEN.findall(spec)
    allowed = {".": "'.' plain", "u": "'u', 'uN' or 'u+' unrolled", "p": "'p' or 'pN' parallel"}
    grammar = ", ".join(allowed[k] for k in kinds)
    if "".join(tokens) != spec or len(tokens) != ndim or any(t[0] not in kinds for t in tokens):
        raise ValueError(f"{where} attrs {spec!r} must have one token per dimension ({ndim}), each {grammar}")
    attrs = []
    for token in tokens:
        factor = FULL_UNROLL if token == "u+" else int(token[1:] or 0)
        if token[1:].isdigit() and factor < 1:
            raise ValueError(f"{where} attrs {spec!r}: the factor of {token!r} must be at least 1")
        attrs.append(LoopAttr(_KINDS[token[0]], factor))
    return tuple(attrs)

"""Tensor dimensions: an int, or a symbolic size as a string. A symbolic size is a name (`'batch'`, a graph input's
size, bound when the graph runs) or a product of names and an int factor, which operators make (a reshape that
merges `batch` with 12 heads gives `'batch*12'`). Products have one canonical text, the names sorted and the
factor last (`'batch*seq*12'`), so that equal sizes are equal strings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

Dim = int | str


def factors(d: Dim) -> tuple[tuple[str, ...], int]:
    """The names (sorted, with repeats) and the int factor whose product `d` is."""
    if isinstance(d, int):
        return (), d
    *parts, last = d.split("*")
    if last.isdigit():
        return tuple(sorted(parts)), int(last)
    return tuple(sorted([*parts, last])), 1


def make_dim(names: Iterable[str], factor: int = 1) -> Dim:
    """The dimension that is the product of `names` and `factor` (an int when there are no names)."""
    names = sorted(names)
    if not names or factor == 0:
        return factor
    return "*".join([*names, *([str(factor)] if factor != 1 else [])])


def dim_product(dims: Iterable[Dim]) -> Dim:
    """The product of `dims`."""
    names: list[str] = []
    factor = 1
    for d in dims:
        more, k = factors(d)
        names += more
        factor *= k
    return make_dim(names, factor)


def dim_value(d: Dim, sizes: Mapping[str, int]) -> int:
    """The value of `d` when the names have the values `sizes`."""
    names, factor = factors(d)
    return factor * math.prod(sizes[n] for n in names)


def names_of(d: Dim) -> tuple[str, ...]:
    """The symbolic names `d` is made of (none for an int)."""
    return factors(d)[0]


def check_name(name: str) -> str:
    """`name` if it can name a symbolic dimension (a Python identifier), else a ValueError."""
    if not name.isidentifier():
        raise ValueError(f"a symbolic dimension is named by an identifier such as 'batch', got {name!r}")
    return name

"""What a template's parameters may be, and the error a template raises for parameters it cannot schedule.

Sizes are ints (known when the kernel is built) or strings (symbolic dimensions, parameters of the kernel).
Schedule parameters (tile sizes, thread counts) never depend on the sizes; a combination that the template or
the hardware cannot honour raises `ScheduleError`, which a tuner skips.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from hidet_lang.ir.types import DataType, dtype_from_name

Size = int | str
Tile = TypeVar("Tile", bound=tuple[int, ...])


class ScheduleError(ValueError):
    """A template cannot be instantiated with these schedule parameters (or for this dtype)."""


def check_sizes(template: str, sizes: Mapping[str, Size]) -> None:
    """ValueError naming `template` unless every size is a positive int or a symbolic name (an identifier)."""
    for name, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, (int, str)):
            raise ValueError(f"{template}: size '{name}' must be an int or a symbolic name, got {size!r}")
        if isinstance(size, int) and size < 1:
            raise ValueError(f"{template}: size '{name}' must be positive, got {size}")
        if isinstance(size, str) and not size.isidentifier():
            raise ValueError(f"{template}: symbolic size '{name}' must be an identifier, got {size!r}")


def require(condition: bool, template: str, message: str) -> None:
    """ScheduleError `template: message` unless `condition` holds."""
    if not condition:
        raise ScheduleError(f"{template}: {message}")


def template_dtype(template: str, dtype: str | DataType, allowed: tuple[str, ...]) -> DataType:
    """The data type `dtype` names, if `template` supports it (ScheduleError otherwise)."""
    resolved = dtype if isinstance(dtype, DataType) else dtype_from_name(dtype)
    require(resolved.name in allowed, template, f"dtype {resolved.name} is not supported (supported: "
            f"{', '.join(allowed)})")
    return resolved


def tile_for_blocks(tiles: Sequence[Tile], batch: Size, m: Size, n: Size, enough: int) -> Tile:
    """Of `tiles` (tuples starting with block_m and block_n, largest first), those that fit the product: no side
    longer than its known size (a block's rows or columns past it only idle), the smallest tile's sides always
    allowed. Of those, the first that cuts a product of these sizes into at least `enough` blocks, the last when
    none does; the first when a size is symbolic (known only at run time, it may be large)."""
    fitting = [tile for tile in tiles
               if all(not isinstance(size, int) or tile[side] <= max(tiles[-1][side], size)
                      for side, size in ((0, m), (1, n)))]
    if not all(isinstance(s, int) for s in (batch, m, n)):
        return fitting[0]
    for tile in fitting:
        if batch * -(-m // tile[0]) * -(-n // tile[1]) >= enough:  # type: ignore[operator]
            return tile
    return fitting[-1]

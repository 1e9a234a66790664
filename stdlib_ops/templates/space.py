"""Tuning spaces: the schedule parameters a template may be tuned over, declared next to its schedule.

A `TuningSpace` lists, for each keyword parameter of a template (tile and micro-kernel shapes, never the input
sizes), the values a tuner may try, the default point (what an untuned build uses, so defaults stay good without
tuning) and optionally a constraint that a point must satisfy. A template declares its space with
`declare_space(space)` as a decorator; `space_of(template)` finds it again, and `template_ref(template)` names the
template as plain data (`module:qualname`) that a worker process resolves with `resolve_template`.

```python
@declare_space(TuningSpace({"kc": (None, 128, 384), "nc": (None, 256, 1024)}, default={"kc": None, "nc": None}))
def matmul_cpu(batch, m, n, k, dtype="float32", *, kc=None, nc=None): ...
```
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Point = dict[str, Any]
"""One choice of schedule parameters: parameter name -> value (ints, strings or bools: JSON values)."""


class TuningSpace:
    """The schedule parameters of a template: `choices` (name -> the values to try), the `default` point (one value
    per name, among the choices) and a `constraint` every point satisfies (all points when None)."""

    def __init__(self, choices: Mapping[str, Sequence[Any]], default: Mapping[str, Any],
                 constraint: Callable[[Point], bool] | None = None) -> None:
        self.choices = {name: tuple(values) for name, values in choices.items()}
        self.default: Point = dict(default)
        self.constraint = constraint
        if not self.choices or any(not values for values in self.choices.values()):
            raise ValueError("TuningSpace: every parameter needs at least one value")
        if not self.contains(self.default):
            raise ValueError(f"TuningSpace: the default {self.default} is not a point of the space {self.choices}")

    def points(self) -> list[Point]:
        """Every point of the space, the default first, then in the order of the choices."""
        names = list(self.choices)
        found = [self.default]
        for values in itertools.product(*self.choices.values()):
            point = dict(zip(names, values))
            if point != self.default and (self.constraint is None or self.constraint(point)):
                found.append(point)
        return found

    def contains(self, point: object) -> bool:
        """Whether `point` is a point of the space: a dict with a value among the choices for every parameter (and
        no other key) that satisfies the constraint."""
        if not isinstance(point, dict) or set(point) != set(self.choices):
            return False
        if any(not _is_choice(point[name], values) for name, values in self.choices.items()):
            return False
        return self.constraint is None or bool(self.constraint(point))

    def __repr__(self) -> str:
        return f"TuningSpace({self.choices}, default={self.default})"


def consistent_tiles(block: tuple[str, str], part: tuple[str, str], parts: range) -> Callable[[Point], bool]:
    """A constraint on a point's block tile (its parameters `block`: rows, columns) and the tile of each of the
    block's parts (`part`: a thread's or a warp's): either all four chosen by size (None) or a tile the parts
    cover, each side of the block a multiple of the part's, with a number of parts in `parts`."""

    def constraint(point: Point) -> bool:
        tile = [point[name] for name in (*block, *part)]
        if any(t is None for t in tile):
            return all(t is None for t in tile)
        rows, cols, part_rows, part_cols = tile
        return rows % part_rows == 0 and cols % part_cols == 0 and (rows // part_rows) * (cols // part_cols) in parts

    return constraint


def _is_choice(value: object, values: tuple[Any, ...]) -> bool:
    """`value` equals one of `values` and has its type (JSON's 1 == True must not make True a tile size)."""
    return any(type(value) is type(v) and value == v for v in values)


SPACES: dict[str, TuningSpace] = {}
"""The declared tuning spaces, by `template_ref` of their template."""


def template_ref(template: Callable[..., Any]) -> str:
    """The name of a module-level template function as plain data: `module:qualname`."""
    return f"{template.__module__}:{template.__qualname__}"


def resolve_template(ref: str) -> Callable[..., Any]:
    """The template function `template_ref` named `ref` (imported in this process)."""
    module_name, _, qualname = ref.partition(":")
    found: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def declare_space(space: TuningSpace) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: declare `space` as the tuning space of the (module-level) template it decorates."""

    def decorate(template: Callable[..., Any]) -> Callable[..., Any]:
        SPACES[template_ref(template)] = space
        return template

    return decorate


def space_of(template: Callable[..., Any]) -> TuningSpace | None:
    """The tuning space `template` declares, or None."""
    return SPACES.get(template_ref(template))

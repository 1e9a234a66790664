"""Pictures of a program's values as SVG: a task mapping as a grid of tasks coloured and numbered by the worker that
owns each, a layout as a grid of the offsets its indices reach. Built on the mappings' own semantics (`owners`) and
the layouts' (`layout(*indices)`), so a picture shows what the compiler lowers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from typing import Any

from hidet_lang.ir.layout import Layout
from hidet_lang.ir.mapping import TaskMapping

MAX_CELLS_PER_SIDE = 64  # a larger grid is drawn in part, which the picture's note says
CELL = 26


@dataclass(frozen=True)
class Picture:
    """One drawing for the page: what it shows (`kind`: 'mapping' or 'layout'), a title, a note, the SVG."""

    kind: str
    title: str
    note: str
    svg: str

    def as_json(self) -> dict[str, str]:
        """The picture as the page receives it."""
        return {"kind": self.kind, "title": self.title, "note": self.note, "svg": self.svg}


def worker_colour(worker: int) -> str:
    """A light colour of its own for each worker (hues spread by the golden angle)."""
    return f"hsl({(worker * 137.508) % 360:.1f}, 70%, 82%)"


def grid_svg(rows: int, cols: int, text: Callable[[int, int], str], colour: Callable[[int, int], str]) -> str:
    """An SVG grid of `rows` x `cols` cells, each with `text(r, c)` on `colour(r, c)`, row and column numbers on the
    sides."""
    width, height = (cols + 1) * CELL, (rows + 1) * CELL
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="monospace" font-size="10" text-anchor="middle">']
    for c in range(cols):
        parts.append(f'<text x="{(c + 1.5) * CELL}" y="{CELL * 0.65}" fill="#666">{c}</text>')
    for r in range(rows):
        y = (r + 1) * CELL
        parts.append(f'<text x="{CELL / 2}" y="{y + CELL * 0.65}" fill="#666">{r}</text>')
        for c in range(cols):
            x = (c + 1) * CELL
            parts.append(f'<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="{colour(r, c)}" '
                         f'stroke="#fff"/><text x="{x + CELL / 2}" y="{y + CELL * 0.65}">{escape(text(r, c))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _plane(shape: tuple[int, ...]) -> tuple[tuple[int, ...], int, int, str]:
    """The first 2-D plane of a grid of `shape` to draw: its leading indices, rows and columns (cut at
    MAX_CELLS_PER_SIDE), and a note on what is left out."""
    lead = (0,) * max(len(shape) - 2, 0)
    rows, cols = (1, shape[0]) if len(shape) == 1 else shape[-2:]
    notes = []
    if lead:
        notes.append(f"the plane [{', '.join([*map(str, lead), ':', ':'])}] of {len(shape)} dimensions")
    if rows > MAX_CELLS_PER_SIDE or cols > MAX_CELLS_PER_SIDE:
        notes.append(f"the first {min(rows, MAX_CELLS_PER_SIDE)} x {min(cols, MAX_CELLS_PER_SIDE)} cells")
    return lead, min(rows, MAX_CELLS_PER_SIDE), min(cols, MAX_CELLS_PER_SIDE), "; ".join(notes)


def _index(lead: tuple[int, ...], shape: tuple[int, ...], r: int, c: int) -> tuple[int, ...]:
    return (c,) if len(shape) == 1 else (*lead, r, c)


def mapping_picture(mapping: Any) -> Picture:
    """A task mapping as the grid of its tasks, each cell numbered and coloured by the worker that owns it."""
    shape = tuple(mapping.task_shape)
    owners = {task: worker for task, (worker, _) in mapping.owners().items()}
    lead, rows, cols, note = _plane(shape)

    def owner(r: int, c: int) -> int | None:
        return owners.get(_index(lead, shape, r, c))

    svg = grid_svg(rows, cols, lambda r, c: "" if owner(r, c) is None else str(owner(r, c)),
                   lambda r, c: "#eee" if owner(r, c) is None else worker_colour(owner(r, c)))
    title = f"{mapping}: {mapping.num_workers} workers, task shape {shape}"
    return Picture("mapping", title, note or "each cell: the worker that runs this task", svg)


def layout_picture(layout: Any) -> Picture:
    """A layout as the grid of its indices, each cell showing the offset the index reaches."""
    shape = tuple(layout.shape)
    lead, rows, cols, note = _plane(shape)

    def offset(r: int, c: int) -> int:
        return int(layout(*_index(lead, shape, r, c)))

    size = max(int(layout.size), 1)
    svg = grid_svg(rows, cols, lambda r, c: str(offset(r, c)),
                   lambda r, c: f"hsl(210, 60%, {92 - 40 * offset(r, c) / size:.0f}%)")
    return Picture("layout", f"{layout}: shape {shape}", note or "each cell: the offset of this index", svg)


def pictures_of(values: dict[str, Any]) -> list[Picture]:
    """Pictures of every task mapping and layout among `values` (a program's names and the mappings its kernels
    loop over), one per distinct value, in order."""
    pictures, seen = [], set()
    for name, value in values.items():
        if not isinstance(value, TaskMapping | Layout) or str(value) in seen:
            continue
        seen.add(str(value))
        picture = mapping_picture(value) if isinstance(value, TaskMapping) else layout_picture(value)
        pictures.append(Picture(picture.kind, f"{name} = {picture.title}", picture.note, picture.svg))
    return pictures


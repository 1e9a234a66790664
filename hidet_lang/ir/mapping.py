"""Task mappings: how the tasks of a task grid are assigned to workers (threads, warps, blocks).

A task mapping is an immutable value with a Python-side semantics that the compiler's lowering is tested
against:

- ``mapping.num_workers``: how many workers the mapping uses;
- ``mapping.task_shape``: the shape of the task grid it covers;
- ``mapping(worker)``: the tasks (index tuples into the task grid) that ``worker`` runs, in execution order.

Every mapping is a bijection from ``(worker, position in mapping(worker))`` onto the cells of the task grid,
and every worker runs the same number of tasks.

The building blocks are

- ``spatial(*shape)``: ``prod(shape)`` workers, one task each (worker ``w`` runs ``w`` unravelled over the
  dims, row-major by default);
- ``repeat(*shape)``: one worker that runs every task, in a loop nest (row-major by default);
- composition ``outer * inner`` (same number of dims): each outer task is split into an ``inner`` grid;
  worker ``w`` is outer worker ``w // inner.num_workers`` and inner worker ``w % inner.num_workers``, and
  runs the tasks ``outer_task * inner.task_shape + inner_task`` (elementwise), outer tasks outermost;
- the chained form ``spatial(4, 8).repeat(2, 2)``, which means ``spatial(4, 8) * repeat(2, 2)``;
- ``auto_map(*task_shape, workers=n)``, which picks ``repeat(...) * spatial(...)`` for ``n`` workers.

Inside a kernel, ``for i, j in mapping.on(threadIdx.x):`` runs the loop body once for each task of the
worker ``threadIdx.x``; ``on`` only records the pair (``MappingOn``), which the frontend consumes.

Example::

    >>> m = spatial(4, 8) * repeat(2, 2)
    >>> m.num_workers, m.task_shape
    (32, (8, 16))
    >>> m(5)
    [(0, 10), (0, 11), (1, 10), (1, 11)]

The module is pure Python and imports nothing from the rest of the project.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

from hidet_lang.ir.loop_attrs import LoopAttr, parse_loop_attrs

__all__ = [
    "ComposedMapping",
    "MappingOn",
    "MappingTypeError",
    "RepeatMapping",
    "SpatialMapping",
    "TaskMapping",
    "auto_map",
    "repeat",
    "spatial",
]

Task = tuple[int, ...]


class MappingTypeError(TypeError, ValueError):
    """An argument of a task-mapping function has the wrong type (e.g. a float or bool extent).

    It derives from both ``TypeError`` and ``ValueError``, so code that treats any bad argument as a
    ``ValueError`` catches it too.
    """


# ----------------------------------------------------------------------------------------------------------
# argument validation


def _as_int(value: Any, what: str) -> int:
    """``value`` as a Python int (numpy integers are converted); bools, floats and others are rejected."""
    if isinstance(value, bool):
        raise MappingTypeError(f"{what} must be an int, got the bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise MappingTypeError(f"{what} must be an int, got {type(value).__name__} {value!r}") from None


def _positive_int(value: Any, what: str) -> int:
    """``value`` as a positive Python int, or a ``MappingTypeError``/``ValueError`` naming ``what``."""
    v = _as_int(value, what)
    if v <= 0:
        raise ValueError(f"{what} must be a positive int, got {v}")
    return v


def _shape_args(args: tuple[Any, ...], func: str) -> tuple[int, ...]:
    """Normalizes ``f(4, 8)`` or ``f((4, 8))`` to the validated shape ``(4, 8)``."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    return _shape(args, func)


def _shape(shape: Any, func: str) -> tuple[int, ...]:
    """Validates a task shape: a non-empty sequence of positive ints."""
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Iterable):
        raise MappingTypeError(f"{func}: the shape must be a sequence of ints, got {shape!r}")
    shape = tuple(shape)
    if len(shape) == 0:
        raise ValueError(f"{func}: the shape needs at least one extent")
    return tuple(_positive_int(e, f"{func}: the extent of dim {i} in {shape!r}") for i, e in enumerate(shape))


def _ranks(ranks: Any, ndim: int, func: str) -> tuple[int, ...]:
    """Validates ``ranks`` (a permutation of ``range(ndim)``); ``None`` means row-major ``(0, 1, ...)``."""
    if ranks is None:
        return tuple(range(ndim))
    if isinstance(ranks, (str, bytes)) or not isinstance(ranks, Iterable):
        raise MappingTypeError(f"{func}: ranks must be a sequence of ints, got {ranks!r}")
    result = tuple(_as_int(r, f"{func}: ranks[{i}]") for i, r in enumerate(tuple(ranks)))
    if sorted(result) != list(range(ndim)):
        raise ValueError(
            f"{func}: ranks must be a permutation of {tuple(range(ndim))} (one rank per dim), got {result}"
        )
    return result


def _repeat_attrs(attrs: Any, ndim: int, func: str) -> str:
    """Validates repeat attrs (one token per dim, `hidet_lang.ir.loop_attrs`); ``None`` means all plain."""
    if attrs is None:
        return "." * ndim
    if not isinstance(attrs, str):
        raise MappingTypeError(f"{func}: attrs must be a str or None, got {type(attrs).__name__} {attrs!r}")
    parse_loop_attrs(attrs, ndim, func)
    return attrs


def _fmt_call(name: str, shape: tuple[int, ...], extra: Sequence[str] = ()) -> str:
    return f"{name}({', '.join([*map(str, shape), *extra])})"


# ----------------------------------------------------------------------------------------------------------
# mappings


class TaskMapping:
    """Base of task mappings: an immutable assignment of the cells of a task grid to workers.

    Subclasses are frozen, slotted dataclasses and compare structurally. They implement ``num_workers``,
    ``task_shape`` and ``_tasks``; everything else (calling, composition, printing, ``visualize``) is here.
    """

    __slots__ = ()

    @property
    def num_workers(self) -> int:
        """The number of workers the mapping assigns tasks to."""
        raise NotImplementedError

    @property
    def task_shape(self) -> tuple[int, ...]:
        """The shape of the task grid the mapping covers."""
        raise NotImplementedError

    def _tasks(self, worker: int) -> list[Task]:
        """The tasks of ``worker`` (already validated) in execution order."""
        raise NotImplementedError

    def _fmt(self) -> str:
        raise NotImplementedError

    def __call__(self, worker: int) -> list[Task]:
        """The tasks (index tuples into the task grid) of ``worker``, in execution order.

        Raises ``ValueError`` if ``worker`` is not an int (``MappingTypeError``, also a ``TypeError``) or is
        not in ``[0, num_workers)``.
        """
        w = _as_int(worker, "worker")
        n = self.num_workers
        if not 0 <= w < n:
            raise ValueError(f"worker {w} is out of range for {self}: it has {n} worker(s), 0..{n - 1}")
        return self._tasks(w)

    def __mul__(self, other: object) -> ComposedMapping:
        """``outer * inner``: the composition ``ComposedMapping(self, other)``."""
        if not isinstance(other, TaskMapping):
            return NotImplemented
        return ComposedMapping(self, other)

    def spatial(self, *shape: int, ranks: Sequence[int] | None = None) -> ComposedMapping:
        """The chained form: ``m.spatial(*shape, ranks=ranks)`` is ``m * spatial(*shape, ranks=ranks)``."""
        return self * spatial(*shape, ranks=ranks)

    def repeat(
        self, *shape: int, ranks: Sequence[int] | None = None, attrs: str | None = None
    ) -> ComposedMapping:
        """The chained form: ``m.repeat(*shape, ...)`` is ``m * repeat(*shape, ...)``."""
        return self * repeat(*shape, ranks=ranks, attrs=attrs)

    def on(self, worker: Any, bind_tuple: bool = False) -> MappingOn:
        """Binds the mapping to a worker (any object, usually an IR expression such as ``threadIdx.x``).

        ``for i, j in m.on(threadIdx.x):`` in a kernel iterates over the tasks of that worker; with one loop name
        (``for task in m.on(w)``) the name is the list of a task's coordinates when the task has several, or when
        ``bind_tuple`` is set (then a list of one for one-dimensional tasks), as in Hidet Script.
        """
        return MappingOn(mapping=self, worker=worker, bind_tuple=bind_tuple)

    def owners(self) -> dict[Task, tuple[int, int]]:
        """Maps every cell of the task grid to ``(worker, position of the cell in mapping(worker))``."""
        result: dict[Task, tuple[int, int]] = {}
        for w in range(self.num_workers):
            for k, task in enumerate(self._tasks(w)):
                result[task] = (w, k)
        return result

    def visualize(self) -> str:
        """A text picture of the task grid; each cell shows the worker that owns it.

        The first line names the mapping. A 1-D grid is one row; a 2-D grid has one row per first index,
        with the row index on the left and the column index on top; a grid with more dims is shown as one
        2-D picture per leading index, labelled like ``[1, :, :]``.
        """
        shape = self.task_shape
        owners = {task: worker for task, (worker, _) in self.owners().items()}
        width = max(len(str(self.num_workers - 1)), len(str(shape[-1] - 1)))
        lines = [f"{self}: {self.num_workers} worker(s), task shape {shape}"]
        if len(shape) == 1:
            lines += _grid_picture(lambda _r, c: owners.get((c,)), 1, shape[0], width, row_labels=False)
            return "\n".join(lines)
        for lead in product(*(range(e) for e in shape[:-2])):
            if lead:
                lines.append("[" + ", ".join([*map(str, lead), ":", ":"]) + "]")
            lines += _grid_picture(
                lambda r, c, lead=lead: owners.get((*lead, r, c)),
                shape[-2],
                shape[-1],
                width,
                row_labels=True,
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self._fmt()

    def __repr__(self) -> str:
        return self._fmt()


def _grid_picture(cell: Any, rows: int, cols: int, width: int, *, row_labels: bool) -> list[str]:
    """Lines of a 2-D picture: a column header, a rule, then one line per row (``cell(r, c)`` or '?')."""
    label_width = len(str(rows - 1)) if row_labels else 0
    header = " " * label_width + " |" + "".join(" " + str(c).rjust(width) for c in range(cols))
    rule = "-" * (label_width + 1) + "+" + "-" * (cols * (width + 1))
    lines = [header, rule]
    for r in range(rows):
        label = str(r).rjust(label_width) if row_labels else ""
        owners = (cell(r, c) for c in range(cols))
        lines.append(
            label + " |" + "".join(" " + ("?" if o is None else str(o)).rjust(width) for o in owners)
        )
    return lines


@dataclass(frozen=True, slots=True, repr=False)
class SpatialMapping(TaskMapping):
    """``prod(shape)`` workers, one task each: worker ``w`` runs ``w`` unravelled over the dims.

    ``ranks[d]`` is the rank of dim ``d`` in the unravelling: the dim with the lowest rank varies slowest,
    the dim with the highest rank fastest. The default ``(0, 1, ..., n-1)`` is row-major, so in
    ``spatial(4, 8)`` worker 5 runs task ``(0, 5)`` and worker 8 runs ``(1, 0)``; with ``ranks=(1, 0)``
    worker 5 runs ``(1, 1)``.
    """

    shape: tuple[int, ...]
    ranks: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        shape = _shape(self.shape, "spatial()")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "ranks", _ranks(self.ranks, len(shape), "spatial()"))

    @property
    def num_workers(self) -> int:
        """``prod(shape)``."""
        return math.prod(self.shape)

    @property
    def task_shape(self) -> tuple[int, ...]:
        """``shape``."""
        return self.shape

    def _tasks(self, worker: int) -> list[Task]:
        index = [0] * len(self.shape)
        for d in sorted(range(len(self.shape)), key=self.ranks.__getitem__, reverse=True):
            worker, index[d] = divmod(worker, self.shape[d])
        return [tuple(index)]

    def _fmt(self) -> str:
        default = self.ranks == tuple(range(len(self.shape)))
        return _fmt_call("spatial", self.shape, () if default else (f"ranks={self.ranks}",))


@dataclass(frozen=True, slots=True, repr=False)
class RepeatMapping(TaskMapping):
    """One worker that runs every task of ``shape`` in a loop nest.

    ``ranks[d]`` is the rank of dim ``d`` in the nest: the dim with the lowest rank is the outermost loop.
    The default ``(0, 1, ..., n-1)`` is row-major (last dim innermost). ``attrs`` has one token per dim
    (`hidet_lang.ir.loop_attrs`): ``'.'`` a plain loop, ``'u'``/``'uN'``/``'u+'`` unrolled, ``'p'``/``'pN'``
    parallel (OpenMP, in CPU functions); neither changes the semantics. ``None`` means all plain and is stored as
    ``'.' * n``.
    """

    shape: tuple[int, ...]
    ranks: tuple[int, ...] | None = None
    attrs: str | None = None

    def __post_init__(self) -> None:
        shape = _shape(self.shape, "repeat()")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "ranks", _ranks(self.ranks, len(shape), "repeat()"))
        object.__setattr__(self, "attrs", _repeat_attrs(self.attrs, len(shape), "repeat()"))

    @property
    def num_workers(self) -> int:
        """Always 1."""
        return 1

    @property
    def loop_attrs(self) -> tuple[LoopAttr, ...]:
        """``attrs`` parsed: one loop attribute per dim (validated when the mapping was made)."""
        return parse_loop_attrs(self.attrs, len(self.shape), "repeat()")

    @property
    def task_shape(self) -> tuple[int, ...]:
        """``shape``."""
        return self.shape

    def _tasks(self, worker: int) -> list[Task]:
        n = len(self.shape)
        order = sorted(range(n), key=self.ranks.__getitem__)  # outermost loop first
        tasks = []
        for combo in product(*(range(self.shape[d]) for d in order)):
            index = [0] * n
            for d, v in zip(order, combo, strict=True):
                index[d] = v
            tasks.append(tuple(index))
        return tasks

    def _fmt(self) -> str:
        extra = []
        if self.ranks != tuple(range(len(self.shape))):
            extra.append(f"ranks={self.ranks}")
        if self.attrs != "." * len(self.shape):
            extra.append(f"attrs={self.attrs!r}")
        return _fmt_call("repeat", self.shape, extra)


@dataclass(frozen=True, slots=True, repr=False)
class ComposedMapping(TaskMapping):
    """``outer * inner``: each task of ``outer`` is split into the task grid of ``inner``.

    Both must have the same number of dims. ``num_workers = outer.num_workers * inner.num_workers`` and
    ``task_shape`` is the elementwise product. Worker ``w`` is outer worker ``w // inner.num_workers`` and
    inner worker ``w % inner.num_workers``; its tasks are ``outer_task * inner.task_shape + inner_task``
    (elementwise) for each outer task (outer loop) and each inner task (inner loop).
    """

    outer: TaskMapping
    inner: TaskMapping

    def __post_init__(self) -> None:
        for name in ("outer", "inner"):
            value = getattr(self, name)
            if not isinstance(value, TaskMapping):
                raise MappingTypeError(
                    f"ComposedMapping: {name} must be a TaskMapping, got {type(value).__name__} {value!r}"
                )
        if len(self.outer.task_shape) != len(self.inner.task_shape):
            raise ValueError(
                f"cannot compose {self.outer} (task shape {self.outer.task_shape}) with {self.inner} "
                f"(task shape {self.inner.task_shape}): both must have the same number of dims"
            )

    @property
    def num_workers(self) -> int:
        """``outer.num_workers * inner.num_workers``."""
        return self.outer.num_workers * self.inner.num_workers

    @property
    def task_shape(self) -> tuple[int, ...]:
        """The elementwise product of the two task shapes."""
        return tuple(a * b for a, b in zip(self.outer.task_shape, self.inner.task_shape, strict=True))

    def _tasks(self, worker: int) -> list[Task]:
        outer_worker, inner_worker = divmod(worker, self.inner.num_workers)
        inner_shape = self.inner.task_shape
        inner_tasks = self.inner._tasks(inner_worker)
        return [
            tuple(o * s + i for o, s, i in zip(outer_task, inner_shape, inner_task, strict=True))
            for outer_task in self.outer._tasks(outer_worker)
            for inner_task in inner_tasks
        ]

    def _fmt(self) -> str:
        inner = self.inner._fmt()
        if isinstance(self.inner, ComposedMapping):
            inner = f"({inner})"  # `*` is left-associative: keep the structure visible
        return f"{self.outer._fmt()} * {inner}"


@dataclass(frozen=True, slots=True)
class MappingOn:
    """A task mapping bound to a worker, as in ``for i, j in m.on(threadIdx.x)``.

    ``worker`` is any object (usually an IR expression); the frontend turns the pair into a
    task-mapping loop. ``bind_tuple``: one loop name binds the list of coordinates even for one dimension.
    """

    mapping: TaskMapping
    worker: Any
    bind_tuple: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.mapping, TaskMapping):
            raise MappingTypeError(
                f"MappingOn: mapping must be a TaskMapping, "
                f"got {type(self.mapping).__name__} {self.mapping!r}"
            )


# ----------------------------------------------------------------------------------------------------------
# constructors


def spatial(*shape: int, ranks: Sequence[int] | None = None) -> SpatialMapping:
    """A spatial mapping: ``prod(shape)`` workers, each running one task (see ``SpatialMapping``).

    ``spatial(4, 8)`` and ``spatial((4, 8))`` are the same; ``ranks`` orders the dims in the unravelling of
    the worker index (lowest rank slowest; default row-major).
    """
    return SpatialMapping(_shape_args(shape, "spatial()"), ranks)


def repeat(*shape: int, ranks: Sequence[int] | None = None, attrs: str | None = None) -> RepeatMapping:
    """A repeat mapping: one worker running all tasks of ``shape`` in a loop nest (see ``RepeatMapping``).

    ``ranks`` orders the loops (lowest rank outermost; default row-major); ``attrs`` has one token per dim:
    ``'.'`` plain, ``'u'``/``'uN'``/``'u+'`` unrolled, ``'p'``/``'pN'`` parallel.
    """
    return RepeatMapping(_shape_args(shape, "repeat()"), ranks, attrs)


def _divisors(n: int) -> list[int]:
    small, large = [], []
    for d in range(1, math.isqrt(n) + 1):
        if n % d == 0:
            small.append(d)
            if d != n // d:
                large.append(n // d)
    return small + large[::-1]


def auto_map(*task_shape: int, workers: int, ranks: Sequence[int] | None = None) -> ComposedMapping:
    """``repeat(...) * spatial(...)`` covering ``task_shape`` exactly with ``workers`` workers.

    Workers go to the innermost (highest-ranked; by default the last) dims first: for each dim in that
    order, the spatial extent is ``gcd(remaining workers, extent)`` and the rest of the extent is repeated.
    ``ranks`` applies to both factors. ``auto_map(64, 8, workers=128)`` is
    ``repeat(4, 1) * spatial(16, 8)``.

    This succeeds exactly when ``workers`` divides the number of tasks ``prod(task_shape)``; otherwise a
    ``ValueError`` says why and suggests worker counts that work.
    """
    func = "auto_map()"
    shape = _shape_args(task_shape, func)
    count = _positive_int(workers, f"{func}: workers")
    rank = _ranks(ranks, len(shape), func)
    spatial_shape = [1] * len(shape)
    remaining = count
    for d in sorted(range(len(shape)), key=rank.__getitem__, reverse=True):
        g = math.gcd(remaining, shape[d])
        spatial_shape[d] = g
        remaining //= g
    if remaining != 1:
        total = math.prod(shape)
        divisors = _divisors(total)
        below = max(d for d in divisors if d <= count)
        above = [d for d in divisors if d > count]
        suggestion = f"workers={below}" + (f" or workers={above[0]}" if above else "")
        reason = (
            f"there are more workers than tasks ({total})"
            if count > total
            else f"{count} does not divide the number of tasks ({total})"
        )
        call = _fmt_call("auto_map", shape, (f"workers={count}",))
        raise ValueError(
            f"{call}: {count} workers cannot cover the task shape {shape} exactly: {reason}; "
            f"the worker count must divide {total}, e.g. {suggestion}"
        )
    repeat_shape = [e // s for e, s in zip(shape, spatial_shape, strict=True)]
    return repeat(*repeat_shape, ranks=rank) * spatial(*spatial_shape, ranks=rank)
